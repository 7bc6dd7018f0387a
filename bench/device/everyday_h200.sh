#!/usr/bin/env bash
# One device call (about 4 minutes): nvmeter run against a reference around the same whole
# process (3 trials of bench/matmul_loop.py, ~5 s each), then the GPU tests of nvmeter run,
# the pytest plugin and EnergyMonitor. Run on the lent H200 from the repository root:
#   NVMETER_COMMIT=<sha> bash bench/device/everyday_h200.sh
# Writes under $OUT: run-reference-h200.json, run-reference.log, everyday-gpu-tests.log.
set -u -o pipefail
export PYTHONUNBUFFERED=1
header="# commit ${NVMETER_COMMIT:-unknown}  board $(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)  $(date -u +%FT%TZ)"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
{
  echo "$header"
  nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,temperature.gpu,persistence_mode --format=csv
  s=$SECONDS
  timeout 200 python3 bench/run_reference.py --trials 3 --seconds 5 --out "$OUT/run-reference-h200.json"
  echo "run_reference rc=$? wall $((SECONDS - s)) s"
} 2>&1 | tee "$OUT/run-reference.log" | tail -12
{
  echo "$header"
  # nvmeter run first, in its own pytest process: no CUDA context of the test process on the board
  timeout 150 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -s tests/test_command_gpu.py
  timeout 150 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -s \
    tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
} 2>&1 | tee "$OUT/everyday-gpu-tests.log" | tail -40

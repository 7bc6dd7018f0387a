#!/usr/bin/env bash
# One device call: install, the MNIST workloads' evaluation, then every gpu-marked test.
# Usage (repository root, on the H200): NVMETER_COMMIT=<sha> bash bench/device/gpu_suite.sh
# Needs the dataset cache carried as .data; writes under $OUT.
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
board=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
header="# commit ${NVMETER_COMMIT:-unknown}  board $board  $(date -u +%FT%TZ)"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
{
  echo "$header"
  s=$SECONDS
  timeout 330 python3 -m nvmeter.workloads.evaluate --out "$OUT" ${EVAL_ARGS:-}
  echo "evaluate rc=$? wall $((SECONDS - s)) s"
} 2>&1 | tee "$OUT/run.log" | tail -40
{
  echo "$header"
  timeout 240 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v ${TEST_ARGS:-tests/test_gpu.py tests/test_workloads_gpu.py}
} 2>&1 | tee "$OUT/gpu-tests.log" | tail -30

#!/usr/bin/env bash
# One device call on one H200 (~4 min), carrying .data: every gpu-marked test that needs one board
# (windows, probes, measure(), the fork case, the scorer, nvmeter run, the plugin, begin/end).
# Logs in $OUT/gpu-tests.log (commit, board, pytest's summary line).
# Usage (repository root): NVMETER_COMMIT=<sha> bash bench/device/gpu_tests_h200.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
board=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
{
  echo "# commit ${NVMETER_COMMIT:-unknown}  board $board  $(date -u +%FT%TZ)"
  timeout 200 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_gpu.py tests/test_score_gpu.py
  timeout 120 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_command_gpu.py
  timeout 90 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
} 2>&1 | tee "$OUT/gpu-tests.log" | grep -E "^# commit|passed|failed|FAILED|ERROR"

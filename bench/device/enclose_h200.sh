#!/usr/bin/env bash
# One device call on one H200 (~8 min; under the 10-minute limit even if every step runs to its
# time-out): the gpu-marked tests of the meter, then issue 10's warm and single-call cells with
# references that cannot drift away from their trials (--enclose: each warm stream inside one
# unbroken reference; isolated single calls as the singles' own reference).
# Usage (repository root): NVMETER_COMMIT=<sha> [BUDGET_S=240] [KINDS=bf16cap,fp32big,copy,duty] \
#   [GPU_TESTS=0] [WARM_S=0.5,1,2] [ONLY=warm,single,stall,measure] [STEP_LOG=1] [EXTRA="--measure-runs 4"] \
#   bash bench/device/enclose_h200.sh
# GPU_TESTS=0 skips the tests (a second call on the same commit, or a bench-only change).
# ONLY adds trial types (stall: 0.5 s windows 0.3-2 s after one call that waited 60-150 ms).
# STEP_LOG=1: every other warm trial logs the counter's steps inside its window (--step-log).
# EXTRA: more flags for the bench's run (measure()'s --measure-runs, --measure-target, --measure-max-s).
# Writes under $OUT: gpu-tests.log, enclose.json (saved as it goes), enclose.log, summary.{md,json}.
set -u -o pipefail
export PYTHONUNBUFFERED=1
source bench/device/common.sh
install
[ "${GPU_TESTS:-1}" = 0 ] || {
  header 0
  timeout 150 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_gpu.py
  timeout 50 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_command_gpu.py
  timeout 50 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
} 2>&1 | tee "$OUT/gpu-tests.log" | grep -E "^# commit|passed|failed|FAILED|ERROR"
{
  header 0
  timeout $((${BUDGET_S:-240} + 45)) python3 bench/window_accuracy.py run --kinds "${KINDS:-bf16cap,fp32big,copy,duty}" \
    --only "${ONLY:-warm,single}" --warm-s "${WARM_S:-0.5}" --exit return --enclose --no-zeus --quiet \
    --budget-s "${BUDGET_S:-240}" ${STEP_LOG:+--step-log} ${EXTRA:-} --out "$OUT/enclose.json"
  echo "run rc=$?"
} 2>&1 | tee "$OUT/enclose.log" | tail -5
python3 bench/window_accuracy.py analyze "$OUT/enclose.json" --json "$OUT/summary.json" --markdown "$OUT/summary.md" \
  >/dev/null 2>&1 && grep -E "^###|warm \||stall \||single|measure" "$OUT/summary.md"

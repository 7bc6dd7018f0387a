#!/usr/bin/env bash
# One device call: the plugin's and monitor's gpu tests, then bench/counter_coverage.py (10 and 25 ms
# bursts sliding through the counter's period, ~30 s each), then issue 10's data for a measured state
# part at the cap (bf16 at the power limit: warm 0.25-1 s windows, windows after a pause, measure()).
# Usage (repository root): NVMETER_COMMIT=<sha> [BUDGET_S=300] bash bench/device/coverage_h100.sh
# Writes under $OUT: gpu-tests.log, coverage-*.json and .txt, coverage.png, enclose.json, summary.*.
set -u -o pipefail
export PYTHONUNBUFFERED=1
source bench/device/common.sh
install
gpu_tests "$OUT/gpu-tests.log" 60 tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
grep -E "^# commit|passed|failed|FAILED|ERROR" "$OUT/gpu-tests.log"
for ms in 10 25; do
  { header 0; timeout 60 python3 bench/counter_coverage.py run --burst-ms "$ms" --out "$OUT/coverage-${ms}ms.json"; } \
    > "$OUT/coverage-${ms}ms.log" 2>&1
  python3 bench/counter_coverage.py analyze "$OUT/coverage-${ms}ms.json" | tee "$OUT/coverage-${ms}ms.txt"
done
python3 bench/counter_coverage.py analyze "$OUT"/coverage-*ms.json --plot "$OUT/coverage.png" > /dev/null
{
  header 0
  timeout $((${BUDGET_S:-300} + 45)) python3 bench/window_accuracy.py run --kinds bf16cap \
    --only warm,stall,measure --warm-s 0.25,0.5,1 --exit return --enclose --no-zeus --quiet \
    --budget-s "${BUDGET_S:-300}" --measure-runs 6 --measure-target 0.02 --measure-max-s 12 \
    --out "$OUT/enclose.json"
  echo "run rc=$?"
} 2>&1 | tee "$OUT/enclose.log" | tail -3
python3 bench/window_accuracy.py analyze "$OUT/enclose.json" --json "$OUT/summary.json" --markdown "$OUT/summary.md" \
  >/dev/null 2>&1 && grep -E "^###|warm \||stall \||measure" "$OUT/summary.md"

#!/usr/bin/env bash
# One device call: bench/counter_coverage.py on this board (10 and 20 ms bursts), then single isolated
# calls started 0 and 30 ms after the window's start step, in turn (--single-delays-ms 0,30), against
# isolated references read with their own pauses' idle. Small outputs are packed into small.tgz (the
# device returns only a few files).
# Usage (repository root): NVMETER_COMMIT=<sha> [BUDGET_S=330] [KINDS=fp32,copy,duty,bf16cap] bash bench/device/phase_h100.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1
source bench/device/common.sh
install
mkdir -p "$OUT/w/small"
for ms in 10 20; do
  { header 0; timeout 60 python3 bench/counter_coverage.py run --burst-ms "$ms" --out "$OUT/coverage-${ms}ms.json"; } \
    > "$OUT/w/small/coverage-${ms}ms.log" 2>&1
  python3 bench/counter_coverage.py analyze "$OUT/coverage-${ms}ms.json" | tee "$OUT/w/small/coverage-${ms}ms.txt"
  pack small
done
{
  header 0
  timeout $((${BUDGET_S:-330} + 45)) python3 bench/window_accuracy.py run --kinds "${KINDS:-fp32,copy,duty,bf16cap}" \
    --only single --single-delays-ms 0,30 --single-runs 20 --iso-idle --enclose --no-zeus --quiet \
    --budget-s "${BUDGET_S:-330}" --out "$OUT/single.json"
  echo "run rc=$?"
} 2>&1 | tee "$OUT/w/small/single.log" | tail -3
python3 bench/counter_coverage.py analyze "$OUT"/coverage-*ms.json --plot "$OUT/w/small/coverage.png" > /dev/null
python3 bench/window_accuracy.py analyze "$OUT/single.json" --json "$OUT/w/small/summary.json" \
  --markdown "$OUT/w/small/summary.md" >/dev/null 2>&1 && grep -E "^###|single" "$OUT/w/small/summary.md"
python3 bench/single_phase.py "$OUT/single.json" > "$OUT/w/small/single-phase.txt" 2>&1; tail -30 "$OUT/w/small/single-phase.txt"
pack small

#!/usr/bin/env bash
# One device call: every gpu-marked test of the meter, the command, the plugin and the monitor, then
# bench/counter_coverage.py --unpolled (every other burst with the polls paused; 10 and 20 ms bursts).
# Small outputs are packed into small.tgz after each step (the device returns only a few files).
# Usage (repository root): NVMETER_COMMIT=<sha> [BURSTS_MS="10 20"] bash bench/device/unpolled_h100.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1
source bench/device/common.sh
install
mkdir -p "$OUT/w/small"
log="$OUT/w/small/gpu-tests.log"
gpu_tests "$log" 150 tests/test_gpu.py; pack small
gpu_tests "$log" 50 tests/test_command_gpu.py; pack small
gpu_tests "$log" 60 tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py; pack small
grep -E "^# commit|passed|failed|FAILED|ERROR" "$log"
for ms in ${BURSTS_MS:-10 20}; do
  { header 0; timeout 60 python3 bench/counter_coverage.py run --unpolled --burst-ms "$ms" \
      --out "$OUT/w/small/unpolled-${ms}ms.json"; } > "$OUT/w/small/unpolled-${ms}ms.log" 2>&1
  python3 bench/counter_coverage.py analyze "$OUT/w/small/unpolled-${ms}ms.json" | tee "$OUT/w/small/unpolled-${ms}ms.txt"
  pack small
done
python3 bench/counter_coverage.py analyze "$OUT"/w/small/unpolled-*ms.json --plot "$OUT/w/small/unpolled.png" > /dev/null
pack small

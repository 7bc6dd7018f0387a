#!/usr/bin/env bash
# One device call on one H200 (<= 10 min): the core and everyday gpu tests and nvmeter run's
# reference (as bench/device/evidence_h200.sh), then the window bench's check kinds on this board
# (one more board that no constant was fitted on). Everything in $OUT/evidence.tar.gz.
# Usage (repository root, .whl carried for ZeusMonitor): NVMETER_COMMIT=<sha> bash bench/device/evidence2_h200.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1
ev=/tmp/evidence && mkdir -p "$ev"
trap 'tar -czf "$OUT/evidence.tar.gz" -C "$ev" .' EXIT
source bench/device/common.sh
install
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
header=$(header 0)
echo "$header" | tee "$ev/host.log"
tests() {  # log limit files...
  local log=$1 limit=$2; shift 2
  gpu_tests "$ev/$log" "$limit" "$@"
  echo "$log rc=$? $((SECONDS - s)) s"
}
s=$SECONDS
timeout 110 python3 bench/run_reference.py --trials 3 --seconds 5 --out "$ev/run-reference-h200.json" \
  > "$ev/run-reference.log" 2>&1; echo "run_reference rc=$? $((SECONDS - s)) s"
tests everyday.log 90 tests/test_command_gpu.py
tests everyday.log 70 tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
tests core.log 100 tests/test_gpu.py -k "energy_window or measure or fork or probe_quick"
left=$((560 - (SECONDS - s)))
timeout $left python3 bench/window_accuracy.py run --kinds copy,duty,fp32big --budget-s $((left - 25)) \
  --out "$ev/acc-c.json" > "$ev/acc-c.log" 2>&1; echo "bench rc=$? $((SECONDS - s)) s"
tail -n 2 "$ev"/*.log

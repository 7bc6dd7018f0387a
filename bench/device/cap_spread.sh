#!/usr/bin/env bash
# One device call (~9 min): error model 10's check on a board none of its figures came from.
# 1. `nvmeter probe --only cap_spread` (the board's s(L) at the power cap: three runs, ~40 s);
# 2. bf16 at the cap: warm and stall 0.5 s windows and measure() runs (bench/window_accuracy.py,
#    as calls 42-44 ran them), to replay under model 10 with that probe's profile;
# 3. the gpu-marked tests (the cap-spread probe's own test keeps its record: a second probe, later).
# Usage (repository root): NVMETER_COMMIT=<sha> [BUDGET_S=240] [MEASURE_RUNS=4] [GPU_FILES=all|gpu]
#   bash bench/device/cap_spread.sh      (GPU_FILES=gpu: tests/test_gpu.py only, when device time is short)
# Writes $OUT/cap.tgz (cap/: board.txt, cap-probe.{json,log}, enclose.{json,log}, summary.md,
# gpu-tests.log, cap-spread-probe.json), packed after each step.
set -u -o pipefail
export PYTHONUNBUFFERED=1
source bench/device/common.sh
install
W="$OUT/w/cap"
mkdir -p "$W"
{ header 0; nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,temperature.gpu --format=csv; } > "$W/board.txt"
{ header 0; timeout 90 nvmeter probe --only cap_spread --no-cache --out "$W/cap-probe.json"; echo "probe rc=$?"; } \
  > "$W/cap-probe.log" 2>&1
tail -3 "$W/cap-probe.log"
pack cap
{
  header 0
  timeout $((${BUDGET_S:-240} + 45)) python3 bench/window_accuracy.py run --kinds bf16cap \
    --only warm,stall,measure --warm-s 0.5 --exit return --enclose --no-zeus --quiet \
    --budget-s "${BUDGET_S:-240}" --measure-runs "${MEASURE_RUNS:-4}" --measure-target 0.02 --measure-max-s 8 --out "$W/enclose.json"
  echo "run rc=$?"
} > "$W/enclose.log" 2>&1
tail -2 "$W/enclose.log"
python3 bench/window_accuracy.py analyze "$W/enclose.json" --markdown "$W/summary.md" >/dev/null 2>&1
pack cap
export NVMETER_GPU_OUT="$W"
gpu_tests "$W/gpu-tests.log" 200 tests/test_gpu.py
pack cap  # a call cut in the later files keeps this one's log
if [ "${GPU_FILES:-all}" = all ]; then
  gpu_tests "$W/gpu-tests.log" 50 tests/test_command_gpu.py
  pack cap
  gpu_tests "$W/gpu-tests.log" 50 tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
fi
grep -E "^# commit|passed|failed|FAILED|ERROR" "$W/gpu-tests.log"
pack cap

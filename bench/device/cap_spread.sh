#!/usr/bin/env bash
# One device call: error model 10's check on a board none of its figures came from. The default steps
# with BUDGET_S=240 can pass the 10 min a call may run (install, then at most 90 + 285 + 200 + 100 s);
# BUDGET_S=150 keeps them near 9 min. lead10 adds at most LEAD10_S + 45 s.
# Steps (STEPS, in this order by default; each packed when done, so a cut call keeps what ran):
#   probe:   `nvmeter probe --only cap_spread` (the board's s(L) at the power cap: three runs, ~40 s);
#   enclose: bf16 at the cap: warm and stall 0.5 s windows and measure() runs (bench/window_accuracy.py,
#            as calls 42-44 ran them), to replay under model 10 with that probe's profile;
#   gpu:     tests/test_gpu.py (the cap-spread probe's own test keeps its record: a second probe, later);
#   rest:    the command's, the pytest plugin's and the monitor's gpu tests;
#   lead10:  bf16 at the cap, warm 0.5 s windows inside references led by 10 s of calls (LEAD10_S
#            of budget, default 120): does the +-1% target hold once the limiter has settled?
#   fp32measure: FP32 4096^2 measure() runs against enclosing references (FP32M_S of budget, default
#            150; MEASURE_RUNS of them): the H100s' one measure() cell under 95% (10 of 11), and
#            GPU-0e2e6fe6's 2 of 8 (call 67). FP32M_MAX_S (default 8), FP32M_WARMUP_S and
#            FP32M_MIN_WINDOWS set measure()'s max_window_s, warmup_s and min_windows.
#   levels:  error model 13's check: `nvmeter probe --only run_levels` (kept in the user cache, as a
#            user's would be), then measure() runs at 2% of LEVELS_KINDS (default fp32,copy,duty;
#            MEASURE_RUNS each, default 6) against enclosing references (LEVELS_S of budget, default
#            240): the probe's figure held by work it was not measured on.
#   reference: `nvmeter probe --only reference` (~15 s): the J/TFLOP reference's raw record, kept so that
#            the H100s (one board's record in results/) reach the five boards a band needs.
#   coverage: `nvmeter probe --only coverage` (~15 s): 16 bursts of ~10 ms at phases over the counter's
#            period; a counter that senses part of each period reads some as nothing.
#   loads:   bench/level_loads.py: the run-level probe's restarts at FP32 4096² and 1024², alternating,
#            LOADS_STARTS of each (default 12: 127 s of runs on the simulated board's clock, plus the
#            context idle): a second level in watts or as a share?
# Usage (repository root): NVMETER_COMMIT=<sha> [BUDGET_S=240] [MEASURE_RUNS=4] [LEAD10_S=120]
#   [STEPS="probe enclose gpu rest"] bash bench/device/cap_spread.sh
#   (short of device time: STEPS="probe gpu enclose" runs the tests before the bench)
# Writes $OUT/cap.tgz (cap/: board.txt, cap-probe.{json,log}, enclose.{json,log}, summary.md,
# lead10.{json,log}, fp32measure.{json,log}, gpu-tests.log, cap-spread-probe.json).
set -u -o pipefail
export PYTHONUNBUFFERED=1
source bench/device/common.sh
W="$OUT/w/cap"
export NVMETER_GPU_OUT="$W"

step_probe() {
  { header 0; timeout 90 nvmeter probe --only cap_spread --no-cache --out "$W/cap-probe.json"; echo "probe rc=$?"; } \
    > "$W/cap-probe.log" 2>&1
  tail -3 "$W/cap-probe.log"
}

step_enclose() {
  {
    header 0
    timeout $((${BUDGET_S:-240} + 45)) python3 bench/window_accuracy.py run --kinds bf16cap \
      --only warm,stall,measure --warm-s 0.5 --exit return --enclose --no-zeus --quiet \
      --budget-s "${BUDGET_S:-240}" --measure-runs "${MEASURE_RUNS:-4}" --measure-target 0.02 \
      --measure-max-s 8 --out "$W/enclose.json"
    echo "run rc=$?"
  } > "$W/enclose.log" 2>&1
  tail -2 "$W/enclose.log"
  python3 bench/window_accuracy.py analyze "$W/enclose.json" --markdown "$W/summary.md" >/dev/null 2>&1
}

step_lead10() {
  {
    header 0
    timeout $((${LEAD10_S:-120} + 45)) python3 bench/window_accuracy.py run --kinds bf16cap \
      --only warm --warm-s 0.5 --lead-s 10 --exit return --enclose --no-zeus --quiet \
      --budget-s "${LEAD10_S:-120}" --out "$W/lead10.json"
    echo "run rc=$?"
  } > "$W/lead10.log" 2>&1
  tail -2 "$W/lead10.log"
}

step_fp32measure() {
  {
    header 0
    timeout $((${FP32M_S:-150} + 45)) python3 bench/window_accuracy.py run --kinds fp32 --only measure \
      --enclose --no-zeus --quiet --budget-s "${FP32M_S:-150}" --measure-runs "${MEASURE_RUNS:-8}" \
      --measure-target 0.02 --measure-max-s "${FP32M_MAX_S:-8}" ${FP32M_WARMUP_S:+--measure-warmup-s "$FP32M_WARMUP_S"} \
      ${FP32M_MIN_WINDOWS:+--measure-min-windows "$FP32M_MIN_WINDOWS"} --out "$W/fp32measure.json"
    echo "run rc=$?"
  } > "$W/fp32measure.log" 2>&1
  tail -2 "$W/fp32measure.log"
}

step_levels() {
  { header 0; timeout 120 nvmeter probe --only run_levels --out "$W/levels-probe.json"; echo "probe rc=$?"; } \
    > "$W/levels-probe.log" 2>&1
  tail -3 "$W/levels-probe.log"
  {
    header 0
    timeout $((${LEVELS_S:-240} + 45)) python3 bench/window_accuracy.py run --kinds "${LEVELS_KINDS:-fp32,copy,duty}" \
      --only measure --enclose --no-zeus --quiet --budget-s "${LEVELS_S:-240}" --measure-runs "${MEASURE_RUNS:-6}" \
      --measure-target 0.02 --measure-max-s 8 --out "$W/levels.json"
    echo "run rc=$?"
  } > "$W/levels.log" 2>&1
  tail -2 "$W/levels.log"
}

step_loads() {
  { header 0; timeout 300 python3 bench/level_loads.py --starts "${LOADS_STARTS:-12}" --out "$W/level-loads.json"; echo "run rc=$?"; } \
    > "$W/level-loads.log" 2>&1
  tail -6 "$W/level-loads.log"
}

step_reference() {  # the J/TFLOP reference's raw record: a family's band needs five boards' (bench/h200_band.py)
  { header 0; timeout 60 nvmeter probe --only reference --no-cache --out "$W/reference-probe.json"; echo "probe rc=$?"; } \
    > "$W/reference-probe.log" 2>&1
  tail -2 "$W/reference-probe.log"
}

step_coverage() {  # the coverage probe's first runs on hardware: does a Hopper counter sense all of each period?
  { header 0; timeout 60 nvmeter probe --only coverage --no-cache --out "$W/coverage-probe.json"; echo "probe rc=$?"; } \
    > "$W/coverage-probe.log" 2>&1
  tail -4 "$W/coverage-probe.log"
}

step_gpu() { gpu_tests "$W/gpu-tests.log" 300 tests/test_gpu.py; }  # ~210 s with the run-level probe

step_rest() {
  gpu_tests "$W/gpu-tests.log" 50 tests/test_command_gpu.py
  pack cap
  gpu_tests "$W/gpu-tests.log" 50 tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
}

STEPS=${STEPS:-probe enclose gpu rest reference}
for step in $STEPS; do  # before the install: a typo costs no device time
  declare -F "step_$step" >/dev/null || { echo "unknown step '$step' (probe, enclose, lead10, fp32measure, levels, reference, coverage, loads, gpu, rest)"; exit 2; }
done
install
mkdir -p "$W"
{ header 0; nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,temperature.gpu --format=csv; } > "$W/board.txt"
for step in $STEPS; do
  "step_$step"
  pack cap
done
[ -f "$W/gpu-tests.log" ] && grep -E "^# commit|passed|failed|FAILED|ERROR" "$W/gpu-tests.log" || true

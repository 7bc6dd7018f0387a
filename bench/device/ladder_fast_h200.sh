#!/usr/bin/env bash
# The fast Ladder kernels on one H200 (issue 16), in device calls of under 10 minutes each.
# Run from the repository root, the dataset cache carried as .data:
#   NVMETER_COMMIT=<sha> PART=bench bash bench/device/ladder_fast_h200.sh      # ~5 min
#   NVMETER_COMMIT=<sha> PART=sweep bash bench/device/ladder_fast_h200.sh      # up to 9 min
#   NVMETER_COMMIT=<sha> PART=evaluate bash bench/device/ladder_fast_h200.sh   # ~2-4 min
# then energy: NVMETER_COMMIT=<sha> bash bench/device/score_h200.sh ladder_d3_fast ladder_d4_fast
# PART=bench: the Ladder's GPU tests (seed and fast kernels at full shapes, the graph trainers), then
#   bench/ladder_step.py --parts check,step,profile,layers (checks, step times of plain/fused/fast, the
#   profile, per-layer kernels). Writes $OUT/ladder-gpu-tests.log, $OUT/ladder-step-h200/ladder_step.json
#   (saved as it goes) and $OUT/ladder-step-h200.log.
# PART=sweep: bench/ladder_step.py --parts sweep (launch shapes of the fast kernels on synthetic data; each
#   shape compiles its kernels anew, ~30-60 s a shape; saved after each). Writes $OUT/ladder-sweep-h200/
#   ladder_step.json and $OUT/ladder-sweep-h200.log.
# PART=evaluate: the per-draw floor tests of the fast methods (tests/test_workloads_gpu.py, draws 501 and 502),
#   then python -m nvmeter.workloads.evaluate on ladder_d3_fast and ladder_d4_fast (11 MNIST + 4 hold-out
#   draws of run seed 1, judged; per-call times). Writes $OUT/ladder-fast-floor-tests.log and
#   $OUT/ladder-fast-h200/ (record and log).
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
header="# commit ${NVMETER_COMMIT:-unknown}  board $(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)  $(date -u +%FT%TZ)"
case "${PART:-bench}" in
  bench)
    { echo "$header"; s=$SECONDS
      timeout 200 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_ladder_gpu.py
      echo "gpu tests rc=$? wall $((SECONDS - s)) s"; } 2>&1 | tee "$OUT/ladder-gpu-tests.log" | grep -E "^# commit|passed|failed|FAILED|ERROR|rc="
    { echo "$header"; s=$SECONDS
      timeout 330 python3 bench/ladder_step.py --out "$OUT/ladder-step-h200" --parts check,step,profile,layers
      echo "ladder_step rc=$? wall $((SECONDS - s)) s"; } 2>&1 | tee "$OUT/ladder-step-h200.log" | tail -40
    ;;
  sweep)
    { echo "$header"; s=$SECONDS
      timeout 540 python3 bench/ladder_step.py --out "$OUT/ladder-sweep-h200" --parts sweep
      echo "ladder_step sweep rc=$? wall $((SECONDS - s)) s"; } 2>&1 | tee "$OUT/ladder-sweep-h200.log" | tail -20
    ;;
  evaluate)
    { echo "$header"; s=$SECONDS
      timeout 120 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_workloads_gpu.py -k fast
      echo "floor tests rc=$? wall $((SECONDS - s)) s"; } 2>&1 | tee "$OUT/ladder-fast-floor-tests.log" | grep -E "passed|failed|FAILED|rc="
    { echo "$header"; s=$SECONDS
      timeout 450 python3 -m nvmeter.workloads.evaluate --out "$OUT/ladder-fast-h200" --methods ladder_d3_fast ladder_d4_fast
      echo "evaluate rc=$? wall $((SECONDS - s)) s"; } 2>&1 | tee "$OUT/ladder-fast-h200.log" | tail -30
    ;;
  *) echo "PART must be bench, sweep or evaluate"; exit 2 ;;
esac

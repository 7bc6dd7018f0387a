#!/usr/bin/env bash
# Issue 16 on one H200, the dataset cache carried as .data, from the repository root; each PART under 10 min:
#   NVMETER_COMMIT=<sha> PART=bench bash bench/device/speed_h200.sh      # ~7 min
#   NVMETER_COMMIT=<sha> PART=evaluate bash bench/device/speed_h200.sh   # ~3-5 min
# PART=bench: the Ladder's GPU tests and step bench (bench/device/ladder_fast_h200.sh PART=bench), the graph
#   MLP's step bench (bench/graph_mlp_step.py: one step a graph against 10 and 200), then the per-draw floor
#   and reset tests of the new methods (tests/test_workloads_gpu.py -k fast). Each packed as it ends:
#   $OUT/ladder.tgz, $OUT/graph-mlp.tgz, $OUT/floor.tgz.
# PART=evaluate: python -m nvmeter.workloads.evaluate on ladder_d3_fast and ladder_d4_fast
#   (11 MNIST + 4 hold-out draws of run seed 1, judged; per-call times): $OUT/evaluate.tgz.
# Run at 3cfeff6, whose evaluation also held graph_mlp_fast (withdrawn: slower). Energy afterwards: bench/device/score_h200.sh with the methods that pass.
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
. bench/device/common.sh
install
O=$OUT
mkdir -p "$O/w"
case "${PART:-bench}" in
  bench)
    mkdir -p "$O/w/ladder"
    OUT=$O/w/ladder PART=bench bash bench/device/ladder_fast_h200.sh
    OUT=$O pack ladder
    mkdir -p "$O/w/graph-mlp"
    { header 0; timeout 120 python3 bench/graph_mlp_step.py --out "$O/w/graph-mlp"; echo "graph_mlp_step rc=$?"; } \
      2>&1 | tee "$O/w/graph-mlp/graph-mlp-step.log" | grep -v "^ "
    OUT=$O pack graph-mlp
    mkdir -p "$O/w/floor"
    gpu_tests "$O/w/floor/floor-tests.log" 150 tests/test_workloads_gpu.py -k fast
    grep -E "passed|failed|FAILED" "$O/w/floor/floor-tests.log"
    OUT=$O pack floor
    ;;
  evaluate)
    mkdir -p "$O/w/evaluate"
    { header 0; s=$SECONDS
      timeout 500 python3 -m nvmeter.workloads.evaluate --out "$O/w/evaluate" \
        --methods ladder_d3_fast ladder_d4_fast
      echo "evaluate rc=$? wall $((SECONDS - s)) s"; } 2>&1 | tee "$O/w/evaluate/evaluate.log" | tail -30
    OUT=$O pack evaluate
    ;;
  *) echo "PART must be bench or evaluate"; exit 2 ;;
esac

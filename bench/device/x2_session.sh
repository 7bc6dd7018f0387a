#!/usr/bin/env bash
# One call on a two-GPU host, two lanes at once, each metering only its own board (NVML is per board):
#   lane a (GPU 0): evaluate $EVAL_A, then `nvmeter score` each of $SCORE_A;
#   lane b (GPU 1): the gpu-marked tests $TESTS_B, then `nvmeter score` each of $SCORE_B;
# then, if TWO_BOARDS=1, the two-board test with both GPUs visible.
# Usage (repository root, dataset cache carried as .data):
#   NVMETER_COMMIT=<sha> SCORE_A="..." SCORE_B="..." TESTS_B="..." bash bench/device/x2_session.sh
# Writes $OUT/lane-{a,b}.log and $OUT/{a,b}.tgz, re-packed after each step so a cut call keeps what ran.
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
source bench/device/common.sh
install
score() {  # lane gpu method...
  local lane=$1 gpu=$2; shift 2
  for m in "$@"; do
    header "$gpu"; s=$SECONDS
    timeout "${SCORE_TIMEOUT:-320}" python3 -m nvmeter.cli score "$m" --runs "${RUNS:-3}" --json "$OUT/w/$lane/score-h200/$m"
    echo "score $m rc=$? wall $((SECONDS - s)) s"; pack "$lane"
  done
}
lane_a() {
  export CUDA_VISIBLE_DEVICES=0; mkdir -p "$OUT/w/a"
  if [ -n "${EVAL_A:-}" ]; then
    header 0; s=$SECONDS
    timeout "${EVAL_TIMEOUT:-520}" python3 -m nvmeter.workloads.evaluate --out "$OUT/w/a/evaluate" --methods $EVAL_A
    echo "evaluate rc=$? wall $((SECONDS - s)) s"; pack a
  fi
  score a 0 ${SCORE_A:-}
}
lane_b() {
  export CUDA_VISIBLE_DEVICES=1; mkdir -p "$OUT/w/b"
  if [ -n "${TESTS_B:-}" ]; then
    { header 1; timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs $TESTS_B; } \
      2>&1 | tee "$OUT/w/b/gpu-tests.log" | tail -5
    pack b
  fi
  score b 1 ${SCORE_B:-}
}
lane_a > "$OUT/lane-a.log" 2>&1 &
lane_b > "$OUT/lane-b.log" 2>&1 &
wait
if [ "${TWO_BOARDS:-0}" = 1 ]; then
  { echo "# commit ${NVMETER_COMMIT:-unknown}  boards $(uuid 0) $(uuid 1)"
    timeout 60 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_gpu.py -k two_boards; } \
    > "$OUT/w/b/two-boards.log" 2>&1
  pack b
fi
tail -12 "$OUT/lane-a.log"; tail -12 "$OUT/lane-b.log"

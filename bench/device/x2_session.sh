#!/usr/bin/env bash
# One call on a two-GPU host: lane A (GPU 0) evaluates the methods in $EVAL_METHODS; lane B (GPU 1)
# runs the gpu-marked tests in $TESTS, then `nvmeter score` for $SCORE_METHODS; then the two-board
# test with both GPUs visible. Each lane meters only its own board (NVML per board).
# Usage (repository root, dataset cache carried as .data):
#   NVMETER_COMMIT=<sha> EVAL_METHODS="..." TESTS="..." SCORE_METHODS="..." bash bench/device/x2_session.sh
# Writes $OUT/bundle.tgz (everything) and the two lane logs.
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
uuid() { nvidia-smi --query-gpu=uuid --format=csv,noheader | sed -n "$(($1 + 1))p"; }
header() { echo "# commit ${NVMETER_COMMIT:-unknown}  board $(uuid "$1")  $(date -u +%FT%TZ)"; }
mkdir -p "$OUT/w"
lane_a() {
  export CUDA_VISIBLE_DEVICES=0
  header 0
  [ -n "${EVAL_METHODS:-}" ] || return 0
  s=$SECONDS
  timeout "${EVAL_TIMEOUT:-520}" python3 -m nvmeter.workloads.evaluate --out "$OUT/w/evaluate" --methods $EVAL_METHODS
  echo "evaluate rc=$? wall $((SECONDS - s)) s"
}
lane_b() {
  export CUDA_VISIBLE_DEVICES=1
  if [ -n "${TESTS:-}" ]; then
    { header 1; timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs $TESTS; } \
      2>&1 | tee "$OUT/w/gpu-tests.log" | tail -5
  fi
  for m in ${SCORE_METHODS:-}; do
    header 1
    s=$SECONDS
    timeout "${SCORE_TIMEOUT:-200}" python3 -m nvmeter.cli score "$m" --runs "${RUNS:-3}" --json "$OUT/w/score-h200/$m"
    echo "score $m rc=$? wall $((SECONDS - s)) s"
  done
}
lane_a > "$OUT/lane-a.log" 2>&1 &
lane_b > "$OUT/lane-b.log" 2>&1 &
wait
{ echo "# commit ${NVMETER_COMMIT:-unknown}  boards $(uuid 0) $(uuid 1)"
  timeout 60 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_gpu.py -k two_boards; } \
  > "$OUT/w/two-boards.log" 2>&1
tail -3 "$OUT/w/two-boards.log"
tar czf "$OUT/bundle.tgz" -C "$OUT" w && rm -rf "$OUT/w"
tail -25 "$OUT/lane-a.log"; tail -25 "$OUT/lane-b.log"

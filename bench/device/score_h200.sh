#!/usr/bin/env bash
# One device call: install, then `nvmeter score` for each method named (3 runs each), each with its log.
# Usage (repository root, on the H200, the dataset cache carried as .data):
#   NVMETER_COMMIT=<sha> bash bench/device/score_h200.sh graph_mlp [mlp_tf32 ...]
#   RUNS=1 ... for one run; SCORE_ARGS="--window-s 4" to change a default; GPU_TEST=1 first runs
#   tests/test_score_gpu.py (one short graph_mlp run, ~30 s).
# Writes under $OUT/score-h200/: <method>/run-NNN.json and score.log, <method>.log (phases, timed).
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
board=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
header="# commit ${NVMETER_COMMIT:-unknown}  board $board  $(date -u +%FT%TZ)"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
mkdir -p "$OUT/score-h200"
if [ "${GPU_TEST:-0}" = 1 ]; then
  { echo "$header"; timeout 120 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -s tests/test_score_gpu.py; } \
    2>&1 | tee "$OUT/score-h200/gpu-test.log" | tail -30
fi
for method in "$@"; do
  {
    echo "$header"
    nvidia-smi --query-gpu=name,temperature.gpu,power.draw,clocks.sm --format=csv,noheader
    s=$SECONDS
    python3 -m nvmeter.cli score "$method" --runs "${RUNS:-3}" --json "$OUT/score-h200/$method" ${SCORE_ARGS:-}
    echo "score $method rc=$? wall $((SECONDS - s)) s"
  } 2>&1 | tee "$OUT/score-h200/$method.log" | tail -25
done

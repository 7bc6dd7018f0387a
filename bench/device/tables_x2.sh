#!/usr/bin/env bash
# One call on a two-GPU host for the H200 tables: two lanes at once, one board each. A lane runs, in order,
#   the evaluation of $EVAL_<L> (python -m nvmeter.workloads.evaluate --resume, from the lane's own record
#     if a cut call left one under $RESUME_<L>), then `nvmeter score` for each of $SCORE_<L> (runs already
#     in results/score-h200/<method>/ are copied in first, so `--runs 3` adds only the missing ones), then,
#     if PROFILE_<L>=1, the Ladder step's profile (bench/ladder_h200.py --parts profile).
# Usage (repository root, dataset cache carried as .data):
#   NVMETER_COMMIT=<sha> EVAL_A="mlp_fp32 ..." EVAL_B="ladder_d4_fused ..." SCORE_A=ladder_d4_fused PROFILE_B=1 \
#     bash bench/device/tables_x2.sh
# Writes $OUT/lane-{a,b}.log and $OUT/{a,b}.tgz, re-packed after each step so a cut call keeps what ran.
set -u -o pipefail
export PYTHONUNBUFFERED=1 NVMETER_DATA_DIR=$PWD/.data
source bench/device/common.sh
install
lane() {  # lane gpu
  local l=$1 gpu=$2 up; up=$(echo "$1" | tr a-z A-Z)
  local eval_methods; eval_methods=$(eval echo "\${EVAL_$up:-}")
  local score_methods; score_methods=$(eval echo "\${SCORE_$up:-}")
  local resume; resume=$(eval echo "\${RESUME_$up:-}")
  local profile; profile=$(eval echo "\${PROFILE_$up:-0}")
  export CUDA_VISIBLE_DEVICES=$gpu; mkdir -p "$OUT/w/$l"
  if [ -n "$eval_methods" ]; then
    header "$gpu"; s=$SECONDS
    # shellcheck disable=SC2086
    timeout "${EVAL_TIMEOUT:-400}" python3 -m nvmeter.workloads.evaluate --out "$OUT/w/$l/evaluate" \
      --methods $eval_methods ${resume:+--resume $resume}
    echo "evaluate rc=$? wall $((SECONDS - s)) s"; pack "$l"
  fi
  for m in $score_methods; do
    header "$gpu"; s=$SECONDS
    mkdir -p "$OUT/w/$l/score-h200/$m"
    cp results/score-h200/"$m"/run-*.json "$OUT/w/$l/score-h200/$m/" 2>/dev/null
    timeout "${SCORE_TIMEOUT:-320}" python3 -m nvmeter.cli score "$m" --runs "${RUNS:-3}" --json "$OUT/w/$l/score-h200/$m"
    echo "score $m rc=$? wall $((SECONDS - s)) s"; pack "$l"
  done
  if [ "$profile" = 1 ]; then
    header "$gpu"; s=$SECONDS
    timeout "${PROFILE_TIMEOUT:-150}" python3 bench/ladder_h200.py --out "$OUT/w/$l/ladder-profile" --parts profile
    echo "profile rc=$? wall $((SECONDS - s)) s"; pack "$l"
  fi
}
lane a 0 > "$OUT/lane-a.log" 2>&1 &
lane b 1 > "$OUT/lane-b.log" 2>&1 &
wait
tail -15 "$OUT/lane-a.log"; tail -15 "$OUT/lane-b.log"

#!/usr/bin/env bash
# Issue 16: today's `nvmeter probe` (main at $OLD_COMMIT) against this tree's, full and quick, on each board.
# Usage (repository root of this branch; the device copy has git history):
#   OLD_COMMIT=<main's sha> [BOARDS="0 1"] [RUNS="old-full new-full new-quick old-quick"] [CONTROL=1] \
#     bash bench/device/probe_speed.sh
# BOARDS: nvidia-smi indices (each probed by its UUID), one after another (never two probes at once: their
#   polling would share the driver).
# RUNS: in this order on each board; CONTROL=1 adds old-full-2 (today's probe again: the run-to-run spread
#   that any difference must be judged against). Default ~250 s a board, ~385 s with CONTROL=1 (one 600 s call
#   holds two boards without the control, one board with it).
# Each tree runs from its own copy laid out as installed (nvmeter/, probes/ -> nvmeter/probes, workloads/ ->
# nvmeter/workloads, pyproject's package-dir) on PYTHONPATH, from a neutral directory, so both can run in
# one Python with no install; the copies sit inside their git trees, so each record names its commit.
# Writes, as each run ends: $OUT/<board>/<run>.json and .log; then compare-full.txt, compare-quick.txt,
# compare-control.txt (bench/probe_compare.py, with .json); $OUT/worker-start.txt (the worker's start,
# import and context, timed apart); $OUT/session.log.
# SIMULATE=1 runs it all on the simulated board (no GPU: a CPU check of the script itself).
set -u -o pipefail
export PYTHONUNBUFFERED=1
: "${OLD_COMMIT:?give the commit of main: OLD_COMMIT=<sha>}"
BOARDS=${BOARDS:-0}
RUNS=${RUNS:-old-full new-full new-quick old-quick}
[ "${CONTROL:-0}" = 1 ] && RUNS="$RUNS old-full-2"
NEW=$PWD
OLD=/tmp/nvmeter-old
log=$OUT/session.log
SIM=()
[ "${SIMULATE:-0}" = 1 ] && SIM=(--simulate)
smi() {  # nvidia-smi, or a stand-in on the simulated board
  if [ "${SIMULATE:-0}" = 1 ]; then echo "simulated"; else nvidia-smi "$@"; fi
}
uuid_of() {
  if [ "${SIMULATE:-0}" = 1 ]; then echo "sim"; else nvidia-smi -i "$1" --query-gpu=uuid --format=csv,noheader; fi
}

layout() {  # tree -> tree/.site (the installed layout), echoes the site path
  local tree=$1 site=$1/.site
  rm -rf "$site"; mkdir -p "$site"
  cp -r "$tree/nvmeter" "$site/nvmeter"
  cp -r "$tree/probes" "$site/nvmeter/probes"
  cp -r "$tree/workloads" "$site/nvmeter/workloads"
  echo "$site"
}
{
  echo "# new $(git -C "$NEW" rev-parse HEAD)  old $OLD_COMMIT  $(date -u +%FT%TZ)"
  rm -rf "$OLD"; git -C "$NEW" worktree prune
  git -C "$NEW" worktree add --detach "$OLD" "$OLD_COMMIT" >/dev/null || { echo "worktree add failed"; exit 1; }
  echo "old tree $(git -C "$OLD" rev-parse HEAD)"
  smi --query-gpu=index,name,uuid,driver_version,power.limit,temperature.gpu,clocks.sm --format=csv
} 2>&1 | tee "$log"
[ -d "$OLD" ] || exit 1
SITE_OLD=$(layout "$OLD"); SITE_NEW=$(layout "$NEW")
RUNDIR=$(mktemp -d)  # no nvmeter/ here: `python3 -m` puts the working directory first on sys.path

probe() {  # board uuid run
  local b=$1 uuid=$2 run=$3 site args=() s rc
  case $run in old-*) site=$SITE_OLD ;; *) site=$SITE_NEW ;; esac
  case $run in *-quick*) args=(--quick) ;; esac
  if [ "${SIMULATE:-0}" = 1 ]; then args+=("${SIM[@]}"); else args+=(--device "$uuid"); fi
  mkdir -p "$OUT/$b"
  {
    echo "# $run  board $b $uuid  $(date -u +%FT%TZ)  temp $(smi -i "$b" --query-gpu=temperature.gpu --format=csv,noheader)"
    s=$(date +%s.%N)
    (cd "$RUNDIR" && PYTHONPATH=$site timeout 400 python3 -m nvmeter.cli probe --no-cache "${args[@]}" \
      --out "$OUT/$b/$run.json.part")
    rc=$?
    [ "$rc" = 0 ] && mv "$OUT/$b/$run.json.part" "$OUT/$b/$run.json"
    echo "$run rc=$rc wall $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  } > "$OUT/$b/$run.log" 2>&1
  tail -1 "$OUT/$b/$run.log" | tee -a "$log"
}
compare() {  # board name old new
  local b=$1 name=$2
  [ -f "$OUT/$b/$3.json" ] && [ -f "$OUT/$b/$4.json" ] || return 0
  (cd "$RUNDIR" && PYTHONPATH=$SITE_NEW python3 "$NEW/bench/probe_compare.py" "$OUT/$b/$3.json" "$OUT/$b/$4.json" \
    --json "$OUT/$b/compare-$name.json") > "$OUT/$b/compare-$name.txt" 2>&1
  echo "board $b $name: $(tail -1 "$OUT/$b/compare-$name.txt")" | tee -a "$log"
}
for b in $BOARDS; do
  uuid=$(uuid_of "$b")
  for run in $RUNS; do probe "$b" "$uuid" "$run"; done
  compare "$b" full old-full new-full
  compare "$b" quick old-quick new-quick
  compare "$b" control old-full old-full-2
done
# the worker's start, timed apart: process and imports, torch (preload: no CUDA call), the context
b=${BOARDS%% *}; uuid=$(uuid_of "$b")
(cd "$RUNDIR" && PYTHONPATH=$SITE_NEW timeout 120 python3 - "$uuid" <<'EOF') > "$OUT/worker-start.txt" 2>&1
import sys, time
from nvmeter.worker.process import WorkerProcess
backend, uuid = ("cpu", None) if sys.argv[1] == "sim" else ("cuda", sys.argv[1])
for i in range(3):
    t0 = time.perf_counter(); w = WorkerProcess(backend, uuid); w.ping(); t1 = time.perf_counter()
    w.preload(wait=True); t2 = time.perf_counter(); w.open_context(); t3 = time.perf_counter()
    w.close()
    print(f"start+imports {t1 - t0:.2f} s  torch {t2 - t1:.2f} s  context {t3 - t2:.2f} s")
    time.sleep(3)
EOF
tee -a "$log" < "$OUT/worker-start.txt"
git -C "$NEW" worktree remove --force "$OLD" 2>/dev/null

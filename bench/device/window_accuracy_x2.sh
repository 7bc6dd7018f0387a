#!/usr/bin/env bash
# One call on a two-H200 host: the window benchmark on both boards at once, one process per board
# (each meters only its own board). Usage, from the repository root, `.whl` carried (ZeusMonitor):
#   NVMETER_COMMIT=<sha> bash bench/device/window_accuracy_x2.sh
#   KINDS_A=copy,duty,launch,fp32big KINDS_B=fp32,bf16cap ... swaps the boards' kinds (a later call);
#   BUDGET=420 is each board's wall time for its kinds, s; LIMIT=560 the hard stop (SIGTERM: it saves).
#   EXTRA_ARGS="--simulate" runs it on the simulated board (a dry run of this script anywhere);
#   EXTRA_ARGS="--only measure --measure-runs 20" runs measure() alone, 20 a kind (issue 10's cell).
# On a host with one GPU only lane a runs (KINDS_A on board 0).
# Writes $OUT/acc-{a,b}.json (saved as the run goes; a cut call keeps what ran) and acc-{a,b}.log.
set -u -o pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
if ls .whl/*.whl >/dev/null 2>&1; then  # ZeusMonitor: the bench runs without it if this fails
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
lane() {  # lane name gpu kinds
  echo "# commit ${NVMETER_COMMIT:-unknown}  $(date -u +%FT%TZ)"
  nvidia-smi -i "$2" --query-gpu=index,uuid,temperature.gpu,power.draw,power.limit,clocks.sm --format=csv
  s=$SECONDS
  CUDA_VISIBLE_DEVICES=$2 timeout "${LIMIT:-560}" python3 bench/window_accuracy.py run --kinds "$3" \
    --budget-s "${BUDGET:-420}" --out "$OUT/acc-$1.json" ${EXTRA_ARGS:-}
  echo "bench rc=$? wall $((SECONDS - s)) s"
}
lane a 0 "${KINDS_A:-fp32,bf16cap}" > "$OUT/acc-a.log" 2>&1 &
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  lane b 1 "${KINDS_B:-copy,duty,launch,fp32big}" > "$OUT/acc-b.log" 2>&1 &
fi
wait
for f in "$OUT"/acc-*.log; do tail -n 20 "$f"; done

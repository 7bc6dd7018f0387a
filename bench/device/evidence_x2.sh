#!/usr/bin/env bash
# One device call on a two-H200 host (kind nvidia-h200-x2, ~9 min), carrying .data (MNIST and
# Fashion-MNIST) for the scorer's GPU test:
#   1. both boards: a DDP training step over NCCL inside one distributed window (bench/ddp_energy.py);
#   2. side by side: board 0 runs two ranks on one board (counted once), then the core gpu tests
#      (windows, probes, measure(), the fork case, the scorer); board 1 runs nvmeter run against a
#      reference around the same process, then the gpu tests of nvmeter run, the plugin and begin/end;
#   3. both boards: the multi-board gpu tests.
# Everything lands in $OUT/evidence.tar.gz (one file: the device tool returns at most eight).
# Usage (repository root): NVMETER_COMMIT=<sha> bash bench/device/evidence_x2.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 GLOO_SOCKET_IFNAME=lo
export NVMETER_DATA_DIR=$PWD/.data
ev=/tmp/evidence && mkdir -p "$ev"
trap 'tar -czf "$OUT/evidence.tar.gz" -C "$ev" .' EXIT  # a cut call keeps what ran
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
header="# commit ${NVMETER_COMMIT:-unknown}  $(date -u +%FT%TZ)"
{ echo "$header"; nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,temperature.gpu --format=csv; } \
  | tee "$ev/host.log"
tests() {  # log limit files...
  local log=$1 limit=$2; shift 2
  { echo "$header  board $(nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=uuid --format=csv,noheader)"
    timeout "$limit" python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs "$@"; } >> "$ev/$log" 2>&1
}
s=$SECONDS
timeout 170 python3 -m torch.distributed.run --nproc-per-node 2 bench/ddp_energy.py --unit ddp --out "$ev" \
  > "$ev/torchrun-ddp.log" 2>&1; echo "ddp rc=$? $((SECONDS - s)) s"
lane0() {
  export CUDA_VISIBLE_DEVICES=0
  timeout 100 python3 -m torch.distributed.run --nproc-per-node 2 bench/ddp_energy.py --unit shared --out "$ev" \
    > "$ev/torchrun-shared.log" 2>&1; echo "shared rc=$?"
  tests core.log 250 tests/test_gpu.py tests/test_score_gpu.py; echo "core tests rc=$?"
}
lane1() {
  export CUDA_VISIBLE_DEVICES=1
  timeout 120 python3 bench/run_reference.py --trials 3 --seconds 5 --out "$ev/run-reference-h200.json" \
    > "$ev/run-reference.log" 2>&1; echo "run_reference rc=$?"
  tests everyday.log 120 tests/test_command_gpu.py; echo "command tests rc=$?"
  tests everyday.log 120 tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py; echo "plugin tests rc=$?"
}
lane0 & lane1 & wait
tests job.log 80 tests/test_gpu_job.py; echo "job tests rc=$?"
echo "total $((SECONDS - s)) s"
tail -n 3 "$ev"/*.log

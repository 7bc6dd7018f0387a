#!/usr/bin/env bash
# One device call on a host with two GPUs (kind nvidia-h200-x2), ~4 min: bench/ddp_energy.py's
# two units under torchrun (a DDP step over NCCL on both boards; two ranks on one board), then
# the gpu-marked multi-board tests. NVLink multicast stays off (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1); the meter's gloo group stays on loopback (one host).
# Usage (repository root): NVMETER_COMMIT=<sha> bash bench/device/ddp_x2.sh
# Writes under $OUT (6 files): ddp-energy.json (both units, saved after each step),
# ddp-energy.log, torchrun-ddp.log, torchrun-shared.log, gpu-tests-job.log, host.log.
set -u -o pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 GLOO_SOCKET_IFNAME=lo
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
header="# commit ${NVMETER_COMMIT:-unknown}  $(date -u +%FT%TZ)"
{
  echo "$header"
  nvidia-smi --query-gpu=index,name,uuid,driver_version,power.draw,power.limit,temperature.gpu,clocks.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
} 2>&1 | tee "$OUT/host.log"
run_unit() {  # unit timeout_s [env...]
  local unit=$1 limit=$2; shift 2
  { echo "$header"; s=$SECONDS
    env "$@" timeout "$limit" python3 -m torch.distributed.run --nproc-per-node 2 bench/ddp_energy.py --unit "$unit" --out "$OUT"
    echo "$unit rc=$? wall $((SECONDS - s)) s"; } 2>&1 | tee "$OUT/torchrun-$unit.log" | grep -v '^\[rank' | tail -15
}
run_unit ddp 200
run_unit shared 130 CUDA_VISIBLE_DEVICES=0
{ echo "$header"; timeout 120 python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs tests/test_gpu_job.py; } \
  2>&1 | tee "$OUT/gpu-tests-job.log" | tail -12

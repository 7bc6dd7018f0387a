#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200, <= 10 min), carrying .data (MNIST, Fashion-MNIST):
# the core gpu tests (windows, probes, measure(), the fork case), nvmeter run against a reference
# around the same process and the gpu tests of nvmeter run, the plugin and begin/end, two ranks on
# one board counted once (bench/ddp_energy.py --unit shared), then the scorer's gpu test.
# Everything lands in $OUT/evidence.tar.gz (one file; a cut call keeps what ran).
# Usage (repository root): NVMETER_COMMIT=<sha> bash bench/device/evidence_h200.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 GLOO_SOCKET_IFNAME=lo
export NVMETER_DATA_DIR=$PWD/.data
ev=/tmp/evidence && mkdir -p "$ev"
trap 'tar -czf "$OUT/evidence.tar.gz" -C "$ev" .' EXIT
source bench/device/common.sh
install
header=$(header 0)
{ echo "$header"; nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,temperature.gpu --format=csv; } | tee "$ev/host.log"
tests() {  # log limit files...
  local log=$1 limit=$2; shift 2
  gpu_tests "$ev/$log" "$limit" "$@"
  echo "$log rc=$? $((SECONDS - s)) s"
}
s=$SECONDS
tests core.log 200 tests/test_gpu.py
timeout 110 python3 bench/run_reference.py --trials 3 --seconds 5 --out "$ev/run-reference-h200.json" \
  > "$ev/run-reference.log" 2>&1; echo "run_reference rc=$? $((SECONDS - s)) s"
tests everyday.log 90 tests/test_command_gpu.py
tests everyday.log 80 tests/test_pytest_plugin_gpu.py tests/test_monitor_gpu.py
timeout 60 python3 -m torch.distributed.run --nproc-per-node 2 bench/ddp_energy.py --unit shared --out "$ev" \
  > "$ev/torchrun-shared.log" 2>&1; echo "shared rc=$? $((SECONDS - s)) s"
tests score.log $((575 - (SECONDS - s))) tests/test_score_gpu.py
tail -n 2 "$ev"/*.log

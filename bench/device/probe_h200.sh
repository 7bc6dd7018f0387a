#!/usr/bin/env bash
# One device call: install, full probe, check, quick probe, GPU tests.
# Run on the lent H200 from the repository root; writes under $OUT (4 files).
set -u -o pipefail
export PYTHONUNBUFFERED=1
log=$OUT/run.log
{
  echo "# commit ${NVMETER_COMMIT:-unknown}  $(date -u +%FT%TZ)"
  python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 1
  nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,temperature.gpu,clocks.sm --format=csv
  echo "## nvmeter probe (full)"
  s=$SECONDS; nvmeter probe --out "$OUT/probe-h200.json"; echo "probe rc=$? wall $((SECONDS - s)) s"
  echo "## nvmeter check --probe"
  nvmeter check --probe "$OUT/probe-h200.json"; echo "check rc=$?"
  echo "## nvmeter probe --quick"
  s=$SECONDS; nvmeter probe --quick --out "$OUT/probe-quick.json"; echo "quick rc=$? wall $((SECONDS - s)) s"
} 2>&1 | tee "$log"
echo "## pytest -m gpu" | tee -a "$log"
{
  echo "# commit ${NVMETER_COMMIT:-unknown}  board $(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)"
  python3 -m pytest -m gpu -v -p no:cacheprovider -o addopts="" tests/test_gpu.py
} 2>&1 | tee "$OUT/gpu-tests.log" | tail -25 | tee -a "$log"

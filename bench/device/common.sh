# Sourced by the device scripts (from the repository root): what every one of them does first.
#   install              the checkout, editable, without its dependencies (the device has them)
#   uuid N               board N's NVML UUID (CUDA order)
#   header N             the log header: commit (NVMETER_COMMIT: the device copy's git shows only its
#                        base commit), board N, time
#   pack LANE            $OUT/w/LANE as $OUT/LANE.tgz, replaced whole (a cut call keeps the last pack)
#   gpu_tests LOG S F..  the gpu-marked tests in files F.., at most S seconds, appended to LOG with $header
install() {
  python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
}
uuid() { nvidia-smi --query-gpu=uuid --format=csv,noheader | sed -n "$(($1 + 1))p"; }
header() { echo "# commit ${NVMETER_COMMIT:-unknown}  board $(uuid "$1")  $(date -u +%FT%TZ)"; }
pack() { tar czf "$OUT/$1.tgz.part" -C "$OUT/w" "$1" && mv "$OUT/$1.tgz.part" "$OUT/$1.tgz"; }
gpu_tests() {
  local log=$1 limit=$2; shift 2
  { header 0; timeout "$limit" python3 -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs "$@"; } >> "$log" 2>&1
}

#!/usr/bin/env bash
# On a GPU machine (no LLVM needed): builds lethe-calibrate with the CUDA
# runtime (scripts/build-runtime.sh: cmake, ninja, nvcc for sm_90), runs it
# over every GPU the machine has, and keeps what it wrote:
#   OUTDIR/<card>-calibrated.json        the device profile (--device FILE)
#   OUTDIR/<card>-calibrate.md           the summary it printed
#   OUTDIR/<card>-calibrate-samples.json the raw measurements
#   OUTDIR/build.log
# <card> is h100, h200 or a100 when nvidia-smi names one of them (then
# devices/<card>.json is the base the unmeasured fields come from), else
# the GPU's name in lower case.
#
# Usage: bench/gpu_calibrate.sh [OUTDIR]   (default $OUT, else .gpu-calibrate)
#   LETHE_CALIBRATE_ARGS  more arguments for lethe-calibrate (--quick,
#                         --gpus 1, --no-gate, ...)
# With the device tool, one call (about a minute to build, one to measure):
#   run(command="bash bench/gpu_calibrate.sh")
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-.gpu-calibrate}}
mkdir -p "$out"
# NVLink multicast stays off on shared GPU hosts (and in every result here).
export NCCL_NVLS_ENABLE=0
export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}

start=$(date +%s)
if ! scripts/build-runtime.sh lethe-calibrate > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "gpu_calibrate: the runtime build failed (log: $out/build.log)"
  exit 1
fi
echo "gpu_calibrate: built in $(( $(date +%s) - start )) s"

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
card=$(echo "$gpu" | tr 'A-Z' 'a-z' | grep -oE 'h100|h200|a100' | head -1 || true)
base=()
if [[ -n $card && -f devices/$card.json ]]; then
  base=(--base "devices/$card.json" --name "$card")
else
  card=$(echo "${gpu:-gpu}" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
fi
nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.max,pcie.link.width.max \
  --format=csv 2>/dev/null | tee "$out/nvidia-smi.csv"

# shellcheck disable=SC2086
"$LETHE_RUNTIME_BUILD_DIR/bin/lethe-calibrate" "${base[@]}" \
  --out "$out/$card-calibrated.json" \
  --samples "$out/$card-calibrate-samples.json" \
  ${LETHE_CALIBRATE_ARGS:-} | tee "$out/$card-calibrate.md"
rc=${PIPESTATUS[0]}
echo "gpu_calibrate: lethe-calibrate exited $rc; total $(( $(date +%s) - start )) s"
ls -l "$out"
exit "$rc"

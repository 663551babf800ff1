#!/usr/bin/env bash
# On a GPU machine: measures the CUDA runtime and writes a markdown report.
#   - lethe-rt-bench: pinned copy bandwidth (plain CUDA vs the runtime, each
#     direction alone and both at once, beside a GEMM loop), GEMM TFLOP/s,
#     replay-kernel accuracy;
#   - the example programs (test/integration/programs) in timing mode, with
#     real GEMMs and with GEMMs replayed at their planned time: step time,
#     measured peak vs arena + fixed overhead, stream busy time, copy rate;
#   - their checksums: planned = unplanned, negative variants differ.
# Usage: bench/runtime-bench.sh [REPORT.md]
#   (default bench/results/runtime-<device>.md; JSON reports beside it in
#    $LETHE_BENCH_JSON_DIR, default a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
export NCCL_NVLS_ENABLE=0
scripts/build-runtime.sh >/dev/null
bin=$LETHE_RUNTIME_BUILD_DIR/bin
programs=$LETHE_RUNTIME_BUILD_DIR/programs

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
slug=$(echo "$gpu" | tr 'A-Z' 'a-z' | grep -oE 'h100|h200|a100|b200|l40s' |
       head -1 || true)
slug=${slug:-$(echo "$gpu" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')}
report=${1:-bench/results/runtime-$slug.md}
json=${LETHE_BENCH_JSON_DIR:-$(mktemp -d)}
mkdir -p "$json" "$(dirname "$report")"

# A failed run leaves its error in its JSON, which the report shows.
for p in mlp-unplanned mlp-offload mlp-recompute; do
  "$bin/lethe-run" "$programs/$p.so" --steps=20 --warmup=3 \
    --trace="$json/$p.trace.json" > "$json/$p.timing.json" || true
  "$bin/lethe-run" "$programs/$p.so" --steps=20 --warmup=3 --replay-gemms \
    > "$json/$p.replayed.json" || true
done
for p in mlp-offload mlp-recompute; do
  "$bin/lethe-run" "$programs/$p.so" --mode=checksum --repeat=3 \
    --compare="$programs/mlp-unplanned.so" > "$json/$p.checksum.json" || true
done
for p in mlp-offload-drop-wait mlp-offload-release-early \
         mlp-recompute-wrong-input; do
  "$bin/lethe-run" "$programs/$p.so" --mode=checksum --repeat=3 \
    --compare="$programs/mlp-unplanned.so" --expect-mismatch \
    > "$json/$p.checksum.json" || true
done

{
  echo "# CUDA runtime on $gpu"
  echo
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') by bench/runtime-bench.sh;"
  echo "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1),"
  echo "$(nvcc --version | grep -o 'release [0-9.]*')."
  echo
  "$bin/lethe-rt-bench" || echo "lethe-rt-bench failed (exit $?)"
  python3 bench/runtime-report.py "$json"
} > "$report"
echo "runtime-bench: wrote $report (JSON in $json)"

#!/usr/bin/env bash
# Builds only the CUDA runtime, lethe-run, lethe-rt-bench, the self-test and
# the example programs (no LLVM/MLIR) into build-runtime/, for the GPU
# machines, which have nvcc, CMake and ninja but no LLVM.
# Usage: scripts/build-runtime.sh [ninja arguments...]
#   LETHE_RUNTIME_BUILD_DIR  build directory (build-runtime)
#   LETHE_CUDA_ARCH          CUDA architectures (90: Hopper)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  # NCCL from Python's nvidia-nccl package, where the toolkit has none.
  nccl=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' \
         2>/dev/null || true)
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    ${nccl:+-DLETHE_NCCL_ROOT="$nccl"} \
    -DCMAKE_BUILD_TYPE=Release \
    -DLETHE_BUILD_COMPILER=OFF -DLETHE_BUILD_RUNTIME=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_CUDA_ARCHITECTURES="${LETHE_CUDA_ARCH:-90}"
fi
cmake --build "$BUILD_DIR" -- "$@"

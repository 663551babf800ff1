#!/usr/bin/env bash
# On a GPU machine: builds the runtime (scripts/build-runtime.sh) and runs
# the GPU integration suite, test/integration, with lit. lit comes from the
# PATH, from Python, or from a wheel in .whl/ (the GPU machines have no
# network: see docs/Runtime.md).
# Usage: scripts/gpu-tests.sh [lit arguments...]
set -uo pipefail
cd "$(dirname "$0")/.."
export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
# NVLink multicast stays off on shared GPU hosts.
export NCCL_NVLS_ENABLE=0

scripts/build-runtime.sh || exit 1

if ! python3 -c 'import lit' 2>/dev/null && ! command -v lit >/dev/null; then
  wheel=$(ls .whl/lit-*.whl 2>/dev/null | head -1)
  if [[ -z "$wheel" ]]; then
    echo "gpu-tests: no lit (pip install lit, or put its wheel in .whl/)" >&2
    exit 1
  fi
  python3 -m pip install -q --no-index --no-deps --target /tmp/lethe-lit \
    "$wheel" || exit 1
  export PYTHONPATH=/tmp/lethe-lit${PYTHONPATH:+:$PYTHONPATH}
fi
# One test at a time: they share one GPU and read device-wide memory use.
if python3 -c 'import lit' 2>/dev/null; then
  python3 -c 'import lit.main; lit.main.main()' -sv -j1 "$@" test/integration
else
  lit -sv -j1 "$@" test/integration
fi

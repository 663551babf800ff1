#!/usr/bin/env bash
# Builds the `lethe` wheel: the Python package with the native library
# liblethe-c.so (MLIR, LLVM, COIN-OR CBC and the C++ runtime linked in), for
# any Python 3 on this platform (py3-none-manylinux_2_<glibc>_<arch>).
# Installs with `pip install` on any Linux with that glibc or newer; needs
# no LLVM, CBC or build tree there.
# Usage: scripts/build-wheel.sh [OUT_DIR]   (default: build/wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${LETHE_BUILD_DIR:-build}
OUT=$(realpath -m "${1:-$BUILD_DIR/wheels}")
PYTHON=${PYTHON:-/usr/bin/python3}
[[ -x $PYTHON ]] || PYTHON=python3

scripts/build.sh LetheCAPIStandalone lethe-python
library="$BUILD_DIR/python/lethe/liblethe-c.so"

# The library must need nothing but glibc and export only the C API
# (cmake/AddLethe.cmake, lethe_add_standalone_library).
needed=$(readelf -d "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for lib in $needed; do
  case $lib in
    libc.so.6 | libm.so.6 | libdl.so.2 | librt.so.1 | libpthread.so.0) ;;
    ld-linux-*.so.*) ;;
    *)
      echo "build-wheel: $library needs $lib, which the wheel lacks" >&2
      exit 1
      ;;
  esac
done
exported=$(nm -D --defined-only "$library" | awk '{print $3}' |
           grep -v '^lethe' || true)
if [[ -n $exported ]]; then
  echo "build-wheel: $library exports more than lethe*: $exported" >&2
  exit 1
fi

# The newest glibc symbol version the library uses is the oldest glibc it
# runs on.
glibc=$(objdump -T "$library" | grep -o 'GLIBC_2\.[0-9]*' | cut -d. -f2 |
        sort -n | tail -1)
platform="manylinux_2_${glibc}_$(uname -m)"

stage="$BUILD_DIR/wheel-stage"
rm -rf "$stage"
mkdir -p "$stage/lethe" "$OUT"
cp python-bindings/pyproject.toml python-bindings/setup.py \
   python-bindings/README.md "$stage/"
cp python-bindings/lethe/*.py python-bindings/lethe/py.typed "$stage/lethe/"
cp "$library" "$stage/lethe/"
mkdir -p "$stage/lethe/devices"
cp devices/*.json "$stage/lethe/devices/"

LETHE_WHEEL_PLATFORM=$platform "$PYTHON" -m pip wheel --no-deps \
  --no-build-isolation --no-index -q -w "$OUT" "$stage"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' python-bindings/pyproject.toml)
wheel="$OUT/lethe-$version-py3-none-$platform.whl"
[[ -f $wheel ]] || { echo "build-wheel: no $wheel" >&2; exit 1; }
echo "$wheel ($(du -h "$wheel" | cut -f1))"

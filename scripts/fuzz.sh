#!/usr/bin/env bash
# Fuzzes Lethe's two input routes with libFuzzer, each for a fixed time.
# Usage: scripts/fuzz.sh [seconds per fuzzer] [json|mlir|all]   (default 60 all)
#
#   json: tools/lethe-json-fuzzer, the JSON importer (importGraphJson)
#   mlir: tools/lethe-mlir-fuzzer, the MLIR route: loader (parser,
#         lethe-import-ops, cost model) and the compilation pipeline
#
# Builds the fuzzers with clang-22, ASan, fuzzer coverage and assertions in
# their own build directory (build-fuzz/, or LETHE_FUZZ_BUILD_DIR) so the
# normal build stays lean; seeds each corpus with the small inputs kept in
# tools/lethe-<route>-fuzzer/seeds; runs; prints executions and crashes per
# fuzzer. Crashing inputs are kept in <build dir>/fuzz/<route>/crashes/.
# Exits non-zero if this run left a crash, leak, timeout or out-of-memory
# input there; libFuzzer's slow-unit-* files (an input slower than 10 s that
# still finished) are counted apart and do not fail the run. LETHE_FUZZ_TIMEOUT (seconds, default 10)
# is libFuzzer's -timeout, a wall-clock limit per input: raise it when the
# fuzzer runs at low priority on a busy machine, where an input of 0.1 s can
# wait longer than 10 s for a core.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
ROUTES=${2:-all}
[[ $ROUTES == all ]] && ROUTES="json mlir"
BUILD_DIR=${LETHE_FUZZ_BUILD_DIR:-build-fuzz}
TIMEOUT=${LETHE_FUZZ_TIMEOUT:-10}

scripts/setup.sh
# libFuzzer's runtime ships in libclang-rt-22-dev, which only fuzzing needs.
if ! dpkg-query -W -f='${Status}' libclang-rt-22-dev 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends libclang-rt-22-dev
fi

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLETHE_BUILD_TESTS=OFF -DLETHE_ENABLE_FUZZERS=ON
fi
targets=()
for route in $ROUTES; do targets+=("lethe-$route-fuzzer"); done
cmake --build "$BUILD_DIR" --target "${targets[@]}" -- -j2

status=0
for route in $ROUTES; do
  FUZZ_DIR=tools/lethe-$route-fuzzer
  WORK="$BUILD_DIR/fuzz/$route"
  mkdir -p "$WORK/corpus" "$WORK/crashes"
  LOG="$WORK/last-run.log"
  # Only this run's artifacts count: the folder keeps earlier runs' inputs.
  START="$WORK/.started"
  touch "$START"
  # The first directory receives new inputs; the seeds are only read.
  # allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons its slabs when
  # compiled with ASan, but the (uninstrumented) MLIR libraries never
  # unpoison what they allocate from them: a false positive.
  ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0 "$BUILD_DIR/bin/lethe-$route-fuzzer" \
    "$WORK/corpus" "$FUZZ_DIR/seeds" \
    -dict="$FUZZ_DIR/$route-graph.dict" \
    -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout="$TIMEOUT" \
    -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$WORK/crashes/" 2>&1 | tee "$LOG" | grep -E "^#[0-9]+.*(pulse|DONE)|ERROR|Deadly|crash-" || true

  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOG" | grep -o '[0-9]*$' || echo 0)
  new() { find "$WORK/crashes" -type f -newer "$START" -name "$1" | wc -l; }
  crashes=$(( $(new 'crash-*') + $(new 'leak-*') ))
  timeouts=$(new 'timeout-*')
  ooms=$(new 'oom-*')
  slow=$(new 'slow-unit-*')
  corpus=$(find "$WORK/corpus" -type f | wc -l)
  echo "== fuzz $route: ${execs:-0} executions in ${SECONDS_TO_RUN} s, corpus $corpus inputs, $crashes crashes, $timeouts timeouts, $ooms out of memory, $slow slow units =="
  ((crashes + timeouts + ooms == 0)) || status=1
done
exit $status

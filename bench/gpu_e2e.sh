#!/usr/bin/env bash
# End to end on a GPU: the shared graphs compiled by Lethe at several device
# budgets, run by the CUDA runtime, against the compiler's predictions.
#
#   bench/gpu_e2e.sh compile [DIR]   here (needs build/bin): for GPT-2 and
#       ResNet-50 at budgets 100/70/50/30% (policy=auto) and unplanned
#       (policy=none): graph -> lethe-pipeline -> --lethe-to-cpp, then a
#       dry run of every program (build/bin/lethe-run); DIR (default
#       .gpu-e2e, git-ignored) then holds programs/*.cpp, this script and
#       the report script, ready to travel to the GPU machine.
#   bench/gpu_e2e.sh device [DIR]    on the GPU machine (no LLVM needed):
#       builds the runtime (scripts/build-runtime.sh), builds the programs,
#       runs each in timing and checksum mode (checksums compared with the
#       unplanned program of its graph), compute-sanitizer memcheck and
#       racecheck on one planned program, and prints the table of
#       bench/gpu_e2e_report.py; JSON reports go to DIR/json (and, as an
#       archive, to $OUT when the device tool runs it).
#
# With the device tool, one call does the GPU part:
#   run(command="bash .gpu-e2e/gpu_e2e.sh device .gpu-e2e", carry=[".gpu-e2e"])
# Results with device and date: bench/results/gpu-e2e.md.
set -uo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.." 2>/dev/null || true
[[ -f scripts/build-runtime.sh ]] || cd "$(dirname "$0")/.."
mode=${1:-compile}
dir=${2:-.gpu-e2e}
graphs=(gpt2 resnet50)
budgets=(100 70 50 30)

compile() {
  local bin=${LETHE_BUILD_DIR:-build}/bin
  for tool in lethe-translate lethe-opt; do
    [[ -x $bin/$tool ]] || { echo "gpu_e2e: $bin/$tool is missing (scripts/build.sh)"; exit 2; }
  done
  # The whole pipeline in one pass pipeline, or its passes one by one.
  local help=$("$bin/lethe-opt" --help)
  local chain=
  if ! grep -q -- '--lethe-pipeline' <<< "$help"; then
    for pass in lethe-plan lethe-materialize lethe-schedule; do
      grep -q -- "--$pass" <<< "$help" ||
        { echo "gpu_e2e: lethe-opt has neither --lethe-pipeline nor --$pass yet"; exit 2; }
    done
    chain=1
  fi
  mkdir -p "$dir/programs"
  cp bench/gpu_e2e.sh bench/gpu_e2e_report.py "$dir/"
  # A small planned program (offload, prefetch, recompute) for the sanitizer.
  "$bin/lethe-translate" --lethe-to-cpp test/Target/Cpp/offload-recompute.mlir \
    --lethe-program-name=small-offload -o "$dir/small-offload.cpp" || exit 1
  local failed=0
  for g in "${graphs[@]}"; do
    local todo=(none "${budgets[@]}") least=
    while ((${#todo[@]})); do
      local b=${todo[0]}
      todo=("${todo[@]:1}")
      local name=$g-$b pipeline="budget=$b% policy=auto"
      [[ $b == none ]] && pipeline="policy=none"
      [[ $b == least* ]] && name=$g-${b#least} pipeline="budget=$least policy=auto"
      local passes=(--lethe-pipeline="$pipeline")
      [[ -n $chain ]] && passes=(--lethe-annotate-costs --lethe-plan="$pipeline"
        --lethe-materialize --lethe-schedule --lethe-assign-buffers --lethe-verify)
      local start=$(date +%s.%N)
      if ! "$bin/lethe-translate" --import-graph-json "graphs/graph_$g.json" |
           "$bin/lethe-opt" "${passes[@]}" \
             -o "$dir/programs/$name.mlir" 2> "$dir/programs/$name.log"; then
        # An infeasible budget is a result: the planner names the least
        # budget it can meet, which is compiled instead (once).
        local msg=$(grep -o 'budget .* is below the least budget.*' "$dir/programs/$name.log" | head -1)
        rm -f "$dir/programs/$name.mlir"
        if [[ -n $msg ]]; then
          echo "$name: infeasible, $msg" | tee -a "$dir/infeasible.txt"
          if [[ -z $least ]]; then
            local asked=$(grep -oE '\([0-9]+ B\)' <<< "$msg" | head -1 | tr -dc 0-9)
            least=$(grep -oE '\([0-9]+ B\)' <<< "$msg" | tail -1 | tr -dc 0-9)
            # As a percentage of the unplanned peak (asked = b% of it).
            todo+=("least$(( (least * b + asked - 1) / asked ))")
          fi
        else
          echo "gpu_e2e: $name failed to compile:"; tail -3 "$dir/programs/$name.log"
          failed=1
        fi
        continue
      fi
      if ! "$bin/lethe-translate" --lethe-to-cpp --lethe-program-name="$name" \
             "$dir/programs/$name.mlir" -o "$dir/programs/$name.cpp" \
             2>> "$dir/programs/$name.log"; then
        echo "gpu_e2e: $name failed to lower:"; tail -3 "$dir/programs/$name.log"
        failed=1; continue
      fi
      printf '%-14s compiled in %.2f s, %s lines of C++\n' "$name" \
        "$(echo "$(date +%s.%N) - $start" | bc)" \
        "$(wc -l < "$dir/programs/$name.cpp")"
    done
  done
  # Dry runs: every runtime call validated without a GPU.
  if [[ -x $bin/lethe-run ]]; then
    for cpp in "$dir"/programs/*.cpp; do
      local so=${cpp%.cpp}.so
      "${CXX:-clang++-22}" -std=c++17 -O1 -shared -fPIC -Iinclude "$cpp" -o "$so" &&
        "$bin/lethe-run" "$so" --mode=dry-run > "${cpp%.cpp}.dry.json" ||
        { echo "gpu_e2e: dry run of $cpp failed"; failed=1; }
      rm -f "$so"
    done
    python3 bench/gpu_e2e_report.py dry "$dir/programs" || failed=1
  else
    echo "gpu_e2e: no lethe-run here (CUDA toolkit missing): dry runs skipped"
    failed=1
  fi
  return $failed
}

device() {
  export NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/cuda/bin
  # JSON reports in one folder; with the device tool ($OUT, which brings
  # back at most 8 files) they travel back as one archive beside the table.
  local json=$dir/json
  mkdir -p "$json"
  # Saved after every phase: a call cut off at its limit still brings back
  # what was measured.
  save() {
    python3 "$dir/gpu_e2e_report.py" device "$json" > "$json/report.md" 2>&1
    if [[ -n ${OUT:-} ]]; then
      cp "$json/report.md" "$OUT/gpu-e2e-report.md"
      tar czf "$OUT/gpu-e2e-json.tar.gz" -C "$json" .
    fi
  }
  local start=$(date +%s)
  export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
  scripts/build-runtime.sh lethe-run > "$json/build.log" 2>&1 ||
    { tail -20 "$json/build.log"; exit 1; }
  local run=$LETHE_RUNTIME_BUILD_DIR/bin/lethe-run
  echo "runtime built in $(( $(date +%s) - start )) s"
  for cpp in "$dir"/programs/*.cpp "$dir"/small-offload.cpp; do
    c++ -std=c++17 -O1 -shared -fPIC -Iinclude "$cpp" -o "${cpp%.cpp}.so" &
  done
  wait
  echo "programs built at $(( $(date +%s) - start )) s"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$json/device.txt"
  for g in "${graphs[@]}"; do
    local base=$dir/programs/$g-none.so
    for so in "$dir"/programs/$g-*.so; do
      local name=$(basename "${so%.so}")
      timeout 90 "$run" "$so" --steps=5 --warmup=1 > "$json/$name.timing.json" 2> "$json/$name.timing.err"
      if [[ $so != "$base" && -f $base ]]; then
        timeout 60 "$run" "$so" --mode=checksum --repeat=1 --compare="$base" \
          > "$json/$name.checksum.json" 2> "$json/$name.checksum.err"
      fi
      echo "$name done at $(( $(date +%s) - start )) s"
    done
  done
  save
  # The sanitizer on planned programs in checksum mode (releases poison, so
  # a late read shows): the small one, then the smallest graph program at
  # 30% (bounded: memcheck slows every access).
  local pick=$(ls -S "$dir"/programs/*.cpp | grep -v -- -none | tail -1)
  for so in "$dir/small-offload.so" ${pick:+${pick%.cpp}.so}; do
    for tool in memcheck racecheck; do
      local limit=60; [[ $so == *small* ]] && limit=30
      [[ $tool == racecheck && $so != *small* ]] && limit=45
      timeout $limit compute-sanitizer --tool $tool --error-exitcode 9 \
        "$run" "$so" --mode=checksum --repeat=1 \
        > "$json/sanitizer-$tool-$(basename "${so%.so}").txt" 2>&1
      local rc=$?
      echo "sanitizer $tool on $(basename "$so"): exit $rc at $(( $(date +%s) - start )) s" |
        tee -a "$json/sanitizer.txt"
      save
    done
  done
  save
  cat "$json/report.md"
}

case $mode in
  compile) compile ;;
  device) device ;;
  *) echo "usage: bench/gpu_e2e.sh compile|device [DIR]"; exit 2 ;;
esac

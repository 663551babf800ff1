#!/usr/bin/env bash
# Fidelity of the time model (issue 17, deliverable 3): every graph of the
# corpus compiled at several budgets, run by the CUDA runtime eagerly and as
# a CUDA graph, against what the simulator predicted. Three halves:
#
#   bench/gpu_fidelity.sh compile [DIR]   here (needs build/bin): lethe
#       compile --build of graphs/graph_*.json at budgets 100 (unplanned,
#       policy=none), 70, 50 and 35% (bench/fidelity_bench.py compile);
#       DIR (default .fidelity, git-ignored) keeps the programs and their
#       predictions; DIR/gpu holds what the GPU machine needs: the
#       programs' C++, this script and the manifest, packed as
#       DIR/gpu.tar.xz to travel (the C++ of the corpus is ~50 MB, over
#       the device tool's 64 MiB with the tree; packed it is a few MB).
#   bench/gpu_fidelity.sh device [GPUDIR] on the GPU machine (no LLVM):
#       builds the runtime (lethe-run, lethe-calibrate), measures the card
#       with lethe-calibrate on one GPU, builds the programs and runs each
#       in timing mode (eager steps, CUDA-graph steps, one profiled step);
#       stops starting programs after $LETHE_FIDELITY_DEADLINE_S (default
#       400 s) so that one device call of 8 minutes brings back what ran.
#       Results in $OUT: fidelity-json.tar.gz (one lethe-run report per
#       program), calibrated.json (the card's profile), device.txt, log.txt.
#   bench/gpu_fidelity.sh report DIR RESULTS [OUT.md]   here: the tables
#       (bench/fidelity_bench.py report; RESULTS is the folder the device
#       tool brought $OUT back to).
#
# With the device tool, after the compile half, one call does the GPU half:
#   run(command="tar xJf .fidelity/gpu.tar.xz -C .fidelity &&
#       bash .fidelity/gpu/gpu_fidelity.sh device .fidelity/gpu",
#       carry=[".fidelity/gpu.tar.xz"], timeout_s=480)
set -uo pipefail
shopt -s nullglob
mode=${1:-compile}

compile() {
  cd "$(dirname "$0")/.."
  local dir=${1:-.fidelity}
  python3 bench/fidelity_bench.py compile --out "$dir" ${LETHE_FIDELITY_ARGS:-} || return 1
  cp bench/gpu_fidelity.sh "$dir/gpu/"
  tar cJf "$dir/gpu.tar.xz" -C "$dir" gpu || return 1
  du -sh "$dir/gpu" "$dir/gpu.tar.xz"
  echo "GPU half: run(command=\"tar xJf $dir/gpu.tar.xz -C $dir && bash $dir/gpu/gpu_fidelity.sh device $dir/gpu\", carry=[\"$dir/gpu.tar.xz\"], timeout_s=480)"
}

device() {
  local gpu=$1
  # Run from the repository root (the device tool starts there): the
  # runtime is built from its sources.
  [[ -f scripts/build-runtime.sh ]] ||
    { echo "gpu_fidelity: run from the repository root"; exit 2; }
  export NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/cuda/bin
  local out=${OUT:-$gpu/out} start=$(date +%s)
  local deadline=${LETHE_FIDELITY_DEADLINE_S:-400}
  local json=$gpu/json
  mkdir -p "$out" "$json"
  local log=$out/log.txt
  elapsed() { echo $(( $(date +%s) - start )); }
  save() { tar czf "$out/fidelity-json.tar.gz" -C "$json" . 2>/dev/null; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader > "$out/device.txt" 2>&1
  cp "$out/device.txt" "$json/device.txt"
  export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
  # The programs build while the runtime does (16 cores).
  for cpp in "$gpu"/programs/*.cpp; do
    echo "${cpp%.cpp}"
  done | xargs -P 8 -I{} c++ -std=c++17 -O1 -shared -fPIC -Iinclude {}.cpp -o {}.so \
    > "$out/programs-build.log" 2>&1 &
  local programs=$!
  if ! scripts/build-runtime.sh lethe-run lethe-calibrate > "$out/build.log" 2>&1; then
    tail -30 "$out/build.log"; exit 1
  fi
  wait $programs
  echo "runtime and programs built at $(elapsed) s" | tee -a "$log"
  local run=$LETHE_RUNTIME_BUILD_DIR/bin/lethe-run
  local card
  card=$(head -1 "$out/device.txt" | tr 'A-Z' 'a-z' | grep -oE 'h100|h200|a100' | head -1 || true)
  local base=()
  [[ -n $card && -f devices/$card.json ]] && base=(--base "devices/$card.json" --name "$card")
  # Under two minutes on one GPU (issue 17's target); the raw samples keep
  # the GEMM loop's and the mixed loop's slowdowns side by side.
  timeout 120 "$LETHE_RUNTIME_BUILD_DIR/bin/lethe-calibrate" "${base[@]}" --gpus 1 \
    --out "$out/calibrated.json" --samples "$out/calibrate-samples.json" \
    > "$out/calibrate.md" 2>&1
  echo "lethe-calibrate exited $? at $(elapsed) s" | tee -a "$log"
  cp "$out/calibrated.json" "$json/calibrated.json" 2>/dev/null
  # Unplanned programs first (every overhead needs its graph's), then by
  # budget, so that a cut-off run still has whole columns.
  local order=()
  for b in 100 70 50 35; do
    for so in "$gpu"/programs/*-"$b".so; do order+=("$so"); done
  done
  for so in "$gpu"/programs/*.so; do
    [[ " ${order[*]} " == *" $so "* ]] || order+=("$so")
  done
  local ran=0
  for so in "${order[@]}"; do
    if (( $(elapsed) > deadline )); then
      echo "deadline ($deadline s) reached: $(( ${#order[@]} - ran )) programs not run" | tee -a "$log"
      break
    fi
    local name
    name=$(basename "${so%.so}")
    timeout 60 "$run" "$so" --steps="${LETHE_FIDELITY_STEPS:-10}" --warmup=3 \
      > "$json/$name.timing.json" 2> "$json/$name.timing.err"
    echo "$name: exit $? at $(elapsed) s" >> "$log"
    ran=$((ran + 1))
    (( ran % 8 == 0 )) && save
  done
  save
  echo "ran $ran of ${#order[@]} programs in $(elapsed) s" | tee -a "$log"
  ls -l "$out"
}

case $mode in
  compile) compile "${2:-.fidelity}" ;;
  device) device "${2:-.fidelity/gpu}" ;;
  report)
    cd "$(dirname "$0")/.." 2>/dev/null || true
    python3 bench/fidelity_bench.py report --dir "${2:-.fidelity}" \
      --results "${3:?results folder}" --out "${4:-bench/results/fidelity.md}" ;;
  *) echo "usage: bench/gpu_fidelity.sh compile [DIR] | device [GPUDIR] | report DIR RESULTS [OUT.md]"; exit 2 ;;
esac

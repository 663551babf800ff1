#!/usr/bin/env bash
# Two pipeline stages on two GPUs over NCCL: the GPT-2 step split by
# lethe-expand-pipeline-schedule into 2 stages (1F1B, 8 micro-batches),
# both stages compiled by Lethe, run as two lethe-run processes.
#
#   bench/gpu_pp.sh compile [DIR]   here (needs build/bin): both stages
#       unplanned (policy none) and, at every stage's budget = the last
#       stage's unplanned peak, with auto, full and every-n (lethe compile:
#       the whole pipeline, re-planning for fragmentation); lowered to C++,
#       dry-run as ranks 0 and 1, their transfers paired and run to the end
#       (bench/pp_p2p_check.py); the pair simulated together
#       (lethe-parallel-bench --programs). DIR (default .gpu/pp) then holds
#       programs.tar.gz, the dry-run and simulation JSON, this script, the
#       checker and the report script.
#   bench/gpu_pp.sh device [DIR]    on the GPU machine (no LLVM needed):
#       builds the runtime (scripts/build-runtime.sh), builds the programs,
#       and per variant runs stage 0 on GPU 0 and stage 1 on GPU 1 as two
#       processes over NCCL (a fresh rendezvous file per run): timing mode
#       (per-stage step time, peak device memory, comm stream busy time of
#       the sends and receives) and checksum mode (each stage's checksums
#       against the unplanned pair's). Ends within ~4 minutes; prints the
#       table of bench/gpu_pp_report.py; JSON and logs go to DIR/json and,
#       as one archive with the table, to $OUT. LETHE_PP_DRY=1 rehearses
#       it without GPUs (every run a dry run); no variant starts after
#       LETHE_PP_DEADLINE_S (210) seconds.
#
# With the device tool, one call does the GPU part:
#   run(command="bash .gpu/pp/gpu_pp.sh device .gpu/pp", carry=[".gpu"])
# Results with device and date: bench/results/gpu-pp.md.
set -uo pipefail
shopt -s nullglob
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.." 2>/dev/null || true
[[ -f scripts/build-runtime.sh ]] || cd "$here/../.."
[[ -f scripts/build-runtime.sh ]] || { echo "gpu_pp: run from the repository"; exit 2; }
mode=${1:-compile}
dir=${2:-.gpu/pp}
device_profile=h200-nvlink
variants=(none auto full every-n)

compile() {
  local bin=${LETHE_BUILD_DIR:-build}/bin
  for tool in lethe-translate lethe-opt lethe lethe-run lethe-parallel-bench; do
    [[ -x $bin/$tool ]] || { echo "gpu_pp: $bin/$tool is missing (scripts/build.sh)"; exit 2; }
  done
  local work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  rm -rf "$dir/programs" "$dir/programs.tar.gz"
  mkdir -p "$dir/programs"
  cp bench/gpu_pp.sh bench/gpu_pp_report.py bench/pp_p2p_check.py "$dir/"
  "$bin/lethe-translate" --import-graph-json graphs/graph_gpt2.json -o "$work/gpt2.mlir" || exit 1
  for s in 0 1; do
    "$bin/lethe-opt" "$work/gpt2.mlir" \
      --lethe-expand-pipeline-schedule="stages=2 stage=$s microbatches=8" \
      -o "$work/stage$s.mlir" 2> "$work/stage$s.log" ||
      { cat "$work/stage$s.log"; exit 1; }
  done
  # Every stage's budget: the last stage's unplanned peak (the planner's).
  "$bin/lethe" report "$work/stage1.mlir" --device "$device_profile" \
    --json "$work/report1.json" > /dev/null || exit 1
  local budget
  budget=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["baseline_peak_bytes"])' "$work/report1.json")
  echo "budget of every stage: $budget bytes (stage 1's unplanned peak)" | tee "$dir/budget.txt"
  compile_at() {
    "$bin/lethe" compile "$work/stage$3.mlir" --budget "$1" --policy "$2" \
      --device "$device_profile" -o "$work/$4" > "$work/$4.log" 2>&1 &&
      cp "$work/$4/step.mlir" "$work/$4.mlir"
  }
  rm -f "$dir/notes.txt"
  local failed=0
  for v in "${variants[@]}"; do
    for s in 0 1; do
      local name=$v-s$s start=$(date +%s.%N)
      if [[ $v == none ]]; then
        "$bin/lethe-opt" "$work/stage$s.mlir" \
          --lethe-pipeline="policy=none device=$device_profile" \
          -o "$work/$name.mlir" 2> "$work/$name.log"
      else
        if ! compile_at "$budget" "$v" "$s" "$name"; then
          # A policy that cannot meet the budget on this stage (the head
          # stage's floor is its unplanned peak, which packing exceeds) is
          # compiled at the unplanned program's arena, and noted.
          local why arena
          why=$(grep -m1 'error:' "$work/$name.log" | sed 's/.*error: //')
          arena=$(grep -o 'lethe.device_arena_bytes = [0-9]*' "$work/none-s$s.mlir" | head -1 | tr -dc 0-9)
          [[ -n $arena ]] &&
            echo "$name: not at $budget B ($why); compiled at the unplanned arena, $arena B" |
              tee -a "$dir/notes.txt" &&
            compile_at "$arena" "$v" "$s" "$name"
        fi
      fi || { echo "gpu_pp: $name failed to compile:"; grep error "$work/$name.log" | head -3; failed=1; continue; }
      "$bin/lethe-translate" --lethe-to-cpp --lethe-program-name="gpt2-pp2-$name" \
        "$work/$name.mlir" -o "$dir/programs/$name.cpp" 2>> "$work/$name.log" ||
        { echo "gpu_pp: $name failed to lower:"; grep error "$work/$name.log" | head -3; failed=1; continue; }
      printf '%-12s compiled in %5.1f s\n' "$name" "$(echo "$(date +%s.%N) - $start" | bc)"
    done
    # Both stages as ranks 0 and 1 without a GPU; their transfers must pair.
    local ok=1
    for s in 0 1; do
      local cpp=$dir/programs/$v-s$s.cpp
      [[ -f $cpp ]] || { ok=0; continue; }
      "${CXX:-clang++-22}" -std=c++17 -O0 -shared -fPIC -Iinclude "$cpp" -o "$work/$v-s$s.so" &&
        "$bin/lethe-run" "$work/$v-s$s.so" --mode=dry-run --rank=$s \
          --json="$dir/programs/$v-s$s.dry.json" > /dev/null ||
        { echo "gpu_pp: dry run of $v-s$s failed"; ok=0; failed=1; }
    done
    if ((ok)); then
      python3 bench/pp_p2p_check.py "$dir/programs/$v-s0.dry.json" "$dir/programs/$v-s1.dry.json" \
        > "$dir/programs/$v.pairs.txt" || { cat "$dir/programs/$v.pairs.txt"; failed=1; }
      # The two programs simulated together (a receive starts no earlier
      # than its send): the step time the GPU run is compared with.
      "$bin/lethe-parallel-bench" --programs="$work/$v-s0.mlir,$work/$v-s1.mlir" \
        --pipeline-device="$device_profile" --json="$dir/programs/$v.sim.json" \
        > "$dir/programs/$v.sim.txt" || { echo "gpu_pp: simulating $v failed"; failed=1; }
    fi
  done
  tar czf "$dir/programs.tar.gz" -C "$dir/programs" $(cd "$dir/programs" && ls *.cpp) &&
    rm -f "$dir"/programs/*.cpp
  python3 bench/gpu_pp_report.py dry "$dir/programs" || failed=1
  du -sh "$dir"
  return $failed
}

# Runs both stages of variant $1 in mode $2 as two processes, GPU 0 and 1.
run_pair() {
  local v=$1 m=$2 json=$3 run=$4 limit=$5
  local id
  id=$(mktemp -u "$json/nccl-$v-$m.XXXX")
  local args=(--mode="$m" --world=2 --nccl-id-file="$id")
  if [[ $m == timing ]]; then args+=(--steps=5 --warmup=2 --no-graph); else args+=(--repeat=1); fi
  # LETHE_PP_DRY=1: a rehearsal of this script without GPUs (dry runs).
  [[ -n ${LETHE_PP_DRY:-} ]] && args=(--mode=dry-run)
  local pids=()
  for s in 0 1; do
    LETHE_NCCL_TIMEOUT_S=30 timeout "$limit" "$run" "$dir/programs/$v-s$s.so" \
      "${args[@]}" --rank=$s --device=$s --json="$json/$v-s$s.$m.json" \
      > "$json/$v-s$s.$m.out" 2> "$json/$v-s$s.$m.err" &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  rm -f "$id"
  return $rc
}

device() {
  export NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/cuda/bin
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}
  local json=$dir/json start=$(date +%s)
  mkdir -p "$json"
  save() {
    python3 "$dir/gpu_pp_report.py" device "$json" "$dir/programs" > "$json/report.md" 2>&1
    if [[ -n ${OUT:-} ]]; then
      cp "$json/report.md" "$OUT/gpu-pp-report.md"
      tar czf "$OUT/gpu-pp-json.tar.gz" -C "$json" .
    fi
  }
  export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
  scripts/build-runtime.sh lethe-run > "$json/build.log" 2>&1 ||
    { tail -20 "$json/build.log"; save; exit 1; }
  local run=$LETHE_RUNTIME_BUILD_DIR/bin/lethe-run
  echo "runtime built in $(( $(date +%s) - start )) s"
  tar xzf "$dir/programs.tar.gz" -C "$dir/programs" || exit 1
  # -O0: a step is a list of runtime calls; optimizing it only costs time.
  for cpp in "$dir"/programs/*.cpp; do
    [[ -f ${cpp%.cpp}.so ]] ||
      c++ -std=c++17 -O0 -shared -fPIC -Iinclude "$cpp" -o "${cpp%.cpp}.so" &
  done
  wait
  echo "programs built at $(( $(date +%s) - start )) s"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader > "$json/device.txt" ||
    echo "no GPU (${LETHE_PP_DRY:+dry rehearsal})" > "$json/device.txt"
  date -u +%Y-%m-%dT%H:%MZ > "$json/date.txt"
  for v in "${variants[@]}"; do
    [[ -f $dir/programs/$v-s0.so && -f $dir/programs/$v-s1.so ]] || continue
    if (( $(date +%s) - start > ${LETHE_PP_DEADLINE_S:-210} )); then
      echo "skipping $v: past the time limit" | tee -a "$json/skipped.txt"; continue
    fi
    run_pair "$v" timing "$json" "$run" 60; local t=$?
    run_pair "$v" checksum "$json" "$run" 40; local c=$?
    echo "$v: timing exit $t, checksum exit $c at $(( $(date +%s) - start )) s"
    save
  done
  save
  cat "$json/report.md"
}

case $mode in
  compile) compile ;;
  device) device ;;
  *) echo "usage: bench/gpu_pp.sh compile|device [DIR]"; exit 2 ;;
esac

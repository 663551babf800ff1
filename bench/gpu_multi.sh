#!/usr/bin/env bash
# Two ranks of one host offloading at once (issue 17, deliverable 4): FSDP
# over world 2 and a 1F1B pair, planned and predicted with the shared-host
# model on and off, run on two GPUs of one host. Three halves:
#
#   bench/gpu_multi.sh compile [DIR]   here (needs build/bin: lethe,
#       lethe-opt, lethe-translate, lethe-parallel-bench; lethe-run for the
#       dry runs): bench/multi_bench.py compile (programs, predictions,
#       manifest) into DIR (default .multi, git-ignored), then every
#       program dry-run as both ranks, and DIR/gpu (the programs' C++ and
#       the manifest) packed as DIR/gpu.tar.xz: what travels.
#       LETHE_MULTI_ARGS passes options (--graph, --device, --budget,
#       --microbatches); LETHE_MULTI_DRY=0 skips the dry runs.
#   bench/gpu_multi.sh device [GPUDIR]   on the GPU machine (no LLVM), from
#       the repository root: builds the runtime (lethe-run, lethe-calibrate)
#       and the programs, measures both GPUs with lethe-calibrate (copies of
#       both GPUs at once give the host figures), then runs every program
#       as two processes over NCCL (GPU 0 and 1; eager steps); starts no
#       program after $LETHE_MULTI_DEADLINE_S (300) seconds. Writes 5 files
#       to $OUT: multi-json.tar.gz (the lethe-run reports), calibrated.json,
#       calibrate.md, device.txt, log.txt. Rehearsal without GPUs:
#       LETHE_MULTI_DRY=1 LETHE_MULTI_BIN=build/bin (dry runs, tools built).
#   bench/gpu_multi.sh report DIR RESULTS [OUT.md]   here: the tables
#       (bench/multi_bench.py report; RESULTS: the folder $OUT came back to;
#       OUT.md default bench/results/gpu-multi.md).
#
# With the device tool, after the compile half:
#   run(command="tar xJf .multi/gpu.tar.xz -C .multi &&
#       bash bench/gpu_multi.sh device .multi/gpu",
#       carry=[".multi/gpu.tar.xz"], kind="nvidia-h100-x2", timeout_s=420)
set -uo pipefail
shopt -s nullglob
mode=${1:-compile}

compile() {
  cd "$(dirname "$0")/.." || exit 2
  local dir=${1:-.multi} bin=${LETHE_BUILD_DIR:-build}/bin failed=0
  for tool in lethe lethe-opt lethe-translate lethe-parallel-bench; do
    [[ -x $bin/$tool ]] || { echo "gpu_multi: $bin/$tool is missing (ninja -C build $tool)"; exit 2; }
  done
  python3 bench/multi_bench.py compile --out "$dir" ${LETHE_MULTI_ARGS:-} || failed=1
  # Each program as both ranks, without a GPU: every runtime call checked,
  # the pipeline stages' transfers paired.
  if [[ ${LETHE_MULTI_DRY:-1} != 0 && -x $bin/lethe-run ]]; then
    local dry
    dry=$(mktemp -d)
    while read -r name cpp0 cpp1; do
      local r=0
      for cpp in "$cpp0" "$cpp1"; do
        local so=$dry/${cpp%.cpp}.so
        [[ -f $so ]] || "${CXX:-clang++-22}" -std=c++17 -O0 -shared -fPIC -Iinclude \
          "$dir/gpu/programs/$cpp" -o "$so" || { echo "gpu_multi: $cpp does not build"; failed=1; }
        "$bin/lethe-run" "$so" --mode=dry-run --world=2 --rank=$r \
          --json="$dry/$name.r$r.json" > /dev/null 2> "$dry/$name.r$r.err" ||
          { echo "gpu_multi: dry run of $name as rank $r failed: $(tail -1 "$dry/$name.r$r.err")"; failed=1; }
        r=$((r + 1))
      done
      if [[ $name == pp-* ]]; then
        python3 bench/pp_p2p_check.py "$dry/$name.r0.json" "$dry/$name.r1.json" > "$dry/$name.pairs" ||
          { echo "gpu_multi: $name: transfers do not pair"; cat "$dry/$name.pairs"; failed=1; }
      fi
      echo "$name: dry runs done"
    done < <(python3 bench/multi_bench.py runs "$dir/gpu/manifest.json")
    rm -rf "$dry"
  fi
  tar cJf "$dir/gpu.tar.xz" -C "$dir" gpu || return 1
  du -sh "$dir/gpu" "$dir/gpu.tar.xz"
  echo "GPU half: run(command=\"tar xJf $dir/gpu.tar.xz -C $dir && bash bench/gpu_multi.sh device $dir/gpu\", carry=[\"$dir/gpu.tar.xz\"], kind=\"nvidia-h100-x2\", timeout_s=420)"
  return $failed
}

device() {
  local gpu=$1
  [[ -f scripts/build-runtime.sh ]] ||
    { echo "gpu_multi: run from the repository root"; exit 2; }
  export NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/cuda/bin
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}
  local out=${OUT:-$gpu/out} start=$(date +%s)
  local deadline=${LETHE_MULTI_DEADLINE_S:-300}
  local json=$gpu/json
  mkdir -p "$out" "$json"
  local log=$out/log.txt
  elapsed() { echo $(( $(date +%s) - start )); }
  save() { tar czf "$out/multi-json.tar.gz" -C "$json" . 2>/dev/null; }
  {
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
    nvidia-smi topo -m 2>/dev/null
    date -u +%Y-%m-%dT%H:%MZ
  } > "$out/device.txt" 2>&1
  export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
  # The programs build while the runtime does, largest first (-O0: a step
  # is a list of runtime calls; optimizing it only costs time). clang++
  # where there is one: g++ takes minutes on a first pipeline stage's
  # 40,000-line step (clang++ -O0: seconds).
  local cxx=${CXX:-$(command -v clang++ || echo c++)}
  ls -S "$gpu"/programs/*.cpp | sed 's/\.cpp$//' |
    xargs -P 8 -I{} "$cxx" -std=c++17 -O0 -shared -fPIC -Iinclude {}.cpp -o {}.so \
      > "$out/programs-build.log" 2>&1 &
  local programs=$!
  # LETHE_MULTI_BIN: runtime tools already built (a rehearsal here).
  local bin=${LETHE_MULTI_BIN:-$LETHE_RUNTIME_BUILD_DIR/bin}
  if [[ -z ${LETHE_MULTI_BIN:-} ]] &&
     ! scripts/build-runtime.sh lethe-run lethe-calibrate > "$json/build.log" 2>&1; then
    tail -30 "$json/build.log" | tee -a "$log"; save; exit 1
  fi
  wait $programs
  cat "$out/programs-build.log" >> "$log"
  rm -f "$out/programs-build.log"
  echo "runtime and programs built at $(elapsed) s ($cxx)" | tee -a "$log"
  local card base=() dry=()
  # LETHE_MULTI_DRY=1: a rehearsal without GPUs (every run a dry run).
  [[ ${LETHE_MULTI_DRY:-0} == 1 ]] && dry=(--mode=dry-run)
  card=$(head -1 "$out/device.txt" | tr 'A-Z' 'a-z' | grep -oE 'h100|h200|a100' | head -1 || true)
  [[ -n $card && -f devices/$card.json ]] && base=(--base "devices/$card.json" --name "$card")
  timeout 90 "$bin/lethe-calibrate" "${base[@]}" --gpus 2 --out "$out/calibrated.json" \
    > "$out/calibrate.md" 2>&1
  echo "lethe-calibrate (2 GPUs) exited $? at $(elapsed) s" | tee -a "$log"
  local ran=0 total=0
  while read -r name cpp0 cpp1; do
    total=$((total + 1))
    if (( $(elapsed) > deadline )); then
      echo "$name: not run (past the $deadline s deadline)" | tee -a "$log"
      continue
    fi
    local id=$json/nccl-id.$name r=0 pids=()
    rm -f "$id"
    for cpp in "$cpp0" "$cpp1"; do
      LETHE_RT_TIMEOUT_S=60 timeout 90 "$bin/lethe-run" "$gpu/programs/${cpp%.cpp}.so" \
        --world=2 --rank=$r --device=$r --nccl-id-file="$id" \
        --steps="${LETHE_MULTI_STEPS:-10}" --warmup=3 --no-graph \
        --json="$json/$name.r$r.json" "${dry[@]}" > /dev/null 2> "$json/$name.r$r.err" &
      pids+=($!)
      r=$((r + 1))
    done
    local rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    echo "$name: exit $rc at $(elapsed) s" | tee -a "$log"
    ran=$((ran + 1))
    save
  done < <(python3 bench/multi_bench.py runs "$gpu/manifest.json")
  save
  echo "ran $ran of $total programs in $(elapsed) s" | tee -a "$log"
  ls -l "$out"
}

case $mode in
  compile) compile "${2:-.multi}" ;;
  device) device "${2:-.multi/gpu}" ;;
  report)
    cd "$(dirname "$0")/.." 2>/dev/null || true
    python3 bench/multi_bench.py report --dir "${2:-.multi}" \
      --results "${3:?results folder}" --out "${4:-bench/results/gpu-multi.md}" ;;
  *) echo "usage: bench/gpu_multi.sh compile [DIR] | device [GPUDIR] | report DIR RESULTS [OUT.md]"; exit 2 ;;
esac

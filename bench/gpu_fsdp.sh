#!/usr/bin/env bash
# FSDP on several GPUs (issues 8 and 9): the shared graphs in FSDP form,
# planned with and without offload and scheduled naively or contention-aware,
# run by the CUDA runtime on N ranks, against the compiler's predictions.
#
#   bench/gpu_fsdp.sh compile [DIR]   here (needs build/bin: lethe,
#       lethe-opt, lethe-translate, lethe-run): for GPT-2 (and
#       graphs/graph_llama8l.json when present), world 2 and 4, profiles
#       h200-nvlink and h200-pcie, budgets 100% and 50% (an infeasible
#       budget is replaced by the least one `auto` meets, as gpu_e2e.sh
#       does), the variants
#         off       offload forbidden (min-offload-bytes above any tensor):
#                   recompute only
#         naive     auto plan, contention=off: copies overlap collectives
#         separate  contention=on: copies kept out of collective windows
#         yield     contention=yield, when lethe-schedule has it
#         aware     contention=auto: what the profile makes lethe-schedule do
#       (a variant whose program is identical to an earlier one is not run
#       again: its meta names the alias); lowers each to C++, dry-runs it as
#       every rank, and packs DIR (default .gpu/fsdp) for the GPU machine.
#   bench/gpu_fsdp.sh device [DIR] [PART] [GRAPH]   on the GPU machine:
#       builds the runtime and the programs, then PART:
#         profile  lethe-rt-bench --collectives, world 2, over NVLink (NCCL
#                  defaults) and with NCCL_P2P_DISABLE=1
#         world2   profile, then every world-2 program: 2 processes (GPUs 0,1)
#         world4   the collective bench at world 4, then every world-4
#                  program: 4 processes (GPUs 0-3)
#         all      world2 then world4
#       With GRAPH (gpt2, llama8l), world2 / world4 run only that graph's
#       programs, so that each call stays short; LETHE_FSDP_BENCH=0 skips
#       the collective bench (when an earlier call measured it). No program starts after $LETHE_FSDP_DEADLINE_S seconds (450):
#       the results so far are saved and the rest reported as not run.
#       LETHE_FSDP_DRY=1 (with LETHE_FSDP_NGPU=N) rehearses the whole part
#       without a GPU: every process in dry-run mode.
#       h200-pcie programs run with NCCL_P2P_DISABLE=1, h200-nvlink ones with
#       NCCL defaults; NCCL_NVLS_ENABLE=0 always. Results: DIR/results/PART
#       and, under the device tool, $OUT/gpu-fsdp-PART.tar.gz and
#       $OUT/gpu-fsdp-PART.md (bench/gpu_fsdp_report.py).
#
# With the device tool (from the repo root, carry [".gpu"]):
#   run(command="bash bench/gpu_fsdp.sh device .gpu/fsdp world2 gpt2", kind=nvidia-h200-x2)
#   run(command="LETHE_FSDP_BENCH=0 bash bench/gpu_fsdp.sh device .gpu/fsdp world2 llama8l", ...)
#   run(command="bash bench/gpu_fsdp.sh device .gpu/fsdp world4 gpt2", kind=nvidia-h200-x4)
set -uo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.." 2>/dev/null || true
mode=${1:-compile}
dir=${2:-.gpu/fsdp}
part=${3:-world2}
only=${4:-}
worlds=(${LETHE_FSDP_WORLDS:-2 4})
budgets=(${LETHE_FSDP_BUDGETS:-100 50})
profiles=(h200-nvlink h200-pcie)
variants=(off naive separate yield aware)

variant_options() {
  case $1 in
    off) echo "--min-offload-bytes=1048576GiB --contention=off" ;;
    naive) echo "--contention=off" ;;
    separate) echo "--contention=on" ;;
    yield) echo "--contention=yield" ;;
    aware) echo "--contention=auto" ;;
  esac
}

#===------------------------------------------------------------------------===
# compile (here)
#===------------------------------------------------------------------------===

# compile_one GRAPH_MLIR DEVICE BUDGET% VARIANT OUTDIR: 0 ok, 3 infeasible
# (OUTDIR/least holds "asked least" in bytes), 4 option unknown, 1 error.
compile_one() {
  local mlir=$1 device=$2 budget=$3 variant=$4 out=$5
  rm -rf "$out"
  "$bin/lethe" compile "$mlir" --budget="$budget%" --device="devices/$device.json" \
    $(variant_options "$variant") -o "$out" > "$out.log" 2>&1 && return 0
  local msg
  msg=$(grep -o 'budget .* is below the least budget.*' "$out.log" | head -1)
  if [[ -n $msg ]]; then
    mkdir -p "$out"
    grep -oE '\([0-9]+ B\)' <<< "$msg" | tr -dc '0-9\n' | paste -sd' ' > "$out/least"
    return 3
  fi
  grep -q "contention must be" "$out.log" && return 4
  return 1
}

# The budget percentage (of the unplanned peak) that covers `least` bytes,
# given that `asked` bytes were b% of it.
least_percent() {
  local b=$1 asked=$2 least=$3
  echo $(( (least * b + asked - 1) / asked ))
}

compile() {
  bin=${LETHE_BUILD_DIR:-build}/bin
  for tool in lethe lethe-opt lethe-translate; do
    [[ -x $bin/$tool ]] || { echo "gpu_fsdp: $bin/$tool is missing (scripts/build.sh)"; exit 2; }
  done
  local work=$dir/work
  rm -rf "$dir"
  mkdir -p "$work" "$dir/programs"
  local graphs=(gpt2)
  if [[ -f graphs/graph_llama8l.json ]]; then
    graphs+=(llama8l)
  else
    echo "gpu_fsdp: graphs/graph_llama8l.json is not on this tree: Llama skipped" |
      tee "$dir/skipped.txt"
  fi
  local failed=0
  for g in "${graphs[@]}"; do
    for w in "${worlds[@]}"; do
      local fsdp=$work/$g-w$w.mlir
      if ! "$bin/lethe-translate" --import-graph-json "graphs/graph_$g.json" 2> "$fsdp.log" |
           "$bin/lethe-opt" --lethe-insert-fsdp-collectives="world=$w" -o "$fsdp" 2>> "$fsdp.log"; then
        echo "gpu_fsdp: FSDP form of $g for world $w failed:"; grep -m3 error "$fsdp.log" | cut -c1-300
        failed=1; continue
      fi
      for p in "${profiles[@]}"; do
        local path=${p#h200-}
        for b in "${budgets[@]}"; do
          local eff=$b label=b$b
          for v in "${variants[@]}"; do
            local name=$g-w$w-$path-$label-$v
            local out=$work/$name vb=$eff
            compile_one "$fsdp" "$p" "$vb" "$v" "$out"
            local rc=$?
            if ((rc == 3)); then
              read -r asked least < "$out/least"
              local need
              need=$(least_percent "$vb" "$asked" "$least")
              if [[ $v != off && $eff == "$b" ]]; then
                # The budget every offloading variant of this row runs at.
                eff=$need
              fi
              echo "$name: $vb% infeasible (least $least B = $need%); compiled at $need%" |
                tee -a "$dir/infeasible.txt"
              vb=$need
              # Packing may need a little more than the plan (re-plans).
              for try in 0 1 2; do
                compile_one "$fsdp" "$p" "$((vb + try))" "$v" "$out"
                rc=$?
                ((rc == 0)) && { vb=$((vb + try)); break; }
              done
            fi
            if ((rc == 4)); then
              echo "$name: lethe-schedule has no contention=${v}: skipped" | tee -a "$dir/skipped.txt"
              continue
            elif ((rc != 0)); then
              echo "gpu_fsdp: $name failed to compile:"; grep -m3 error "$out.log" | cut -c1-300
              failed=1; continue
            fi
            if ! "$bin/lethe-translate" --lethe-to-cpp --lethe-program-name="$name" \
                   "$out/step.mlir" -o "$dir/programs/$name.cpp" 2> "$out.lower.log"; then
              echo "gpu_fsdp: $name failed to lower:"; grep -m3 error "$out.lower.log" | cut -c1-300
              failed=1; continue
            fi
            python3 bench/gpu_fsdp_report.py meta "$out" "$dir/programs/$name.meta.json" \
              --graph "$g" --world "$w" --profile "$p" --budget-label "$label" \
              --budget-asked "$b" --budget-percent "$vb" --variant "$v" \
              --options="$(variant_options "$v")" --programs "$dir/programs" || failed=1
            printf '%-36s budget %3s%%  %s\n' "$name" "$vb" \
              "$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m.get("alias") and "= "+m["alias"] or "sim step %.1f ms, offloaded %d MiB" % (m["sim"]["step_ms"], m["sim"]["offloaded_mib"]))' "$dir/programs/$name.meta.json")"
          done
        done
      done
    done
  done
  # Dry runs, as every rank: each program's every runtime call validated.
  if [[ -x $bin/lethe-run ]]; then
    for cpp in "$dir"/programs/*.cpp; do
      local so=$work/$(basename "${cpp%.cpp}").so name
      name=$(basename "${cpp%.cpp}")
      local w=${name#*-w}; w=${w%%-*}
      if "${CXX:-clang++-22}" -std=c++17 -O0 -shared -fPIC -Iinclude "$cpp" -o "$so"; then
        for ((r = 0; r < w; ++r)); do
          "$bin/lethe-run" "$so" --mode=dry-run --world="$w" --rank=$r \
            > "$dir/programs/$name.dry.r$r.json" ||
            { echo "gpu_fsdp: dry run of $name as rank $r failed"; failed=1; }
        done
      else
        echo "gpu_fsdp: $cpp does not build"; failed=1
      fi
      rm -f "$so"
    done
    python3 bench/gpu_fsdp_report.py dry "$dir/programs" > "$dir/dry-report.md" || failed=1
    cat "$dir/dry-report.md"
  else
    echo "gpu_fsdp: no lethe-run here (CUDA toolkit missing): dry runs skipped"
    failed=1
  fi
  # What travels: the programs packed, the scripts, the meta files.
  tar czf "$dir/programs.tar.gz" -C "$dir" programs
  rm -rf "$dir/programs" "$work"
  cp bench/gpu_fsdp.sh bench/gpu_fsdp_report.py bench/collective_profile.py "$dir/"
  du -sh "$dir"
  return $failed
}

#===------------------------------------------------------------------------===
# device (GPU machine)
#===------------------------------------------------------------------------===

device() {
  export NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/cuda/bin
  local res=$dir/results/$part${only:+-$only} start=$(date +%s)
  local deadline=${LETHE_FSDP_DEADLINE_S:-450}
  mkdir -p "$res"
  local ngpu
  ngpu=${LETHE_FSDP_NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
  local dry_run=() dry_bench=()
  [[ ${LETHE_FSDP_DRY:-0} == 1 ]] && { dry_run=(--mode=dry-run); dry_bench=(--dry-run); }
  elapsed() { echo $(( $(date +%s) - start )); }
  save() {
    python3 bench/gpu_fsdp_report.py device "$res" "$dir/programs" > "$res/report.md" 2> "$res/report.err"
    if [[ -n ${OUT:-} ]]; then
      local tag=$part${only:+-$only}
      cp "$res/report.md" "$OUT/gpu-fsdp-$tag.md"
      tar czf "$OUT/gpu-fsdp-$tag.tar.gz" -C "$dir/results" "$tag"
    fi
  }
  {
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
    nvidia-smi topo -m 2>/dev/null
    python3 -c 'import torch; print("nccl (torch)", torch.cuda.nccl.version())' 2>/dev/null
    # NCCL_P2P_DISABLE=1 moves collectives through shared host memory.
    df -h /dev/shm 2>/dev/null | tail -1
  } > "$res/device.txt"
  export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
  scripts/build-runtime.sh lethe-run lethe-rt-bench > "$res/build.log" 2>&1 ||
    { tail -20 "$res/build.log"; save; exit 1; }
  local bin=$LETHE_RUNTIME_BUILD_DIR/bin
  echo "runtime built at $(elapsed) s; $ngpu GPUs"
  [[ -d $dir/programs ]] || tar xzf "$dir/programs.tar.gz" -C "$dir"

  # rt_bench WORLD PATH: lethe-rt-bench --collectives on ranks 0..WORLD-1.
  rt_bench() {
    local w=$1 path=$2 id=$res/nccl-id.rtbench-$2-w$1
    rm -f "$id"
    local envs=()
    [[ $path == pcie ]] && envs=(NCCL_P2P_DISABLE=1)
    for ((r = 0; r < w; ++r)); do
      env "${envs[@]}" timeout 240 "$bin/lethe-rt-bench" --collectives --world="$w" --rank=$r \
        --device=$r --nccl-id-file="$id" --json="$res/rtbench-$path-w$w.r$r.json" "${dry_bench[@]}" \
        > /dev/null 2> "$res/rtbench-$path-w$w.r$r.err" &
    done
    wait
    echo "rt-bench $path world $w done at $(elapsed) s"
  }
  # run_world WORLD: every program compiled for WORLD, all ranks at once.
  run_world() {
    local w=$1 sos=()
    for cpp in "$dir"/programs/${only:-*}-w$w-*.cpp; do
      local meta=${cpp%.cpp}.meta.json
      python3 -c 'import json,sys; sys.exit(1 if json.load(open(sys.argv[1])).get("alias") else 0)' "$meta" ||
        continue
      c++ -std=c++17 "${LETHE_FSDP_CXX_OPT:--O1}" -shared -fPIC -Iinclude "$cpp" -o "${cpp%.cpp}.so" &
      sos+=("${cpp%.cpp}.so")
    done
    wait
    echo "world $w: ${#sos[@]} programs built at $(elapsed) s"
    for so in "${sos[@]}"; do
      local name
      name=$(basename "${so%.so}")
      if (( $(elapsed) > deadline )); then
        echo "$name: not run (past the ${deadline} s deadline)" | tee -a "$res/not-run.txt"
        continue
      fi
      local id=$res/nccl-id.$name envs=()
      rm -f "$id"
      [[ $name == *-pcie-* ]] && envs=(NCCL_P2P_DISABLE=1)
      for ((r = 0; r < w; ++r)); do
        env "${envs[@]}" timeout 150 "$bin/lethe-run" "$so" --world="$w" --rank=$r \
          --device=$r --nccl-id-file="$id" --steps="${LETHE_FSDP_STEPS:-12}" --warmup=3 \
          --no-graph --profile-steps=3 --json="$res/$name.r$r.json" "${dry_run[@]}" \
          > /dev/null 2> "$res/$name.r$r.err" &
      done
      wait
      echo "$name done at $(elapsed) s"
    done
    save
  }

  case $part in
    profile | world2 | world4 | all) ;;
    *) echo "gpu_fsdp: unknown part '$part' (profile, world2, world4, all)"; exit 2 ;;
  esac
  if [[ $part != world4 ]]; then
    ((ngpu >= 2)) || { echo "gpu_fsdp: $part needs 2 GPUs, found $ngpu"; save; exit 1; }
    if [[ ${LETHE_FSDP_BENCH:-1} != 0 || $part == profile ]]; then
      rt_bench 2 nvlink
      rt_bench 2 pcie
      python3 bench/collective_profile.py --nvlink "$res"/rtbench-nvlink-w2.r*.json \
        --pcie "$res"/rtbench-pcie-w2.r*.json --json "$res/profile-fields-w2.json" \
        > "$res/profile-w2.md" 2>&1
      save
    fi
    [[ $part == world2 || $part == all ]] && run_world 2
  fi
  if [[ $part == world4 || $part == all ]]; then
    if ((ngpu >= 4)); then
      if [[ ${LETHE_FSDP_BENCH:-1} != 0 ]]; then
        rt_bench 4 nvlink
        rt_bench 4 pcie
        python3 bench/collective_profile.py --nvlink "$res"/rtbench-nvlink-w4.r*.json \
          --pcie "$res"/rtbench-pcie-w4.r*.json --json "$res/profile-fields-w4.json" \
          > "$res/profile-w4.md" 2>&1
      fi
      run_world 4
    else
      echo "gpu_fsdp: world 4 needs 4 GPUs, found $ngpu: skipped" | tee "$res/skipped-world4.txt"
    fi
  fi
  save
  echo "finished at $(elapsed) s"
  cat "$res"/profile-w*.md 2>/dev/null | grep -E '^## |^\| (all_gather|reduce_scatter)|"[a-z_]+":'
  cat "$res/report.md"
}

case $mode in
  compile) compile ;;
  device) device ;;
  *) echo "usage: bench/gpu_fsdp.sh compile|device [DIR] [profile|world2|world4|all] [GRAPH]"; exit 2 ;;
esac

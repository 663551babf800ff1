#!/usr/bin/env bash
# Runs bench/torch_inductor_bench.py on the GPUs of one host: one group of
# items per GPU, the items of a group one after another, each under its own
# time limit, and packs what they wrote (results, logs, the GPU and versions,
# Lethe's cache of derived profiles) into $OUT/run-$TAG.tgz. Made for the lent
# GPU machines (bench/results/torch-inductor.md says how each call was run).
#
#   TAG=j4 [DL=SECONDS] [DUMP=1] bench/gpu_batch.sh "ITEM ITEM" "ITEM" ...
#
# ITEM is MODEL:LIMIT[:VAR]: MODEL a model of the bench with a '-' in its
# name (gpt2-medium, llama-8l, moe-8l), else a corpus model (bert_base ->
# corpus:bert_base); LIMIT the item's seconds; VAR the name of an environment
# variable holding the bench's arguments (e.g. VAR=DX with
# DX="--methods compile-0.5 --lethe-budgets at:compile-0.5 --cudagraphs").
# DL: seconds from the start after which no item starts. DUMP=1: each item
# also dumps the graphs Lethe planned (--dump-graphs).
# Needs LETHE_LIBRARY (default .gpu/lib/liblethe-c.so, built here and carried).
set -u
: "${OUT:?OUT: the folder the results go to}"
: "${TAG:?TAG: the name of the call}"
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1
export PYTHONPATH="$root/python-bindings${PYTHONPATH:+:$PYTHONPATH}"
export LETHE_LIBRARY=${LETHE_LIBRARY:-$root/.gpu/lib/liblethe-c.so}
work=/tmp/o-$TAG
mkdir -p "$work/lcache"
export LETHE_CACHE_DIR=$work/lcache
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
  >"$work/gpu.txt" 2>&1
python3 -c 'import torch, sys; print("torch", torch.__version__, "cuda",
torch.version.cuda, "python", sys.version.split()[0])' >"$work/versions.txt"

run_group() {
  local gpu=$1 item model limit var name args
  shift
  for item in "$@"; do
    IFS=: read -r model limit var <<<"$item"
    name=$model
    [[ $model == *-* ]] || model=corpus:$model
    args=""
    [[ -n $var ]] && args=${!var}
    if [[ -n ${DL:-} ]] && (($(date +%s) - start + 0 > DL)); then
      echo "skipped: past the deadline" >"$work/log-$name$var.txt"
      continue
    fi
    local dump=()
    [[ -n ${DUMP:-} ]] && dump=(--dump-graphs "$work/dump-$name$var")
    # shellcheck disable=SC2086  # the arguments are meant to split
    CUDA_VISIBLE_DEVICES=$gpu timeout -k 10 "$limit" \
      python3 "$root/bench/torch_inductor_bench.py" run --model "$model" \
      --out "$work/$TAG-$name$var.json" --deadline $((limit - 30)) \
      $args "${dump[@]}" >"$work/log-$name$var.txt" 2>&1
    echo "$item rc $? at $(($(date +%s) - start)) s"
  done
}

gpu=0
for group in "$@"; do
  # shellcheck disable=SC2086  # a group is a space-separated list
  run_group "$gpu" $group &
  gpu=$((gpu + 1))
done
wait
tar czf "$OUT/run-$TAG.tgz" -C "$work" .
ls -la "$OUT"

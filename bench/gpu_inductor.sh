#!/usr/bin/env bash
# Issue 15's bench on GPUs in one device call: Lethe inside torch.compile
# (bench/torch_inductor_bench.py) against PyTorch's options, on the GPUs of
# one host: one group of items per GPU, the items of a group one after
# another, each in its own process under its own time limit. Lethe plans in
# the process through liblethe-c.so (no LLVM on the GPU machine). Packs what
# the runs wrote (results, logs, the GPU and versions, Lethe's cache of
# derived profiles, a report) into $OUT/run-$TAG.tgz
# (bench/results/torch-inductor.md says how each call was run).
#
#   TAG=k4 [DL=SECONDS] [DUMP=1] [LETHE_SMOKE="m1 m2"] \
#     bench/gpu_inductor.sh "ITEM ITEM" "ITEM" ...
#
# ITEM is MODEL:LIMIT[:VAR]: MODEL a model of the bench with a '-' in its
# name (gpt2-medium, llama-8l, moe-8l), else a corpus model (bert_base ->
# corpus:bert_base); LIMIT the item's seconds; VAR the name of an environment
# variable holding the bench's arguments (e.g. VAR=DX with
# DX="--methods compile-0.5 --lethe-budgets at:compile-0.5 --cudagraphs").
# GPU0: the first group's GPU (default 0; the groups take the GPUs from
# it on). DL: seconds from the start after which no item starts. DUMP=1: each item
# also dumps the graphs Lethe planned (--dump-graphs).
# LETHE_SMOKE: models first run at tiny sizes (one step), to fail fast.
# The library: $LETHE_LIBRARY, else .gpu/lib/liblethe-c.so. Here, before the
# device call: scripts/build.sh; mkdir -p .gpu/lib; cp build/python/lethe/
# liblethe-c.so .gpu/lib/ (.gpu in .git/info/exclude), and carry ".gpu".
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

for m in ${LETHE_SMOKE:-}; do
  python3 "$root/bench/torch_inductor_bench.py" run --model "$m" --tiny \
    --out "$work/tiny-$m.json" --methods compile --lethe-budgets 55% \
    --steps 1 --warmup 1 2>&1 | grep -v "^W1" | tail -3
done

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

gpu=${GPU0:-0}
for group in "$@"; do
  # shellcheck disable=SC2086  # a group is a space-separated list
  run_group "$gpu" $group &
  gpu=$((gpu + 1))
done
wait
results=("$work/$TAG"-*.json)
[[ -e ${results[0]} ]] && python3 "$root/bench/torch_inductor_bench.py" \
  report "${results[@]}" --md "$work/report.md" --svg "$work/report.svg" \
  >/dev/null 2>&1
tar czf "$OUT/run-$TAG.tgz" -C "$work" .
ls -la "$OUT"

#!/usr/bin/env bash
# Issue 10's bench on a GPU in one device call: Lethe's torch backend against
# PyTorch's activation-memory options for the GPT-2-medium-like and the
# Llama-style model (bench/torch_budget_bench.py), one process per model,
# each on its own GPU, in parallel.
#
#   bench/gpu_torch.sh compile [DIR]   here (needs build/bin/lethe and torch
#       2.x: /work/venv-torch2/bin/python or $PYTHON): traces both models on
#       CPU and plans them with Lethe at every budget, full size (DIR/plans)
#       and tiny (DIR/plans-tiny, for the smoke run); copies this script to
#       DIR/run.sh. DIR defaults to .gpu/torch.
#   bench/gpu_torch.sh device [DIR] [smoke|full|all]   on the GPU machine,
#       from the repository root (no LLVM needed): the smoke run (every
#       method once at the tiny configs, < 60 s; stops here if one fails),
#       then the full run with a deadline so that the whole call ends within
#       $LETHE_TORCH_TOTAL_S seconds (default 530), then the report.
#       GPUs: CUDA_VISIBLE_DEVICES=0 (gpt2-medium) and =1 (llama-8l).
#
# With the device tool, one call (about 8-9 minutes):
#   run(command="bash .gpu/torch/run.sh device .gpu/torch", carry=[".gpu"],
#       kind="nvidia-h200-x2")
# It writes to $OUT: torch-budget-<model>.json (the full runs),
# torch-budget.md and torch-budget.svg (the report: copy both into
# bench/results/), torch-logs.tar.gz (smoke results, logs, nvidia-smi).
set -uo pipefail
# The repository root: the current directory, or seen from bench/ or from
# the package folder .gpu/torch.
here=$(cd "$(dirname "$0")" && pwd)
for root in "$PWD" "$here/.." "$here/../.."; do
  [[ -f $root/bench/torch_budget_bench.py ]] && { cd "$root"; break; }
done
[[ -f bench/torch_budget_bench.py ]] ||
  { echo "gpu_torch: run from the repository root"; exit 2; }
mode=${1:-compile}
dir=${2:-.gpu/torch}
what=${3:-all}
bench=bench/torch_budget_bench.py
models=(gpt2-medium llama-8l)

compile() {
  local py=${PYTHON:-/work/venv-torch2/bin/python}
  [[ -x $py ]] || py=python3
  "$py" -c 'import torch, sys; sys.exit(not hasattr(torch, "compile"))' ||
    { echo "gpu_torch: $py has no torch 2.x (set PYTHON)"; exit 2; }
  mkdir -p "$dir/plans" "$dir/plans-tiny"
  cp bench/gpu_torch.sh "$dir/run.sh"
  # Traced afresh (prepare re-uses a graph it finds).
  rm -f "$dir"/plans*/graph-*.json "$dir"/plans*/plans-*.json
  "$py" "$bench" prepare --out "$dir/plans-tiny" --tiny || exit 1
  "$py" "$bench" prepare --out "$dir/plans" || exit 1
  du -sh "$dir"
}

# One process per model on its own GPU; waits for both. $1: label, $2: hard
# limit (s), then the bench's run arguments.
run_both() {
  local label=$1 limit=$2
  shift 2
  local pids=() i=0
  for m in "${models[@]}"; do
    CUDA_VISIBLE_DEVICES=$i timeout -k 10 "$limit" "$py" "$bench" run \
      --models "$m" --out "$work/$label-$m.json" "$@" \
      > "$work/$label-$m.log" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  for m in "${models[@]}"; do
    echo "--- $label $m (last lines of $label-$m.log)"
    tail -n 25 "$work/$label-$m.log"
  done
  return $rc
}

device() {
  local start=$(date +%s) total=${LETHE_TORCH_TOTAL_S:-530}
  py=${PYTHON:-python3}
  export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
  # Two processes compile at once: half the cores each.
  export TORCHINDUCTOR_COMPILE_THREADS=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))
  local out=${OUT:-$dir/out}
  work=$(mktemp -d /tmp/lethe-torch.XXXXXX)
  mkdir -p "$out"
  pack() {
    tar czf "$out/torch-logs.tar.gz" -C "$work" . 2>/dev/null
  }
  { nvidia-smi; "$py" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.device_count())'; } \
    > "$work/device.txt" 2>&1
  head -n 12 "$work/device.txt"
  if [[ $what == smoke || $what == all ]]; then
    run_both smoke 75 --smoke --plans "$dir/plans-tiny" --deadline-s 55 \
      ${LETHE_TORCH_SMOKE_ARGS:-}
    # A method that failed stops the call; one cut by the time limit does
    # not (the full run has its own deadlines).
    if ! "$py" - "$work" "${models[@]}" <<'PY'
import json, os, sys
work, models = sys.argv[1], sys.argv[2:]
bad = []
for m in models:
    path = os.path.join(work, f"smoke-{m}.json")
    if not os.path.exists(path):
        bad.append(f"{m}: no results (crashed before its first method)")
        continue
    with open(path) as f:
        runs = json.load(f)["runs"]
    bad += [f"{m} {e['method']}: {e['error']}" for e in runs if "error" in e]
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
    then
      echo "gpu_torch: the smoke run failed after $(( $(date +%s) - start )) s: stopping"
      pack
      exit 1
    fi
    echo "smoke passed at $(( $(date +%s) - start )) s"
  fi
  if [[ $what == full || $what == all ]]; then
    local left=$(( total - ($(date +%s) - start) ))
    # The bench starts no method it expects to overrun its deadline; the
    # hard limit ends one that does, keeping what was measured before.
    # LETHE_TORCH_{SMOKE,FULL}_ARGS: extra run arguments (a CPU test of
    # this script leaves out torch.compile, and runs "full" with --tiny and
    # LETHE_TORCH_FULL_PLANS=DIR/plans-tiny).
    run_both full $(( left - 25 )) --plans "${LETHE_TORCH_FULL_PLANS:-$dir/plans}" \
      --deadline-s $(( left - 60 )) ${LETHE_TORCH_FULL_ARGS:-}
    echo "full run ended at $(( $(date +%s) - start )) s"
    for m in "${models[@]}"; do
      [[ -f $work/full-$m.json ]] && cp "$work/full-$m.json" "$out/torch-budget-$m.json"
    done
    pack
    "$py" "$bench" report "$out"/torch-budget-*.json \
      --md "$out/torch-budget.md" --svg "$out/torch-budget.svg" > /dev/null
    echo "=== report (also in \$OUT/torch-budget.md) at $(( $(date +%s) - start )) s"
    cat "$out/torch-budget.md"
  else
    pack
  fi
}

case $mode in
  compile) compile ;;
  device) device ;;
  *) echo "usage: bench/gpu_torch.sh compile|device [DIR] [smoke|full|all]"; exit 2 ;;
esac

#!/usr/bin/env bash
# Issue 15's bench on GPUs in one device call: Lethe inside torch.compile
# (bench/torch_inductor_bench.py) against PyTorch's options. One process per
# model, one GPU each, in parallel; Lethe plans in the process through
# liblethe-c.so (no LLVM on the GPU machine).
#
#   bench/gpu_inductor.sh MODEL0 [MODEL1]     on the GPU machine, from the
#       repository root: a smoke run of MODEL0/MODEL1 at tiny sizes, then
#       the full runs (MODEL0 on GPU 0, MODEL1 on GPU 1) with a deadline
#       ($LETHE_BENCH_DEADLINE_S, default 400 s); results in $OUT.
#
# The library: $LETHE_LIBRARY, else .gpu/lib/liblethe-c.so. Here, before the
# device call: scripts/build.sh; mkdir -p .gpu/lib; cp build/python/lethe/
# liblethe-c.so .gpu/lib/ (.gpu is in .git/info/exclude), and carry ".gpu".
# LETHE_SMOKE="m1 m2" first runs those models at tiny sizes; MODEL0 may be
# "a,b" (run one after the other on GPU 0); LETHE_BENCH_ARGS go to each run.
set -uo pipefail
cd "$(dirname "$0")/.."
export LETHE_LIBRARY=${LETHE_LIBRARY:-$PWD/.gpu/lib/liblethe-c.so}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/lethe-bench}
mkdir -p "$OUT"
deadline=${LETHE_BENCH_DEADLINE_S:-400}
bench=bench/torch_inductor_bench.py
models=("$@")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv \
  > "$OUT/nvidia-smi.txt" 2>&1
for m in ${LETHE_SMOKE:-}; do
  python3 $bench run --model "$m" --tiny --out "$OUT/tiny-$m.json" \
    --methods compile --lethe-budgets 55% --steps 1 --warmup 1 \
    2>&1 | grep -v "^W1" | tail -3
done
# MODELS on one GPU run one after another ("a,b" on GPU 0, "c,d" on GPU 1).
i=0
for group in "${models[@]}"; do
  (for m in ${group//,/ }; do
     CUDA_VISIBLE_DEVICES=$i python3 $bench run --model "$m" \
       --out "$OUT/inductor-$m.json" --deadline "$deadline" \
       ${LETHE_BENCH_ARGS:-} > "$OUT/log-$m.txt" 2>&1
   done) &
  i=$((i + 1))
done
wait
models=(${models[@]//,/ })
for m in "${models[@]}"; do grep -v "^W1" "$OUT/log-$m.txt" | grep -E "^$m " ; done
python3 $bench report "$OUT"/inductor-*.json --md "$OUT/report.md" \
  --svg "$OUT/report.svg" > /dev/null

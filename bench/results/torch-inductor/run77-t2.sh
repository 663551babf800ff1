#!/bin/bash
# Session 77, call 2 (2 GPUs): Qwen2 at 80% of compile-0.1's peak with offload captured in CUDA graphs; Llama-8l the same (merged planner).
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
TAG=t2a DUMP=1 GPU0=0 bench/gpu_inductor.sh "qwen2_gqa:450:A" "llama-8l:450:A" > $OUT/t2a.txt 2>&1 &
wait
cat $OUT/t2a.txt
for f in /tmp/o-t2a/log-*.txt; do echo "== $f"; grep -v "^W1" $f | tail -25; done

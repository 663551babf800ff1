#!/bin/bash
# Session 77, call 5 (2 GPUs): ViT-B/16 at 80% of compile-0.1's peak (not re-measured with the guards in the backward); Qwen2 at compile-0.5's peak with the planner of 14:00 UTC.
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
export H="--methods compile-0.5 --lethe-budgets at:compile-0.5 --lethe-offload off --cudagraphs --steps 10 --warmup 3"
TAG=t5a DUMP=1 GPU0=0 bench/gpu_inductor.sh "vit-b16:420:A" "qwen2_gqa:420:H" > $OUT/t5a.txt 2>&1
cat $OUT/t5a.txt
for f in /tmp/o-t5a/log-*.txt; do echo "== $f"; grep -v "^W1\|TensorFloat32\|warnings.warn" $f | tail -6; done

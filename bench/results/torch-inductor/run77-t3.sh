#!/bin/bash
# Session 77, call 3 (2 GPUs): the models not re-measured with the guards in the backward, and the merged planner (S27/S28/S30): GPT-2-medium, MoE-8l, ViT-B/16 at 80% of compile-0.1's peak (offload auto = recompute-only under CUDA graphs).
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
TAG=t3a DL=240 DUMP=1 GPU0=0 bench/gpu_inductor.sh "gpt2-medium:330:A vit-b16:250:A" "moe-8l:330:A llama-8l:250:A" > $OUT/t3a.txt 2>&1
cat $OUT/t3a.txt
for f in /tmp/o-t3a/log-*.txt; do echo "== $f"; grep -v "^W1\|UserWarning: TensorFloat32\|warnings.warn" $f | tail -8; done

#!/bin/bash
# Session 76, call 4 (4 GPUs): Lethe at 80% of compile-0.1's peak, the rest of the models.
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
TAG=s4a bench/gpu_inductor.sh "qwen2_gqa:235:A" "convnext_t:235:A" "t5_base:235:A" "unet:235:A"
ls -la $OUT

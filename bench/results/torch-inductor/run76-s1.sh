#!/bin/bash
# Session 76, call 1: DiT-B/2 peak at a 2.0 GB byte budget (span rule c19e67a), then DiT A; U-Net H, Qwen2 H.
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
export H="--methods compile-0.5 --lethe-budgets at:compile-0.5 --lethe-offload off --cudagraphs --steps 10 --warmup 3"
( BUDGETS=2000000000 GPU=0 bash bench/results/torch-inductor/run75-diag.sh; TAG=s1a DUMP=1 bench/gpu_inductor.sh "dit_b2:270:A" ) &
TAG=s1b DL=300 GPU0=1 DUMP=1 bench/gpu_inductor.sh "unet:220:H qwen2_gqa:260:H"
wait
ls -la $OUT

#!/bin/bash
# Session 76, call 2: Lethe at 80% of compile-0.1's peak with the guards in the backward (re-measure).
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
TAG=s2a DL=340 DUMP=1 bench/gpu_inductor.sh "swin_t:330:A llama-8l:190:A" "mobilenet_v3:330:A bert_base:190:A"
ls -la $OUT

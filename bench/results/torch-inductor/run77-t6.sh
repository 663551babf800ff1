#!/bin/bash
# Session 77, call 6 (2 GPUs; the probe before it counted kernels): replay vs profiled kernels, clocks over 80 replayed steps (bench/replay_clock_probe.py).
export PYTHONPATH=$PWD/python-bindings PYTHONUNBUFFERED=1
( CUDA_VISIBLE_DEVICES=0 timeout 300 python3 bench/replay_clock_probe.py --model llama-8l --steps 80 --out $OUT/probe-llama.json > $OUT/probe-llama.txt 2>&1 ) &
( CUDA_VISIBLE_DEVICES=1 timeout 300 python3 bench/replay_clock_probe.py --model gpt2-medium --steps 80 --out $OUT/probe-gpt2m.json > $OUT/probe-gpt2m.txt 2>&1 ) &
wait
for f in $OUT/probe-*.txt; do echo "== $f"; grep -v "^W1\|warn" $f | tail -12; done

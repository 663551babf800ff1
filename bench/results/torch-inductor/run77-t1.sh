#!/bin/bash
# Session 77, call 1 (2 GPUs): offload captured in CUDA graphs (token mode): GPU tests, Qwen2 and ConvNeXt-T at 80% of compile-0.1's peak.
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
TAG=t1a DUMP=1 GPU0=0 bench/gpu_inductor.sh "qwen2:420:A" > $OUT/t1a.txt 2>&1 &
( CUDA_VISIBLE_DEVICES=1 LETHE_LIBRARY=$PWD/.gpu/lib/liblethe-c.so PYTHONPATH=$PWD/python-bindings:$PWD/python-bindings/tests timeout 150 python3 -m pytest -q -rA -p no:cacheprovider python-bindings/tests/test_inductor_gpu.py > $OUT/pytest.txt 2>&1; echo "pytest rc $?"; tail -8 $OUT/pytest.txt
  TAG=t1b DUMP=1 GPU0=1 bench/gpu_inductor.sh "convnext_t:360:A" > $OUT/t1b.txt 2>&1 ) &
wait
cat $OUT/t1a.txt $OUT/t1b.txt
for f in /tmp/o-t1a/log-*.txt /tmp/o-t1b/log-*.txt; do echo "== $f"; grep -v "^W1" $f | tail -25; done

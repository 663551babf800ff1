#!/bin/bash
# Session 76, call 3 (4 GPUs): the items call 2 could not finish, and the GPU tests.
export A="--methods compile-0.1 --lethe-budgets at:compile-0.1*0.8 --lethe-offload auto --cudagraphs --steps 10 --warmup 3"
( CUDA_VISIBLE_DEVICES=3 LETHE_LIBRARY=$PWD/.gpu/lib/liblethe-c.so PYTHONPATH=$PWD/python-bindings:$PWD/python-bindings/tests timeout 200 python3 -m pytest -q -rA -p no:cacheprovider python-bindings/tests/test_inductor_gpu.py > $OUT/pytest.txt 2>&1; echo "pytest rc $?"; tail -6 $OUT/pytest.txt ) &
TAG=s3a DUMP=1 bench/gpu_inductor.sh "swin_t:500:A" "mobilenet_v3:500:A" "bert_base:500:A"
wait
ls -la $OUT

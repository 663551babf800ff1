#!/bin/bash
# Session 77, call 4: why Llama-8l's offloading plans peak ~300 MB over their prediction (t2): inductor_memory.py at the budget t2 planned at, offload auto (GPU 0) and off (GPU 1), no calibration, no CUDA graphs.
root=$PWD
export LETHE_LIBRARY=$root/.gpu/lib/liblethe-c.so PYTHONPATH=$root/python-bindings PYTHONUNBUFFERED=1
run() { # gpu offload
  d=/tmp/id$2; mkdir -p $d
  CUDA_VISIBLE_DEVICES=$1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 TORCHINDUCTOR_CACHE_DIR=$d/cache \
    timeout 230 python3 bench/inductor_memory.py --model llama-8l --budget 1530536038 --offload $2 --out $d/mem > $d/run.log 2>&1
  echo "diag $2 rc $?"; grep -v "^W1" $d/run.log | tail -4
  tar czf $OUT/diag-$2.tgz -C $d run.log mem 2>/dev/null
}
run 0 auto & run 1 off & wait

#!/bin/bash
# DiT-B/2 at a budget: measured peak vs Lethe's (bench/inductor_memory.py).
root=$PWD
export LETHE_LIBRARY=$root/.gpu/lib/liblethe-c.so PYTHONPATH=$root/python-bindings PYTHONUNBUFFERED=1
for b in ${BUDGETS:-least}; do
  d=/tmp/id$b; mkdir -p $d
  CUDA_VISIBLE_DEVICES=${GPU:-1} TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 TORCHINDUCTOR_CACHE_DIR=$d/cache \
    timeout 170 python3 bench/inductor_memory.py --model ${MODEL:-corpus:dit_b2} --budget $b --out $d/mem > $d/run.log 2>&1
  echo "diag $b rc $?"; grep -i "measured peak" $d/run.log | tail -2
  tar czf $OUT/diag-$b.tgz -C $d run.log mem 2>/dev/null
done

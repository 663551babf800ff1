#!/usr/bin/env bash
# Issue 16's graph corpus on GPUs in one device call: bench/export_corpus.py
# exports each model's training step with every op timed alone. The models
# are split over the visible GPUs (one process per GPU, in parallel), each
# process with a deadline ($LETHE_CORPUS_DEADLINE_S, default 420 s) after
# which it starts no further model. Results in $OUT: corpus.tar.gz (the
# graphs), summary-GPU.json and log-GPU.txt per GPU, nvidia-smi.txt.
#
#   bench/gpu_corpus.sh [MODELS]   (comma-separated; default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python-bindings
OUT=${OUT:-/tmp/lethe-corpus}
mkdir -p "$OUT/graphs"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
  --format=csv > "$OUT/nvidia-smi.txt" 2>&1
models=${1:-$(python3 -c "import sys; sys.path.insert(0, 'bench'); \
import export_corpus as e; print(','.join(e.CORPUS))")}
gpus=$(nvidia-smi -L | wc -l)
IFS=, read -ra list <<< "$models"
for ((g = 0; g < gpus; g++)); do
  mine=()
  for ((i = g; i < ${#list[@]}; i += gpus)); do mine+=("${list[i]}"); done
  [[ ${#mine[@]} -gt 0 ]] || continue
  (IFS=,; CUDA_VISIBLE_DEVICES=$g python3 bench/export_corpus.py \
     --out "$OUT/graphs" --models "${mine[*]}" \
     --deadline "${LETHE_CORPUS_DEADLINE_S:-420}" \
     --summary "$OUT/summary-$g.json" > "$OUT/log-$g.txt" 2>&1) &
done
wait
grep -h "^|" "$OUT"/log-*.txt | sort -u
tar czf "$OUT/corpus.tar.gz" -C "$OUT/graphs" .
rm -rf "$OUT/graphs"
ls -la "$OUT"

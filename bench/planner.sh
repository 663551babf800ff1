#!/usr/bin/env bash
# Planner benchmark: plans the shared graphs and random layered graphs at
# budgets from 30% to 90% of the unplanned peak with every policy, the
# knapsack baselines and (on small random graphs) the exact solver, times
# `auto` on ~10,000-node graphs, and writes bench/results/planner.md and
# bench/results/planner-overhead.svg.
# Usage: bench/planner.sh [--quick]   (--quick: fewer random graphs, no exact)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${LETHE_BUILD_DIR:-build}
scripts/build.sh lethe-planner-bench >/dev/null
BENCH="$BUILD_DIR/bin/lethe-planner-bench"
OUT=${LETHE_BENCH_OUT:-bench/results}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
QUICK=${1:-}

FIXED=full,every-n,selective-op,selective-op-offload,offload-all,knapsack-greedy,knapsack-dp
"$BENCH" --graph graphs/graph_gpt2.json --graph graphs/graph_resnet50.json \
  --budgets 0.3,0.4,0.5,0.55,0.6,0.7,0.8,0.9 --policies "auto,$FIXED" \
  --repeat 3 --csv "$TMP/shared.csv"

if [[ "$QUICK" == "--quick" ]]; then
  "$BENCH" --random 6 --random-layers 3 --budgets 0.5,0.7,0.9 \
    --policies "auto,$FIXED" --csv "$TMP/random.csv"
else
  # Small enough for the exact solver (2-3 layers, 60-100 nodes).
  "$BENCH" --random 10 --random-layers 3 --budgets 0.5,0.6,0.7,0.8,0.9 \
    --policies "auto,exact,$FIXED" --exact-time-limit 10 --csv "$TMP/random.csv"
fi

# ~10,000 nodes: solve time.
"$BENCH" --random 2 --random-layers 480 --budgets 0.3,0.5,0.7,0.9 \
  --policies auto --csv "$TMP/large.csv"

mkdir -p "$OUT"
python3 bench/planner_report.py --shared "$TMP/shared.csv" \
  --random "$TMP/random.csv" --large "$TMP/large.csv" \
  --out-md "$OUT/planner.md" --out-svg "$OUT/planner-overhead.svg"
echo "wrote $OUT/planner.md and $OUT/planner-overhead.svg"

#!/usr/bin/env bash
# The main job: set up, build, and run Lethe on the bundled GPT-2 training
# step (graphs/graph_gpt2.json, a real export with H200 op times).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p out
# Where the memory and the time of the unplanned step go.
build/bin/lethe report graphs/graph_gpt2.json \
  --json out/gpt2-report.json --trace out/gpt2-unplanned.trace.json
# A plan that fits the step into 60% of that peak: retain / recompute /
# offload per activation, with its predicted peak and step time.
build/bin/lethe plan graphs/graph_gpt2.json --budget 60% --top 5 \
  --json out/gpt2-plan-60.json --trace out/gpt2-plan-60.trace.json
echo "wrote out/gpt2-report.json, out/gpt2-plan-60.json and their traces (open them in ui.perfetto.dev)"

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
echo "wrote out/gpt2-report.json and out/gpt2-unplanned.trace.json (open in ui.perfetto.dev)"

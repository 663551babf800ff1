#!/usr/bin/env bash
# The main job: set up, build, and run Lethe on the bundled GPT-2 training
# step (graphs/graph_gpt2.json, a real export with H200 op times).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# Until the importer lands, the tool can only show its dialect.
build/bin/lethe-opt --help | grep "Available Dialects"

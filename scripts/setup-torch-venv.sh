#!/usr/bin/env bash
# Makes (once) a virtual environment with torch 2.11 from PyPI and pytest,
# for the tests of Lethe inside torch.compile (torch >= 2.9; Debian's
# python3-torch is 1.13). Usage: scripts/setup-torch-venv.sh DIR
# PyPI's Linux wheel brings its CUDA libraries (about 3 GB); the tests run
# on the CPU.
set -euo pipefail
dir=${1:?usage: setup-torch-venv.sh DIR}
TORCH_VERSION=2.11.0
if [[ -x $dir/bin/python ]] && "$dir/bin/python" -c \
    "import torch, pytest; assert torch.__version__.startswith('$TORCH_VERSION')" \
    2>/dev/null; then
  echo "setup-torch-venv: torch $TORCH_VERSION present in $dir"
  exit 0
fi
rm -rf "$dir"
/usr/bin/python3 -m venv "$dir"
"$dir/bin/pip" install -q --disable-pip-version-check \
  "torch==$TORCH_VERSION" pytest

#!/usr/bin/env bash
# Installs every build and test dependency of Lethe from Debian's packages.
# Idempotent: packages already present are not reinstalled, and apt's index
# is refreshed only when something is missing.
set -euo pipefail

PACKAGES=(
  # compiler toolchain and build
  cmake ninja-build ccache clang-22 lld-22
  # LLVM / MLIR 22 (lit, FileCheck, not, split-file are in llvm-22-tools)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # the exact planner's MILP solver (COIN-OR CBC), found with pkg-config
  coinor-libcbc-dev pkg-config
  # the static archives liblethe-c.so links besides CBC's (lib/CAPI)
  libbz2-dev zlib1g-dev liblapack-dev libblas-dev
  # tests
  libgtest-dev python3
  # Python package tests: the PyTorch exporter (Debian's torch 1.13, CPU);
  # the wheel (scripts/build-wheel.sh), installed into a fresh venv
  python3-torch python3-pytest python3-pip python3-setuptools python3-wheel
  python3-venv
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"

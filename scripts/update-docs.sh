#!/usr/bin/env bash
# Regenerates the ODS-derived reference docs (dialect, ops, types, passes)
# and copies them into docs/. test/docs/generated-docs.test fails when the
# committed copies are stale.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${LETHE_BUILD_DIR:-build}
scripts/build.sh lethe-doc
(cd "$BUILD_DIR/docs" && find . -name '*.md') | while read -r f; do
  mkdir -p "docs/Generated/$(dirname "$f")"
  cp "$BUILD_DIR/docs/$f" "docs/Generated/$f"
done
echo "docs/Generated updated"

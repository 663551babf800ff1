#!/usr/bin/env bash
# Sets up, builds and runs every test suite of Lethe: lit (FileCheck) and the
# gtest unit tests. Ends with one summary line of passed/failed counts; exits
# non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${LETHE_BUILD_DIR:-build}

scripts/setup.sh || exit 1
scripts/build.sh all lethe-doc || exit 1

passed=0
failed=0
status=0

echo "== lit =="
lit_out=$(mktemp)
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test" | tee "$lit_out"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
# lit's summary lines read "  Passed: 3 (100.00%)".
count() { grep -E "^\s*$1\s*:" "$lit_out" | sed -E 's/.*:\s*([0-9]+).*/\1/' | awk '{s+=$1} END {print s+0}'; }
p=$(count Passed)
f=$(( $(count Failed) + $(count Unresolved) + $(count "Timed Out") ))
u=$(count Unsupported)
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-0}))
rm -f "$lit_out"

echo "== unit tests =="
gtest_xml=$(mktemp --suffix=.xml)
"$BUILD_DIR/bin/lethe-unittests" --gtest_brief=1 --gtest_output="xml:$gtest_xml" || status=1
gt=$(grep -o 'tests="[0-9]*"' "$gtest_xml" | head -1 | tr -dc 0-9)
gf=$(grep -o 'failures="[0-9]*"' "$gtest_xml" | head -1 | tr -dc 0-9)
passed=$((passed + ${gt:-0} - ${gf:-0}))
failed=$((failed + ${gf:-0}))
rm -f "$gtest_xml"

echo "== summary: $passed passed, $failed failed (lit unsupported: ${u:-0}) =="
exit $status

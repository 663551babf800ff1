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
# lethe-runtime-unittests exists when the CUDA runtime is built.
for unittests in "$BUILD_DIR/bin/lethe-unittests" \
                 "$BUILD_DIR/bin/lethe-runtime-unittests"; do
  [[ -x "$unittests" ]] || continue
  gtest_xml=$(mktemp --suffix=.xml)
  "$unittests" --gtest_brief=1 --gtest_output="xml:$gtest_xml" || status=1
  gt=$(grep -o 'tests="[0-9]*"' "$gtest_xml" | head -1 | tr -dc 0-9)
  gf=$(grep -o 'failures="[0-9]*"' "$gtest_xml" | head -1 | tr -dc 0-9)
  passed=$((passed + ${gt:-0} - ${gf:-0}))
  failed=$((failed + ${gf:-0}))
  rm -f "$gtest_xml"
done

echo "== python (pytest) =="
# Debian's torch lives in the system interpreter, not in a pyenv/venv one.
py_xml=$(mktemp --suffix=.xml)
LETHE_BUILD_DIR="$BUILD_DIR" PYTHONPATH="$BUILD_DIR/python" /usr/bin/python3 \
  -m pytest -q -p no:cacheprovider python-bindings/tests --junitxml="$py_xml"
py_rc=$?
# Exit 5 means no test ran: a failure here, the suite exists.
[[ $py_rc -eq 0 ]] || status=1
read -r pt pf ps < <(/usr/bin/python3 - "$py_xml" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0, 1, 0)
    raise SystemExit
suites = [root] if root.tag == "testsuite" else list(root)
get = lambda k: sum(int(s.get(k, 0)) for s in suites)
bad = get("failures") + get("errors")
print(get("tests") - bad - get("skipped"), bad, get("skipped"))
PY
)
if [[ $py_rc -ne 0 && ${pf:-0} -eq 0 ]]; then pf=1; fi
passed=$((passed + ${pt:-0}))
failed=$((failed + ${pf:-0}))
rm -f "$py_xml"

echo "== summary: $passed passed, $failed failed (lit unsupported: ${u:-0}, pytest skipped: ${ps:-0}) =="
exit $status

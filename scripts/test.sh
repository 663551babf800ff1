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

# run_pytest PYTHON TESTS...: runs pytest under PYTHON and adds its counts.
skipped=0
run_pytest() {
  local python=$1
  shift
  local py_xml
  py_xml=$(mktemp --suffix=.xml)
  LETHE_BUILD_DIR="$BUILD_DIR" PYTHONPATH="$BUILD_DIR/python" "$python" \
    -m pytest -q -p no:cacheprovider "$@" --junitxml="$py_xml"
  local py_rc=$?
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
  skipped=$((skipped + ${ps:-0}))
  rm -f "$py_xml"
}

echo "== python (pytest) =="
# Debian's torch 1.13 lives in the system interpreter, not in a venv.
run_pytest /usr/bin/python3 python-bindings/tests

echo "== python, torch 2.11 from PyPI (Lethe inside torch.compile) =="
# The inductor partitioner needs torch >= 2.9: a virtual environment with
# PyPI's torch 2.11 (the GPU machines' version), made once per build dir.
if scripts/setup-torch-venv.sh "$BUILD_DIR/venv-torch"; then
  run_pytest "$BUILD_DIR/venv-torch/bin/python" \
    python-bindings/tests/test_torch_inductor.py \
    python-bindings/tests/test_inductor_offload.py \
    python-bindings/tests/test_inductor_memory.py \
    python-bindings/tests/test_calibration.py \
    python-bindings/tests/test_kernel_times.py \
    python-bindings/tests/test_inductor_bench.py \
    python-bindings/tests/test_inductor_gpu.py
else
  echo "test: could not set up torch 2.11 in $BUILD_DIR/venv-torch"
  status=1
  failed=$((failed + 1))
fi

echo "== summary: $passed passed, $failed failed (lit unsupported: ${u:-0}, pytest skipped: ${skipped}) =="
exit $status

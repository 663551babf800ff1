#!/usr/bin/env bash
# The runtime's fault tests (issue 18), on a machine with 2 GPUs: builds the
# runtime (scripts/build-runtime.sh; no LLVM needed) and runs
# test/integration/programs/fault-program.cpp under faults:
#
#   healthy                  two ranks, no fault (the control: exit 0)
#   rank-killed-mid-step     rank 1 SIGKILLs itself in its 6th step
#   rank-1-never-starts      rank 0 alone in a world of 2
#   rank-0-never-starts      rank 1 alone in a world of 2
#   device-arena-too-large   a device arena twice the card's memory
#   host-arena-unpinnable    a pinned host arena twice the host's memory
#
# A fault case passes when every surviving process exits non-zero within
# the stated limit with an error naming the cause (the report's "error", or
# the runtime's last line on stderr when the watchdog had to end the
# process). Every process runs under `timeout -s KILL`, so a hang shows as
# exit 137 and fails; this script never hangs.
#
# Prints a table (case, process, exit code, seconds, verdict, message) and
# writes it to $OUT/gpu-fault-tests.md (else <build dir>/fault-tests/), with
# each process's report and stderr beside it. Exits 1 if a case failed.
#
#   LETHE_RT_TIMEOUT_S  the runtime's bound on a blocking call (20 here)
set -uo pipefail
cd "$(dirname "$0")/.."
export LETHE_RUNTIME_BUILD_DIR=${LETHE_RUNTIME_BUILD_DIR:-build-runtime}
# NVLink multicast stays off on shared GPU hosts.
export NCCL_NVLS_ENABLE=0
export LETHE_RT_TIMEOUT_S=${LETHE_RT_TIMEOUT_S:-20}

if ! scripts/build-runtime.sh >/tmp/lethe-fault-build.log 2>&1; then
  tail -40 /tmp/lethe-fault-build.log
  echo "gpu-fault-tests: the runtime did not build" >&2
  exit 1
fi
BIN=$LETHE_RUNTIME_BUILD_DIR/bin/lethe-run
PROGRAMS=$LETHE_RUNTIME_BUILD_DIR/programs
RESULTS=${OUT:-$LETHE_RUNTIME_BUILD_DIR/fault-tests}
LOGS=$RESULTS/fault-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"

# The limit a surviving process must end within: the runtime's timeout, the
# watchdog's grace after an abort (10 s, Watchdog.cpp), and 30 s to create
# the CUDA context, calibrate and start NCCL.
LIMIT=$((${LETHE_RT_TIMEOUT_S%.*} + 10 + 30))
# Past this the process is killed: a hang.
HARD=$((LIMIT + 60))
RUN_ARGS=(--mode=timing --steps=20 --warmup=3 --no-graph --no-profile)

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
card_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits \
           -i 0 2>/dev/null | head -1)
host_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
echo "gpu-fault-tests: $gpus GPU(s), card $card_mib MiB, host $((host_kib / 1024)) MiB," \
     "LETHE_RT_TIMEOUT_S=$LETHE_RT_TIMEOUT_S, limit $LIMIT s"

# launch TAG [VAR=VALUE...] -- ARGS...: lethe-run in the background.
launch() {
  local tag=$1
  shift
  local vars=()
  while [[ $1 != -- ]]; do
    vars+=("$1")
    shift
  done
  shift
  (
    start=$EPOCHREALTIME
    env "${vars[@]}" timeout -s KILL "$HARD" "$BIN" "$@" \
      >"$LOGS/$tag.json" 2>"$LOGS/$tag.err"
    echo $? >"$LOGS/$tag.rc"
    awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }' \
      >"$LOGS/$tag.seconds"
  ) &
}

# The cause a process gave: its report's "error", else stderr's last line.
message() {
  python3 - "$LOGS/$1.json" "$LOGS/$1.err" <<'EOF'
import json, sys
try:
    text = json.load(open(sys.argv[1])).get("error", "")
except Exception:
    text = ""
if not text:
    lines = [l for l in open(sys.argv[2], errors="replace").read().splitlines()
             if l.strip()]
    text = lines[-1] if lines else ""
print(" ".join(text.split())[:300].replace("|", "/"))
EOF
}

ROWS=()
failed=0
# check CASE TAG ROLE PATTERN: ROLE survivor (non-zero, in time, the cause
# matches PATTERN), victim (the process the fault killed: recorded only) or
# healthy (exit 0).
check() {
  local case=$1 tag=$2 role=$3 pattern=${4:-}
  local rc seconds msg verdict
  rc=$(cat "$LOGS/$tag.rc" 2>/dev/null || echo "?")
  seconds=$(printf "%.1f" "$(cat "$LOGS/$tag.seconds" 2>/dev/null || echo 0)")
  msg=$(message "$tag")
  case $role in
  survivor)
    if [[ $rc == 137 ]]; then
      verdict="FAIL (hung: killed after $HARD s)"
    elif [[ $rc == 0 ]]; then
      verdict="FAIL (exit 0)"
    elif awk -v s="$seconds" -v l="$LIMIT" 'BEGIN { exit !(s > l) }'; then
      verdict="FAIL (over $LIMIT s)"
    elif ! grep -Eq "$pattern" <<<"$msg"; then
      verdict="FAIL (cause not named: /$pattern/)"
    else
      verdict="pass"
    fi
    ;;
  victim) verdict="killed by the test" ;;
  healthy)
    if [[ $rc == 0 ]]; then verdict="pass"; else verdict="FAIL (exit $rc)"; fi
    ;;
  esac
  [[ $verdict == FAIL* ]] && failed=1
  ROWS+=("| $case | $tag | $rc | $seconds | $verdict | $msg |")
}

two_ranks() { # CASE [rank-1 VAR=VALUE...]
  local case=$1
  shift
  local id=$LOGS/$case.id
  launch "$case.r0" LOCAL_RANK=0 -- "$PROGRAMS/fault-two-ranks.so" "${RUN_ARGS[@]}" \
    --device=0 --world=2 --rank=0 --nccl-id-file="$id"
  launch "$case.r1" LOCAL_RANK=1 "$@" -- "$PROGRAMS/fault-two-ranks.so" \
    "${RUN_ARGS[@]}" --device=1 --world=2 --rank=1 --nccl-id-file="$id"
  wait
}

if ((gpus >= 2)); then
  two_ranks healthy
  check healthy healthy.r0 healthy
  check healthy healthy.r1 healthy

  two_ranks rank-killed-mid-step LETHE_FAULT_KILL_AT_STEP=6
  check rank-killed-mid-step rank-killed-mid-step.r0 survivor \
    "did not finish within|NCCL reported"
  check rank-killed-mid-step rank-killed-mid-step.r1 victim

  launch rank-1-never-starts.r0 -- "$PROGRAMS/fault-two-ranks.so" "${RUN_ARGS[@]}" \
    --device=0 --world=2 --rank=0 --nccl-id-file="$LOGS/never1.id"
  wait
  check rank-1-never-starts rank-1-never-starts.r0 survivor "rank 1 did not join"

  launch rank-0-never-starts.r1 -- "$PROGRAMS/fault-two-ranks.so" "${RUN_ARGS[@]}" \
    --device=1 --world=2 --rank=1 --nccl-id-file="$LOGS/never0.id"
  wait
  check rank-0-never-starts rank-0-never-starts.r1 survivor \
    "rank 0 did not publish"
else
  echo "gpu-fault-tests: fewer than 2 GPUs: the rank cases are skipped" >&2
  failed=1
fi

launch device-arena-too-large \
  LETHE_FAULT_DEVICE_ARENA_BYTES=$((${card_mib:-200000} * 2 * 1048576)) -- \
  "$PROGRAMS/fault-one-rank.so" "${RUN_ARGS[@]}" --device=0
wait
check device-arena-too-large device-arena-too-large survivor \
  "device arena .* does not fit"

launch host-arena-unpinnable LETHE_FAULT_HOST_ARENA_BYTES=$((host_kib * 2048)) -- \
  "$PROGRAMS/fault-one-rank.so" "${RUN_ARGS[@]}" --device=0
wait
check host-arena-unpinnable host-arena-unpinnable survivor \
  "host arena .* cannot be pinned"

{
  echo "# Runtime fault tests ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Command: \`scripts/gpu-fault-tests.sh\`; $(nvidia-smi --query-gpu=name \
    --format=csv,noheader -i 0 2>/dev/null) x $gpus, card $card_mib MiB," \
    "host $((host_kib / 1024)) MiB; LETHE_RT_TIMEOUT_S=$LETHE_RT_TIMEOUT_S," \
    "limit $LIMIT s per surviving process."
  echo
  echo "| case | process | exit | seconds | verdict | message |"
  echo "|---|---|---:|---:|---|---|"
  printf '%s\n' "${ROWS[@]}"
} >"$RESULTS/gpu-fault-tests.md"
cat "$RESULTS/gpu-fault-tests.md"
exit $failed

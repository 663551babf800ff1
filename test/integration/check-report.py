#!/usr/bin/env python3
"""Checks a lethe-run JSON report.

usage: check-report.py REPORT.json CHECK...
  equal     checksum mode: equal to the compared program, stable runs
  mismatch  checksum mode: differs from the compared program
  timing    timing mode: step times, memory, per-stream busy time present
  copies    timing mode: both copy streams moved data at a plausible rate
  yielding  timing mode: a copy-yield mechanism, every copy went in chunks
"""
import json
import sys


def fail(message):
    print(f"check-report: {sys.argv[1]}: {message}")
    sys.exit(1)


def main():
    with open(sys.argv[1]) as f:
        report = json.load(f)
    if "error" in report:
        fail(report["error"])
    for check in sys.argv[2:]:
        if check == "equal":
            if not report.get("equal"):
                fail(f"checksums differ: {report['compare']['mismatched']}")
            if not (report["stable"] and report["compare"]["stable"]):
                fail("checksums changed between runs of the same program")
            if len(report["checksums"]) != 5:
                fail(f"expected 5 checksums, got {report['checksums']}")
        elif check == "mismatch":
            if report.get("equal", True):
                fail("checksums equal: the broken program went unnoticed")
            if not report["compare"]["mismatched"]:
                fail("no mismatched tensor named")
        elif check == "timing":
            steps = report["step_ms"]
            if "graph_error" in steps:
                fail(steps["graph_error"])
            for mode in ("eager", "graph"):
                if not steps[mode]["median"] > 0:
                    fail(f"no {mode} step time")
            mem = report["memory"]
            owned = mem["device_arena"] + mem["fixed_overhead"]
            if mem["peak_since_context"] < mem["device_arena"]:
                fail(f"measured peak {mem['peak_since_context']} below the "
                     f"arena {mem['device_arena']}")
            if mem["unaccounted"] > 0.25 * owned:
                fail(f"{mem['unaccounted']} bytes beyond arena + fixed "
                     f"overhead ({owned})")
            if not report["streams"]["compute"]["busy_ms"] > 0:
                fail("compute stream never busy")
        elif check == "copies":
            for stream in ("d2h", "h2d"):
                rate = report["streams"][stream]["gb_per_s"]
                if not rate > 5:
                    fail(f"{stream} moved {rate} GB/s")
        elif check == "yielding":
            mechanism = report["device"]["copy_yield_mechanism"]
            if mechanism.startswith("none"):
                fail(f"no copy-yield mechanism: {mechanism}")
            counts = report["counts"]
            copies = counts["ops_d2h"] + counts["ops_h2d"]
            if not (counts["yielding_copies"] == copies and
                    counts["copy_chunks"] > copies):
                fail(f"copies were not chunked: {counts}")
        else:
            fail(f"unknown check {check}")
    print(f"check-report: {sys.argv[1]}: {' '.join(sys.argv[2:])}: ok")


if __name__ == "__main__":
    main()

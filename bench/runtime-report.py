#!/usr/bin/env python3
"""Formats the example programs' lethe-run reports as markdown tables.

usage: runtime-report.py JSON_DIR   (as written by bench/runtime-bench.sh)
"""
import json
import os
import sys

MIB = 1 << 20


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    d = sys.argv[1]
    names = ["mlp-unplanned", "mlp-offload", "mlp-recompute"]
    for suffix, title in [
            ("timing", "real cuBLASLt GEMMs"),
            ("replayed", "GEMMs replayed at their planned time")]:
        print(f"## Example programs, {title}\n")
        print("| program | arena MiB | host MiB | planned ms | eager ms | "
              "graph ms | vs unplanned | peak since context MiB | "
              "arena + fixed MiB | unaccounted MiB | compute busy ms | "
              "D2H GB/s | H2D GB/s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        base = None
        for name in names:
            r = load(os.path.join(d, f"{name}.{suffix}.json"))
            if not r or "error" in r:
                print(f"| {name} | error: {r and r.get('error')} |")
                continue
            steps, mem = r["step_ms"], r["memory"]
            graph = steps.get("graph", {}).get("median", float("nan"))
            if base is None:
                base = graph
            streams = r.get("streams", {})

            def rate(s):
                v = streams.get(s, {}).get("gb_per_s")
                return f"{v:.1f}" if v else "-"
            busy = streams.get("compute", {}).get("busy_ms")
            cells = [
                name,
                f"{mem['device_arena'] / MIB:.0f}",
                f"{mem['host_arena'] / MIB:.0f}",
                f"{r['planned']['step_us'] / 1000:.2f}",
                f"{steps['eager']['median']:.2f}",
                f"{graph:.2f}",
                f"{(graph / base - 1) * 100:+.2f}%",
                f"{mem['peak_since_context'] / MIB:.1f}",
                f"{(mem['device_arena'] + mem['fixed_overhead']) / MIB:.1f}",
                f"{mem['unaccounted'] / MIB:+.1f}",
                f"{busy:.2f}" if busy else "-",
                rate("d2h"),
                rate("h2d"),
            ]
            print("| " + " | ".join(cells) + " |")
        print()
    r = load(os.path.join(d, "mlp-unplanned.timing.json"))
    if r and "device" in r:
        dev, mem = r["device"], r["memory"]
        print(f"Fixed overhead: GEMM workspace {mem['gemm_workspace'] / MIB:.0f}"
              f" MiB + scratch {mem['scratch'] / 1024:.0f} KiB + NCCL "
              f"{mem['nccl'] / MIB:.0f} MiB + other setup "
              f"{mem.get('setup_other', 0) / MIB:.1f} MiB (cuBLASLt handle, "
              f"kernels, streams, events); the CUDA context took "
              f"{mem['used_at_context'] / MIB:.0f} MiB before any of it. "
              f"Device-wide use by stage (MiB): " + ", ".join(
                  f"{k} {v / MIB:.0f}" for k, v in mem.get("samples", {}).items())
              + ". "
              f"SM clock measured {dev['sm_clock_mhz_measured']:.0f} MHz, "
              f"empty replay kernel back to back {dev['replay_floor_us']:.2f} us.\n")

    print("## Checksums (checksum mode, 3 runs each)\n")
    print("| program | vs mlp-unplanned | stable | mismatched tensors | "
          "combined |")
    print("|---|---|---|---|---|")
    for name in ["mlp-offload", "mlp-recompute", "mlp-offload-drop-wait",
                 "mlp-offload-release-early", "mlp-recompute-wrong-input"]:
        r = load(os.path.join(d, f"{name}.checksum.json"))
        if not r or "error" in r:
            print(f"| {name} | error: {r and r.get('error')} | | | |")
            continue
        verdict = "equal" if r.get("equal") else "differ"
        mism = ", ".join(r["compare"]["mismatched"]) or "-"
        print(f"| {name} | {verdict} | {r['stable']} | {mism} | "
              f"{r['combined']} |")
    u = load(os.path.join(d, "mlp-offload.checksum.json"))
    if u and "compare" in u:
        print(f"\nmlp-unplanned combined: {u['compare']['combined']}")


if __name__ == "__main__":
    main()

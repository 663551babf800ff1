#!/usr/bin/env python3
"""Tables from bench/gpu_contention.sh's device results.

usage: gpu_contention_report.py RESULTS_DIR   (the folder the device mode
filled, or contention.tar.gz unpacked). Prints Markdown: the correctness
checks, the all-gather microbenchmark per path, and the GPT-2 FSDP runs
over the PCIe path against issue 8's targets.
"""
import glob
import json
import os
import sys


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def load_json(path):
    text = read(path)
    try:
        return json.loads(text)
    except ValueError:
        return None


def main():
    res = sys.argv[1]
    print("# Copies that yield to collectives: GPU results\n")
    device = read(os.path.join(res, "device.txt")).strip()
    if device:
        print(f"Device: {device.splitlines()[0]} (x{len(device.splitlines())})\n")

    print("## Correctness\n")
    yt = read(os.path.join(res, "yieldtest.txt")).strip().splitlines()
    for line in yt:
        if line.startswith(("PASS", "FAIL", "SKIP", "copy-yield", "yieldtest exit")) or "passed" in line:
            print(f"    {line}")
    for line in read(os.path.join(res, "mlp-checks.txt")).strip().splitlines():
        print(f"    {line}")
    whole = load_json(os.path.join(res, "mlp-whole.timing.json"))
    chunked = load_json(os.path.join(res, "mlp-yield.timing.json"))
    if whole and chunked and "step_ms" in whole and "step_ms" in chunked:
        print("\nmlp-offload (no collectives, so chunking is pure overhead): step "
              f"{whole['step_ms']['eager']['median']:.3f} ms whole copies, "
              f"{chunked['step_ms']['eager']['median']:.3f} ms in 1 MiB chunks "
              "(eager medians)")
    print()

    print("## All-gather beside host copies (lethe-rt-yieldtest --contention, 2 ranks)\n")
    for path in ("nvlink", "pcie"):
        out = read(os.path.join(res, f"bench-{path}.rank0.out")).strip()
        label = "NVLink (NCCL defaults)" if path == "nvlink" else "PCIe path (NCCL_P2P_DISABLE=1)"
        print(f"### {label}\n")
        if out:
            print(out + "\n")
        else:
            err = read(os.path.join(res, f"bench-{path}.rank0.err")).strip()
            print(f"no result: {err[-500:]}\n")

    runs = {}
    for label in ("nooffload", "overlap", "yield", "yield1m"):
        r = load_json(os.path.join(res, f"fsdp-{label}.rank0.json"))
        if r:
            runs[label] = r
    if runs:
        print("## GPT-2 FSDP, 2 ranks, PCIe path, budget 65% (lethe-run, rank 0)\n")
        print("| variant | eager step ms | graph step ms | comm busy ms (profiled step) "
              "| D2H busy ms | H2D busy ms | peak MiB | error |")
        print("|---|---|---|---|---|---|---|---|")
        for label, r in runs.items():
            steps = r.get("step_ms", {})
            streams = r.get("streams", {})

            def med(kind):
                return steps.get(kind, {}).get("median", float("nan"))

            def busy(s):
                return streams.get(s, {}).get("busy_ms", float("nan"))

            peak = r.get("memory", {}).get("peak_since_context", 0) / 2**20
            err = r.get("error", "") or steps.get("graph_error", "")
            print(f"| {label} | {med('eager'):.2f} | {med('graph'):.2f} | "
                  f"{busy('comm'):.2f} | {busy('d2h'):.2f} | {busy('h2d'):.2f} | "
                  f"{peak:.0f} | {err[:80]} |")
        base = runs.get("nooffload")
        if base and "streams" in base:
            c0 = base["streams"]["comm"]["busy_ms"]
            s0 = base["step_ms"]["eager"]["median"]
            print()
            for label in ("overlap", "yield", "yield1m"):
                r = runs.get(label)
                if not r or "streams" not in r:
                    continue
                c = r["streams"]["comm"]["busy_ms"]
                s = r["step_ms"]["eager"]["median"]
                print(f"- {label}: collectives {100 * (c / c0 - 1):+.1f}% vs no offload "
                      f"(target within 5%), step {100 * (s / s0 - 1):+.1f}%")
            so = runs.get("overlap", {}).get("step_ms", {}).get("eager", {}).get("median")
            for label in ("yield", "yield1m"):
                sy = runs.get(label, {}).get("step_ms", {}).get("eager", {}).get("median")
                if so and sy:
                    print(f"- {label} step vs the better of (overlap, no offload): "
                          f"{100 * (sy / min(so, s0) - 1):+.1f}% (target <= 0)")
        print()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Solve time and memory of `auto` on synthetic transformer steps of growing
size (bench/gen_graph.py, one layer of 32 nodes repeated), for issue 20's
scaling targets: 10,000 ops under 200 ms, 100,000 under 2 s and 1 GB on 2
cores, growth at most n log n from 10k to 200k.

For every size and binary it runs `lethe plan STEP --budget B --json` and
prints one markdown row: the plan's overhead, `solve_ms` (wall clock of the
planning call: analysis, seeds, the solver, the final evaluation), the whole
command's wall clock and CPU time (user + sys: import of the JSON graph
included; CPU time is what other load on the machine does not inflate), its
peak RSS, and the same for `--policy none` (import, analysis, one
simulation): the whole run's CPU less that is auto's own. With --before, a second binary (the parent commit's build)
runs the same steps for a before/after table; --skip-before-above skips it on
steps it would take minutes on.

    bench/scaling_bench.py [--build build] [--before OTHER/bin/lethe]
        [--nodes 10000,20000,50000,100000,200000] [--budget 50%]
        [--runs 1] [--skip-before-above 100000]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_plan(lethe, graph, budget, policy="auto"):
    """(plan JSON, wall s, cpu s, peak RSS MB) of one `lethe plan`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        stats = os.path.join(tmp, "time.txt")
        subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", stats,
                        lethe, "plan", graph, "--budget", budget,
                        "--policy", policy, "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        wall, user, sys_, rss_kb = open(stats).read().split()[-4:]
        return (json.load(open(out)), float(wall), float(user) + float(sys_),
                int(rss_kb) / 1024)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--before", help="a second lethe binary to compare with")
    ap.add_argument("--nodes", default="10000,20000,50000,100000,200000")
    ap.add_argument("--budget", default="50%")
    ap.add_argument("--runs", type=int, default=1,
                    help="runs per step and binary; the fastest is shown")
    ap.add_argument("--skip-before-above", type=int, default=10**9,
                    help="run --before only on steps of at most this many "
                         "nodes")
    ap.add_argument("--graphs", default=None,
                    help="directory to keep the generated steps in")
    args = ap.parse_args()
    graphs = args.graphs or tempfile.mkdtemp()
    os.makedirs(graphs, exist_ok=True)
    binaries = [("after", os.path.join(args.build, "bin", "lethe"))]
    if args.before:
        binaries.insert(0, ("before", args.before))

    print(f"machine: {platform.node()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print(f"budget {args.budget}; best of {args.runs} run(s)\n")
    print("| ops (nodes) | version | overhead | solve (wall) | "
          "whole run: wall / CPU | auto's CPU | peak RSS | none: CPU / RSS "
          "| load |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in args.nodes.split(",")]:
        path = os.path.join(graphs, f"step-{n}.json")
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                            "--nodes", str(n), "-o", path], check=True,
                           stdout=subprocess.DEVNULL)
        nodes = len(json.load(open(path))["nodes"])
        # `--policy none`: import, analysis and one simulation; auto's CPU is
        # the whole run's less this (wall times on a loaded machine mislead).
        _, _, none_cpu, none_rss = run_plan(binaries[-1][1], path, "100%",
                                            "none")
        for name, lethe in binaries:
            if name == "before" and n > args.skip_before_above:
                continue
            best = None
            for _ in range(args.runs):
                result = run_plan(lethe, path, args.budget)
                if best is None or result[0]["solve_ms"] < best[0]["solve_ms"]:
                    best = result
            plan, wall, cpu, rss = best
            print(f"| {nodes:,} | {name} | {100 * plan['overhead']:.2f}% | "
                  f"{plan['solve_ms'] / 1000:.2f} s | {wall:.1f} s / "
                  f"{cpu:.1f} s | {cpu - none_cpu:.1f} s | {rss:,.0f} MB | "
                  f"{none_cpu:.1f} s / {none_rss:,.0f} MB | "
                  f"{os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()

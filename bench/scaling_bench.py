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
simulation): the whole run's CPU less that is auto's own. Each number is the
median of --runs runs (the machine is shared: wall times vary with its
load, shown per row as the 1-minute load average). With --before, a second
binary (the parent commit's build) runs the same steps for a before/after
table; --skip-before-above skips it on steps it would take minutes on.

With --phases, each binary's whole run on each step is also sampled with
`perf record` (--runs times) and its CPU split into phases by the functions
on each sample's stack (PHASES: the deepest match names the phase), shown
as the median share of the run and that share of the median CPU time.

    bench/scaling_bench.py [--build build] [--before OTHER/bin/lethe]
        [--nodes 10000,20000,50000,100000,200000] [--budget 50%]
        [--runs 3] [--skip-before-above 100000] [--phases]
"""
import argparse
import json
import os
import platform
import re
import statistics
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


# (function on the stack, phase) of a `lethe plan` run; a sample belongs to
# the phase of the deepest function of its stack found here.
PHASES = [
    ("lethe::loadTrainingGraph", "import (JSON to IR, costs)"),
    ("lethe::planStep", "plan: analysis, seeds, final evaluation"),
    ("lethe::solveAuto", "plan: the auto solve"),
    ("lethe::agreeWithPipeline", "program check: clone, plan written, erase"),
    ("MaterializePass::runOnOperation", "program check: materialize"),
    ("ScheduleProgramPass::runOnOperation", "program check: schedule"),
    ("AssignBuffersPass::runOnOperation", "program check: assign buffers"),
    # The feasibility check packs the buffers itself, without the pass: a
    # sweep's arena, and packIntervals only where that is over the budget.
    ("lethe::packProgram", "program check: assign buffers"),
    ("lethe::placeByBeginBestFit", "program check: assign buffers"),
    ("lethe::packIntervals", "program check: assign buffers"),
    ("mlir::verify", "verifier"),
    ("lethe::writeOutputFile", "plan JSON: built, printed, checked"),
]
OTHER = "other (start, exit, freeing)"


def frame_symbol(line):
    """The function of a `perf script` frame line ("  addr name+0x1f
    (module)"), without its parameters or offset."""
    name = line.strip().split(" ", 1)[-1]
    name = re.sub(r"\s+\([^()]*\)$", "", name)  # the module
    name = re.sub(r"\+0x[0-9a-f]+$", "", name)
    name = name.replace("(anonymous namespace)::", "")
    return name.split("(", 1)[0]


def phase_shares(lethe, graph, budget, freq=499):
    """{phase: share of the samples} of one `lethe plan` under perf."""
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-q", "-F", str(freq),
                        "--call-graph", "dwarf,16384", "-o", data, lethe,
                        "plan", graph, "--budget", budget, "--json",
                        os.path.join(tmp, "plan.json")],
                       check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        # --no-inline: resolving inlined frames (addr2line) took minutes.
        script = subprocess.run(["perf", "script", "--no-inline", "-i", data],
                                check=True, capture_output=True,
                                text=True, errors="replace").stdout
    counts = {}
    total = 0
    sample, phase = False, None
    # perf script: a sample's header line, its frames (indented) leaf
    # first, a blank line; the first frame that names a phase decides.
    for line in script.splitlines() + [""]:
        if not line.strip():
            if sample:
                counts[phase or OTHER] = counts.get(phase or OTHER, 0) + 1
                total += 1
            sample, phase = False, None
        elif line[0] not in " \t":
            sample, phase = True, None
        elif phase is None:
            symbol = frame_symbol(line)
            phase = next((name for pattern, name in PHASES
                          if symbol == pattern or
                          symbol.endswith("::" + pattern)), None)
    return {name: n / total for name, n in counts.items()}


def print_phases(lethe, graph, budget, runs, cpu):
    """The phase table of `runs` profiled runs; seconds are the median
    share of `cpu` (the unprofiled runs' median)."""
    shares = [phase_shares(lethe, graph, budget) for _ in range(runs)]
    print(f"\nphases of {os.path.basename(graph)} ({lethe}), median of "
          f"{runs} profiled run(s), seconds of the {cpu:.2f} s CPU median:\n")
    print("| phase | share | ~s |")
    print("|---|---:|---:|")
    # A phase named by several functions is one row.
    for name in dict.fromkeys([p for _, p in PHASES] + [OTHER]):
        share = statistics.median(s.get(name, 0.0) for s in shares)
        print(f"| {name} | {100 * share:.1f}% | {share * cpu:.2f} |")
    print(flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--before", help="a second lethe binary to compare with")
    ap.add_argument("--nodes", default="10000,20000,50000,100000,200000")
    ap.add_argument("--budget", default="50%")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per step and binary; the median is shown")
    ap.add_argument("--skip-before-above", type=int, default=10**9,
                    help="run --before only on steps of at most this many "
                         "nodes")
    ap.add_argument("--graphs", default=None,
                    help="directory to keep the generated steps in")
    ap.add_argument("--phases", action="store_true",
                    help="also split each run's CPU into phases (perf)")
    args = ap.parse_args()
    graphs = args.graphs or tempfile.mkdtemp()
    os.makedirs(graphs, exist_ok=True)
    binaries = [("after", os.path.join(args.build, "bin", "lethe"))]
    if args.before:
        binaries.insert(0, ("before", args.before))

    print(f"machine: {platform.node()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print(f"budget {args.budget}; median of {args.runs} run(s)\n")
    print("| ops (nodes) | version | overhead | solve (wall) | "
          "whole run: wall / CPU | auto's CPU | peak RSS | none: CPU / RSS "
          "| load |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    phases = []
    for n in [int(x) for x in args.nodes.split(",")]:
        path = os.path.join(graphs, f"step-{n}.json")
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                            "--nodes", str(n), "-o", path], check=True,
                           stdout=subprocess.DEVNULL)
        nodes = len(json.load(open(path))["nodes"])
        # `--policy none`: import, analysis and one simulation; auto's CPU is
        # the whole run's less this (wall times on a loaded machine mislead).
        for name, lethe in binaries:
            if name == "before" and n > args.skip_before_above:
                continue
            nones = [run_plan(lethe, path, "100%", "none")
                     for _ in range(args.runs)]
            none_cpu = statistics.median(r[2] for r in nones)
            none_rss = statistics.median(r[3] for r in nones)
            runs = [run_plan(lethe, path, args.budget)
                    for _ in range(args.runs)]
            plan = runs[0][0]
            if any(r[0]["overhead"] != plan["overhead"] for r in runs):
                sys.exit(f"{name} on {path}: runs disagree on the plan")
            solve = statistics.median(r[0]["solve_ms"] for r in runs)
            wall = statistics.median(r[1] for r in runs)
            cpu = statistics.median(r[2] for r in runs)
            rss = statistics.median(r[3] for r in runs)
            print(f"| {nodes:,} | {name} | {100 * plan['overhead']:.2f}% | "
                  f"{solve / 1000:.2f} s | {wall:.2f} s / "
                  f"{cpu:.2f} s | {cpu - none_cpu:.2f} s | {rss:,.0f} MB | "
                  f"{none_cpu:.2f} s / {none_rss:,.0f} MB | "
                  f"{os.getloadavg()[0]:.1f} |", flush=True)
            if args.phases:
                phases.append((lethe, path, cpu))
    for lethe, path, cpu in phases:
        print_phases(lethe, path, args.budget, args.runs, cpu)


if __name__ == "__main__":
    main()

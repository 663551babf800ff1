#!/usr/bin/env python3
"""CPU time of `auto`'s solve alone (planTrainingStep in process, measured by
lethe-planner-bench with std::clock), per corpus graph and budget, for two
builds side by side: the median of --runs runs, the runs of the two
binaries interleaved so that both see the same load. Prints one markdown
row per (graph, budget) and the overheads, which must agree.

    bench/solve_cpu.py BEFORE/lethe-planner-bench AFTER/lethe-planner-bench
        [--graphs graphs/graph_*.json ...] [--budgets 0.4,0.5,0.7,0.9]
        [--runs 3]
"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW = re.compile(r"^auto\s+(\d+)%\s+(\S+)\s+\S+%\s+(\S+)%\s+(\S+)")


def run(bench, graph, budgets):
    """{budget %: (overhead %, feasible, solve CPU ms)} of one run."""
    out = subprocess.run([bench, "--graph", graph, "--budgets", budgets,
                          "--policies", "auto", "--repeat", "1"],
                         check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (m.group(3), m.group(2), float(m.group(4)))
    return rows


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--graphs", nargs="+", default=sorted(
        glob.glob(os.path.join(ROOT, "graphs", "graph_*.json"))))
    ap.add_argument("--budgets", default="0.4,0.5,0.7,0.9")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print("| graph | budget | fits | overhead | before: solve CPU ms | "
          "after: solve CPU ms | after / before | load |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    agree = True
    for graph in args.graphs:
        name = os.path.basename(graph)[len("graph_"):-len(".json")]
        runs = {"before": [], "after": []}
        for _ in range(args.runs):
            for key, bench in (("before", args.before), ("after", args.after)):
                runs[key].append(run(bench, graph, args.budgets))
        for budget in runs["before"][0]:
            b = runs["before"][0][budget]
            a = runs["after"][0][budget]
            if b[:2] != a[:2]:
                agree = False
            tb = statistics.median(r[budget][2] for r in runs["before"])
            ta = statistics.median(r[budget][2] for r in runs["after"])
            print(f"| {name} | {budget}% | {a[1]} | {a[0]}% | {tb:.0f} | "
                  f"{ta:.0f} | {ta / tb:.2f} | {os.getloadavg()[0]:.1f} |",
                  flush=True)
    if not agree:
        print("overheads or feasibility DIFFER")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())

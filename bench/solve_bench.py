#!/usr/bin/env python3
"""Solve time of `auto` on the corpus (issue 16: under 200 ms on every
graph), measured as CPU time, and the plans themselves, to check that a
change to the solver's speed gives the same plans.

For every graph and budget (the least budget `lethe plan` states, then
percentages of the unplanned peak) it runs `lethe plan GRAPH --budget B
--json` --runs times and reports, per binary, the median of the plan's
`solve_ms` (wall clock of the planning call) and of the whole command's CPU
time (user + sys, from /usr/bin/time) less the median CPU time of `lethe
plan GRAPH --budget 100% --policy none --json` (import, analysis, one
simulation, the JSON written): "auto's CPU", which the load of a shared
machine inflates far less than wall times. Infeasible budgets run once
(`lethe plan` then searches for the least budget, which is not the solve).

The first run's plan of each case is kept in --plans DIR/BINARY/; with
--before, the two binaries' plans are compared field by field (`solve_ms`
dropped) and every difference is printed; exit 1 if any.

    bench/solve_bench.py [--build build] [--before OTHER/bin/lethe]
        [--graphs graphs/graph_*.json ...] [--budgets least,40%,50%,70%,90%]
        [--runs 3] [--plans DIR] [--least-cache FILE]
"""
import argparse
import glob
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


def run_plan(lethe, graph, budget, policy="auto", keep=None):
    """(plan JSON or None, cpu s, stderr) of one `lethe plan --json`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        stats = os.path.join(tmp, "time.txt")
        r = subprocess.run(["/usr/bin/time", "-f", "%U %S", "-o", stats,
                            lethe, "plan", graph, "--budget", budget,
                            "--policy", policy, "--json", out],
                           capture_output=True, text=True)
        user, sys_ = open(stats).read().split()[-2:]
        doc = None
        if os.path.exists(out):
            doc = json.load(open(out))
            if keep:
                os.makedirs(os.path.dirname(keep), exist_ok=True)
                with open(keep, "w") as f:
                    json.dump(doc, f, indent=1, sort_keys=True)
        return doc, float(user) + float(sys_), r.stderr


def least_budget(lethe, graph):
    r = subprocess.run([lethe, "plan", graph, "--budget", "1"],
                       capture_output=True, text=True)
    m = re.search(r"least budget .*?\((\d+) B\)", r.stderr + r.stdout)
    return int(m.group(1)) if m else None


def strip(doc):
    doc = json.loads(json.dumps(doc))
    doc.pop("solve_ms", None)
    if isinstance(doc.get("lower_bound"), dict):
        doc["lower_bound"].pop("solve_ms", None)
    return doc


def differences(a, b, path=""):
    """Paths where two JSON values differ."""
    if type(a) is not type(b):
        return [path or "/"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}")
            else:
                out += differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path} (length {len(a)} vs {len(b)})"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--before", help="a second lethe binary to compare with")
    ap.add_argument("--graphs", nargs="+",
                    default=sorted(glob.glob(os.path.join(
                        ROOT, "graphs", "graph_*.json"))))
    ap.add_argument("--budgets", default="least,40%,50%,70%,90%")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plans", default=None,
                    help="keep every case's plan here (BINARY/CASE.json)")
    ap.add_argument("--least-cache", default=None,
                    help="JSON file of least budgets (read, else written)")
    args = ap.parse_args()
    binaries = [("after", os.path.join(args.build, "bin", "lethe"))]
    if args.before:
        binaries.insert(0, ("before", args.before))
    plans = args.plans or tempfile.mkdtemp()

    least = {}
    if args.least_cache and os.path.exists(args.least_cache):
        least = json.load(open(args.least_cache))
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M %Z', time.gmtime())}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}; median of "
          f"{args.runs} run(s)\n")
    print("| graph | budget | " + " | ".join(
        f"{n}: solve ms (wall) / auto's CPU ms" for n, _ in binaries) +
        " | overhead | load |")
    print("|---|---|" + "---:|" * len(binaries) + "---:|---:|")
    differ = 0
    for graph in args.graphs:
        name = os.path.basename(graph)[len("graph_"):-len(".json")]
        if "least" in args.budgets and name not in least:
            least[name] = least_budget(binaries[0][1], graph)
            if args.least_cache:
                json.dump(least, open(args.least_cache, "w"), indent=1)
        none_cpu = {}
        for bname, lethe in binaries:
            none_cpu[bname] = statistics.median(
                run_plan(lethe, graph, "100%", "none")[1]
                for _ in range(args.runs))
        for budget in args.budgets.split(","):
            text = str(least[name]) if budget == "least" else budget
            cells, docs = [], {}
            for bname, lethe in binaries:
                keep = os.path.join(plans, bname,
                                    f"{name}-{budget.rstrip('%')}.json")
                doc, cpu, err = run_plan(lethe, graph, text, keep=keep)
                docs[bname] = doc
                if doc is None or not doc.get("feasible"):
                    cells.append("infeasible" if doc else "error")
                    continue
                cpus, solves = [cpu], [doc["solve_ms"]]
                for _ in range(args.runs - 1):
                    d, c, _ = run_plan(lethe, graph, text)
                    cpus.append(c)
                    solves.append(d["solve_ms"])
                cells.append(f"{statistics.median(solves):.0f} / "
                             f"{1000 * (statistics.median(cpus) - none_cpu[bname]):.0f}")
            doc = docs[binaries[-1][0]]
            overhead = (f"+{100 * doc['overhead']:.1f}%"
                        if doc and doc.get("feasible") else "-")
            print(f"| {name} | {budget} | " + " | ".join(cells) +
                  f" | {overhead} | {os.getloadavg()[0]:.1f} |", flush=True)
            if args.before:
                a, b = docs["before"], docs["after"]
                diff = differences(strip(a), strip(b)) if a and b else (
                    [] if a == b else ["one binary wrote no plan"])
                if diff:
                    differ += 1
                    print(f"  DIFFERS {name} at {budget}: " +
                          "; ".join(diff[:8]), flush=True)
    if args.before:
        print(f"\nplans differing: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

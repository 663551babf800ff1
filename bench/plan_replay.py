#!/usr/bin/env python3
"""A plan read back with `--plan` gives the solver's peak and step (issue 16).

For every plan document DIR/GRAPH-BUDGET.json (as `bench/solve_bench.py
--plans` keeps them: `lethe plan GRAPHS/graph_GRAPH.json --json` of `auto`),
runs `lethe plan GRAPHS/graph_GRAPH.json --budget B --plan DOC --json` at the
document's own budget and prints the solver's and the replay's peak and step
time, and whether they are equal; exit 1 if any differs.

    python3 bench/plan_replay.py [--build build] [--graphs graphs] DIR
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--graphs", default=os.path.join(ROOT, "graphs"))
    ap.add_argument("plans")
    args = ap.parse_args()
    lethe = os.path.join(args.build, "bin", "lethe")
    print("| graph | budget | solver peak B | replay peak B | solver step us "
          "| replay step us | same |")
    print("|---|---|---:|---:|---:|---:|---|")
    differ = 0
    for path in sorted(glob.glob(os.path.join(args.plans, "*.json"))):
        case = os.path.basename(path)[:-len(".json")]
        graph, budget = case.rsplit("-", 1)
        doc = json.load(open(path))
        if doc.get("policy") != "auto" or not doc.get("feasible"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "given.json")
            subprocess.run([lethe, "plan",
                            os.path.join(args.graphs, f"graph_{graph}.json"),
                            "--budget", str(doc["budget_bytes"]), "--plan",
                            path, "--json", out], capture_output=True)
            back = json.load(open(out)) if os.path.exists(out) else {}
        same = (back.get("peak_bytes") == doc["peak_bytes"]
                and back.get("step_us") == doc["step_us"])
        differ += not same
        step = back.get("step_us")
        print(f"| {graph} | {budget} | {doc['peak_bytes']} | "
              f"{back.get('peak_bytes')} | {doc['step_us']:.1f} | "
              f"{step if step is None else round(step, 1)} | "
              f"{'yes' if same else '**no**'} |", flush=True)
    print(f"\nplans whose replay differs: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

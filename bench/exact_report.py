#!/usr/bin/env python3
"""Summarises lethe-planner-bench CSVs that include the `exact` policy.

    exact_report.py NAME=FILE.csv [NAME=FILE.csv ...]

For each CSV (one graph family) it prints a Markdown table: how often the
exact solver proved the optimum, its solve time and gap, and how the fast
`auto` solver and every other policy compare with it at equal budget (both
measured by the simulator, as the bench reports them). "Faster than exact"
counts plans more than 0.5% faster than the exact one: the exact model
approximates the simulator (docs/ExactSolver.md §4), so this can happen.
"""

import csv
import statistics
import sys
from collections import defaultdict


def load(path):
    cases = defaultdict(dict)
    for row in csv.DictReader(open(path)):
        cases[(row["graph"], row["fraction"])][row["policy"]] = row
    return cases


def overhead(row):
    return float(row["step_us"]) / float(row["baseline_step_us"]) - 1.0


def summarise(name, cases):
    exact = [c["exact"] for c in cases.values() if "exact" in c]
    optimal = [r for r in exact if r["exact_gap"] != "" and float(r["exact_gap"]) == 0]
    gaps = [float(r["exact_gap"]) for r in exact if r["exact_gap"] != ""]
    times = sorted(float(r["solve_ms"]) / 1000 for r in exact)
    graphs = {g for g, _ in cases}
    print(f"### {name}: {len(graphs)} graphs, {len(cases)} graph x budget cases")
    print()
    print(f"- exact: proven optimal in {len(optimal)}/{len(exact)}; "
          f"largest gap {100 * max(gaps, default=0):.2f}% of the step; "
          f"solve CPU time median {statistics.median(times):.2f} s, "
          f"max {max(times):.2f} s")
    # Policies against the exact plan where it is proven optimal and fits.
    solved = [c for c in cases.values()
              if "exact" in c and c["exact"]["feasible"] == "1"
              and c["exact"]["exact_gap"] != ""
              and float(c["exact"]["exact_gap"]) == 0]
    policies = sorted({p for c in cases.values() for p in c} - {"exact"},
                      key=lambda p: (p != "auto", p))
    print(f"- {len(solved)} cases where the exact plan fits and is proven "
          f"optimal; per policy at the same budget:")
    print()
    print("| policy | fits | within 2% of exact | faster than exact | mean overhead (when it fits) | exact's mean overhead on those cases |")
    print("|---|---|---|---|---|---|")
    print(f"| exact | {len(solved)}/{len(solved)} | - | - | "
          f"{100 * statistics.mean(overhead(c['exact']) for c in solved):.2f}% | - |"
          if solved else "| exact | 0 | - | - | - | - |")
    for policy in policies:
        rows = [(c[policy], c["exact"]) for c in solved if policy in c]
        fits = [(r, e) for r, e in rows if r["feasible"] == "1"]
        within = sum(1 for r, e in fits
                     if float(r["step_us"]) <= 1.02 * float(e["step_us"]))
        faster = sum(1 for r, e in fits
                     if float(r["step_us"]) < 0.995 * float(e["step_us"]))
        mean = (f"{100 * statistics.mean(overhead(r) for r, _ in fits):.2f}%"
                if fits else "-")
        mean_exact = (f"{100 * statistics.mean(overhead(e) for _, e in fits):.2f}%"
                      if fits else "-")
        print(f"| {policy} | {len(fits)}/{len(rows)} | {within}/{len(rows)} | "
              f"{faster} | {mean} | {mean_exact} |")
    print()


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 1
    for arg in sys.argv[1:]:
        name, _, path = arg.partition("=")
        summarise(name, load(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())

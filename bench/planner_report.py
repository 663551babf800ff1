#!/usr/bin/env python3
"""Turns lethe-planner-bench CSVs into bench/results/planner.md and an SVG
plot of step-time overhead against the budget.

Usage: planner_report.py --shared S.csv --random R.csv --large L.csv
                         --out-md planner.md --out-svg planner-overhead.svg
"""

import argparse
import csv
import datetime
import os
import platform
import statistics
from collections import defaultdict

POLICIES = ["auto", "exact", "full", "every-n", "selective-op",
            "selective-op-offload", "offload-all", "knapsack-greedy",
            "knapsack-dp"]
COLORS = {"auto": "#d62728", "exact": "#000000", "full": "#1f77b4",
          "every-n": "#2ca02c", "selective-op": "#9467bd",
          "selective-op-offload": "#8c564b", "offload-all": "#e377c2",
          "knapsack-greedy": "#7f7f7f", "knapsack-dp": "#bcbd22"}


def read(path):
    rows = []
    if not path or not os.path.exists(path):
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            r["fraction"] = float(r["fraction"])
            r["budget_bytes"] = int(r["budget_bytes"])
            r["peak_bytes"] = int(r["peak_bytes"])
            r["feasible"] = r["feasible"] == "1"
            r["step_us"] = float(r["step_us"])
            r["baseline_step_us"] = float(r["baseline_step_us"])
            r["solve_ms"] = float(r["solve_ms"])
            r["overhead"] = r["step_us"] / r["baseline_step_us"] - 1.0
            rows.append(r)
    return rows


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def baseline_peak(rows, graph):
    for r in rows:
        if r["graph"] == graph:
            return r["budget_bytes"] / r["fraction"]
    return 1.0


def shared_table(rows):
    out = []
    graphs = sorted({r["graph"] for r in rows})
    for g in graphs:
        grows = [r for r in rows if r["graph"] == g]
        policies = [p for p in POLICIES if any(r["policy"] == p for r in grows)]
        fractions = sorted({r["fraction"] for r in grows})
        base = baseline_peak(grows, g)
        step = grows[0]["baseline_step_us"] / 1000.0
        out.append(f"### {g} (unplanned peak {base / 2**30:.2f} GiB, "
                   f"step {step:.2f} ms)\n")
        out.append("Step-time overhead of each plan; `—`: the policy's plan "
                   "does not fit (its peak, % of the unplanned one, in "
                   "brackets); **bold**: the least overhead that fits.\n")
        out.append("| budget | " + " | ".join(policies) + " |")
        out.append("|---:|" + "---:|" * len(policies))
        for f in fractions:
            cells = []
            fitting = [r["overhead"] for r in grows
                       if r["fraction"] == f and r["feasible"]]
            best = min(fitting) if fitting else None
            for p in policies:
                r = next((r for r in grows
                          if r["fraction"] == f and r["policy"] == p), None)
                if r is None:
                    cells.append("")
                    continue
                peak = 100.0 * r["peak_bytes"] / base
                if r["feasible"]:
                    text = f"{100 * r['overhead']:.2f}%"
                    if best is not None and abs(r["overhead"] - best) < 1e-12:
                        text = f"**{text}**"
                    cells.append(text)
                else:
                    cells.append(f"— ({peak:.0f}%)")
            out.append(f"| {100 * f:.0f}% | " + " | ".join(cells) + " |")
        solve = [r["solve_ms"] for r in grows if r["policy"] == "auto"]
        out.append(f"\n`auto` solve time (CPU): median {statistics.median(solve):.1f} ms, "
                   f"max {max(solve):.1f} ms over the budgets.\n")
        # Over-budget knapsack plans.
        over = [r for r in grows if r["policy"].startswith("knapsack")
                and not r["feasible"]]
        if over:
            worst = max(over, key=lambda r: r["peak_bytes"] / r["budget_bytes"])
            out.append(f"The knapsack baselines exceed the budget in "
                       f"{len(over)} of "
                       f"{sum(1 for r in grows if r['policy'].startswith('knapsack'))} "
                       f"plans; worst: {worst['policy']} at "
                       f"{100 * worst['fraction']:.0f}% peaks at "
                       f"{100 * worst['peak_bytes'] / worst['budget_bytes']:.0f}% "
                       f"of the budget.\n")
    return "\n".join(out)


def random_summary(rows):
    if not rows:
        return ""
    out = []
    graphs = sorted({r["graph"] for r in rows})
    fractions = sorted({r["fraction"] for r in rows})
    policies = [p for p in POLICIES if any(r["policy"] == p for r in rows)]
    by = {(r["graph"], r["policy"], r["fraction"]): r for r in rows}
    out.append(f"{len(graphs)} random layered graphs "
               f"(`unittests/Planner/RandomGraph.cpp`, seeds 1000..."
               f"{999 + len(graphs)}). Per budget: how many graphs each "
               "policy fits, and the mean overhead over the graphs where "
               "both it and `auto` fit.\n")
    out.append("| budget | " + " | ".join(policies) + " |")
    out.append("|---:|" + "---:|" * len(policies))
    for f in fractions:
        cells = []
        for p in policies:
            fit = [g for g in graphs if (g, p, f) in by and by[(g, p, f)]["feasible"]]
            both = [g for g in fit if by.get((g, "auto", f), {}).get("feasible")]
            mean = (statistics.mean(by[(g, p, f)]["overhead"] for g in both)
                    if both else None)
            text = f"{len(fit)}/{len(graphs)}"
            if mean is not None:
                text += f", {100 * mean:.2f}%"
            cells.append(text)
        out.append(f"| {100 * f:.0f}% | " + " | ".join(cells) + " |")
    # auto vs exact where exact proved optimality or finished.
    pairs = []
    for g in graphs:
        for f in fractions:
            a, e = by.get((g, "auto", f)), by.get((g, "exact", f))
            if a and e and a["feasible"] and e["feasible"]:
                pairs.append((a["step_us"] / e["step_us"] - 1.0, g, f, e))
    if pairs:
        worst = max(pairs)
        within = sum(1 for p in pairs if p[0] <= 0.02)
        better = sum(1 for p in pairs if p[0] < -1e-9)
        out.append(f"\n`auto` against the exact solver on the {len(pairs)} "
                   f"(graph, budget) pairs where both fit: step time within "
                   f"2% of exact in {within}; `auto` faster than the exact "
                   f"solver's plan (stopped at its time limit or its model "
                   f"departing from the simulator) in {better}; worst "
                   f"{100 * worst[0]:+.2f}% ({worst[1]} at "
                   f"{100 * worst[2]:.0f}%). Mean {100 * statistics.mean(p[0] for p in pairs):+.2f}%.\n")
    beaten = 0
    total = 0
    for g in graphs:
        for f in fractions:
            a = by.get((g, "auto", f))
            if not a or not a["feasible"]:
                continue
            for p in policies:
                if p in ("auto", "exact") or p.startswith("knapsack"):
                    continue
                r = by.get((g, p, f))
                if r and r["feasible"]:
                    total += 1
                    beaten += a["step_us"] <= r["step_us"] + 1e-6
    if total:
        out.append(f"`auto` is at least as fast as the fixed policy in "
                   f"{beaten} of {total} (graph, budget, fixed policy) "
                   f"triples where the fixed policy fits.\n")
    return "\n".join(out)


def large_summary(rows):
    if not rows:
        return ""
    out = ["| graph | nodes | budget | feasible | overhead | `auto` solve (CPU) |",
           "|---|---:|---:|---|---:|---:|"]
    for r in rows:
        if r["policy"] != "auto":
            continue
        out.append(f"| {r['graph']} | {r.get('nodes', '')} | "
                   f"{100 * r['fraction']:.0f}% | "
                   f"{'yes' if r['feasible'] else 'no'} | "
                   f"{100 * r['overhead']:.2f}% | {r['solve_ms']:.0f} ms |")
    return "\n".join(out)


def svg(rows, path):
    graphs = sorted({r["graph"] for r in rows})
    panel_w, panel_h, margin = 460, 300, 60
    width = margin + len(graphs) * (panel_w + margin) + 170
    height = panel_h + 2 * margin
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    for gi, g in enumerate(graphs):
        grows = [r for r in rows if r["graph"] == g]
        x0 = margin + gi * (panel_w + margin)
        y0 = margin
        ymax = max([r["overhead"] for r in grows if r["feasible"]
                    and r["overhead"] < 1.0] + [0.05])
        ymax = min(1.0, ymax * 1.1)
        fx = lambda f: x0 + (f - 0.25) / 0.7 * panel_w
        fy = lambda o: y0 + panel_h - max(0.0, min(o, ymax)) / ymax * panel_h
        parts.append(f'<rect x="{x0}" y="{y0}" width="{panel_w}" '
                     f'height="{panel_h}" fill="none" stroke="#444"/>')
        parts.append(f'<text x="{x0 + panel_w / 2}" y="{y0 - 10}" '
                     f'text-anchor="middle" font-size="14">{g}</text>')
        for k in range(0, 6):
            o = ymax * k / 5
            y = fy(o)
            parts.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + panel_w}" '
                         f'y2="{y}" stroke="#ddd"/>')
            parts.append(f'<text x="{x0 - 5}" y="{y + 4}" '
                         f'text-anchor="end">{100 * o:.0f}%</text>')
        for f in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
            parts.append(f'<text x="{fx(f)}" y="{y0 + panel_h + 16}" '
                         f'text-anchor="middle">{100 * f:.0f}%</text>')
        parts.append(f'<text x="{x0 + panel_w / 2}" y="{y0 + panel_h + 34}" '
                     f'text-anchor="middle">budget (% of the unplanned peak)'
                     f'</text>')
        if gi == 0:
            parts.append(f'<text x="{x0 - 45}" y="{y0 + panel_h / 2}" '
                         f'transform="rotate(-90 {x0 - 45} {y0 + panel_h / 2})" '
                         f'text-anchor="middle">step-time overhead</text>')
        for p in POLICIES:
            pts = sorted((r["fraction"], r["overhead"]) for r in grows
                         if r["policy"] == p and r["feasible"])
            if not pts:
                continue
            c = COLORS[p]
            if len(pts) > 1:
                d = " ".join(f"{fx(f):.1f},{fy(o):.1f}" for f, o in pts)
                parts.append(f'<polyline points="{d}" fill="none" stroke="{c}" '
                             f'stroke-width="{3 if p == "auto" else 1.5}"/>')
            for f, o in pts:
                parts.append(f'<circle cx="{fx(f):.1f}" cy="{fy(o):.1f}" r="3" '
                             f'fill="{c}"/>')
            # Over-budget plans: hollow markers.
            for r in grows:
                if r["policy"] == p and not r["feasible"] and \
                        p.startswith("knapsack"):
                    parts.append(f'<circle cx="{fx(r["fraction"]):.1f}" '
                                 f'cy="{fy(r["overhead"]):.1f}" r="4" '
                                 f'fill="none" stroke="{c}"/>')
    lx = margin + len(graphs) * (panel_w + margin) - 20
    for i, p in enumerate([p for p in POLICIES
                           if any(r["policy"] == p for r in rows)]):
        y = margin + 14 + 18 * i
        parts.append(f'<line x1="{lx}" y1="{y - 4}" x2="{lx + 20}" '
                     f'y2="{y - 4}" stroke="{COLORS[p]}" stroke-width="3"/>')
        parts.append(f'<text x="{lx + 26}" y="{y}">{p}</text>')
    y = margin + 14 + 18 * (len(POLICIES) + 1)
    parts.append(f'<text x="{lx}" y="{y}" font-size="10">only plans that '
                 f'fit are drawn;</text>')
    parts.append(f'<text x="{lx}" y="{y + 13}" font-size="10">hollow: '
                 f'knapsack over budget</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared")
    ap.add_argument("--random")
    ap.add_argument("--large")
    ap.add_argument("--out-md", required=True)
    ap.add_argument("--out-svg", required=True)
    ap.add_argument("--commands", default="bench/planner.sh")
    args = ap.parse_args()
    shared, rand, large = read(args.shared), read(args.random), read(args.large)
    svg(shared, args.out_svg)
    today = datetime.date.today().isoformat()
    md = [f"# Planner benchmark (bench/planner.sh)\n",
          f"Run {today} on {machine()}; the planner needs no GPU: every plan "
          f"is simulated on the built-in `h200` device profile "
          f"(`devices/h200.json`: 55.3 / 55.4 GB/s host copies, duplex "
          f"0.92) with the graphs' measured H200 op times. Overhead is the "
          f"simulated step time over the unplanned one, minus 1. Solve "
          f"times are CPU time of one planning call (the machine is shared "
          f"with other jobs, so wall time is not meaningful). Reproduce with "
          f"`{args.commands}`.\n",
          "## The shared graphs\n",
          shared_table(shared),
          f"\n![overhead vs budget]({os.path.basename(args.out_svg)})\n",
          "## Random layered graphs\n",
          random_summary(rand),
          "\n## Solve time on large graphs\n",
          large_summary(large), ""]
    with open(args.out_md, "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()

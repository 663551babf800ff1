#!/usr/bin/env python3
"""Benchmarks the whole pipeline (docs/Pipeline.md) and the arena packing.

1. Time: `lethe compile GRAPH --budget 50%` (load JSON, cost model, plan,
   materialize, schedule, assign buffers, verify, simulate, write the
   program, plan and trace) on synthetic transformer-like steps of 1,000 to
   20,000 nodes: best and median wall clock of N runs and the best CPU time
   (user + sys), which other load on the machine does not inflate; and the
   per-phase split from `lethe-opt --lethe-pipeline -mlir-timing`.
2. Arena: `lethe simulate --json` on the bundled graphs at budgets from 50%
   to 90% of the unplanned peak: device arena against max-live (its lower
   bound), the simulated peak and step time against the planner's
   prediction.

    bench/pipeline_time.py [--build build] [--runs 5]
"""
import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PHASES = ["Parser", "AnnotateCosts", "PlanActivations", "Materialize",
          "ScheduleProgram", "AssignBuffers", "VerifyProgram", "Output"]


def time_runs(cmd, runs):
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime -
                   before.ru_stime)
    return min(wall), statistics.median(wall), min(cpu)


def phase_times(lethe_opt, mlir, budget):
    """Wall seconds per pass of one `lethe-opt --lethe-pipeline` run."""
    out = subprocess.run(
        [lethe_opt, mlir, f"--lethe-pipeline=budget={budget}",
         "-mlir-timing", "-mlir-timing-display=list",
         "-mlir-print-op-on-diagnostic=false", "-o", os.devnull],
        check=True, capture_output=True, text=True).stderr
    times = {}
    for line in out.splitlines():
        m = re.match(r"\s*([0-9.]+)\s+\(\s*[0-9.]+%\)\s+(\S+)", line)
        if m and m.group(2) in PHASES:
            times[m.group(2)] = times.get(m.group(2), 0.0) + float(m.group(1))
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="1000,2500,5000,10000,20000")
    args = ap.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    lethe = os.path.join(bin_dir, "lethe")
    tmp = tempfile.mkdtemp()

    print(f"machine: {platform.node()} ({os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}\n")

    print("## Pipeline time: `lethe compile GRAPH --budget 50% -o DIR`\n")
    print("| graph | nodes | wall best s | wall median s | CPU best s |")
    print("|---|---:|---:|---:|---:|")
    synthetic = []
    for n in [int(s) for s in args.sizes.split(",")]:
        path = os.path.join(tmp, f"synthetic-{n}.json")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                        "--nodes", str(n), "-o", path], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        synthetic.append(path)
    graphs = [os.path.join(ROOT, "graphs", "graph_gpt2.json"),
              os.path.join(ROOT, "graphs", "graph_resnet50.json")] + synthetic
    for path in graphs:
        nodes = len(json.load(open(path))["nodes"])
        budget = "60%" if "gpt2" in path else "50%"
        out = os.path.join(tmp, "out")
        best, median, cpu = time_runs(
            [lethe, "compile", path, "--budget", budget, "-o", out],
            args.runs)
        print(f"| {os.path.basename(path)} ({budget}) | {nodes} | "
              f"{best:.3f} | {median:.3f} | {cpu:.3f} |")

    print("\n## Phases: `lethe-opt --lethe-pipeline='budget=50%' "
          "-mlir-timing` (wall s, one run)\n")
    print("| graph | " + " | ".join(PHASES) + " |")
    print("|---|" + "---:|" * len(PHASES))
    for path in synthetic:
        mlir = path.replace(".json", ".mlir")
        subprocess.run([os.path.join(bin_dir, "lethe-translate"),
                        "--import-graph-json", path, "-o", mlir], check=True)
        times = phase_times(os.path.join(bin_dir, "lethe-opt"), mlir, "50%")
        print(f"| {os.path.basename(path)} | " +
              " | ".join(f"{times.get(p, 0.0):.3f}" for p in PHASES) + " |")

    print("\n## Arena vs max-live on the bundled graphs (`lethe simulate "
          "--json`, policy auto)\n")
    print("| graph | budget | arena | max-live | arena / max-live | "
          "simulated peak | step ms | planner step ms | re-plans |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in graphs[:2]:
        for fraction in (50, 55, 60, 70, 80, 90):
            out = os.path.join(tmp, "sim.json")
            run = subprocess.run(
                [lethe, "simulate", path, "--budget", f"{fraction}%",
                 "--json", out], capture_output=True, text=True)
            name = os.path.basename(path)
            if run.returncode != 0:
                errors = [line for line in run.stderr.splitlines()
                          if "error: " in line] or ["failed"]
                reason = errors[0].split("error: ")[-1][:90]
                print(f"| {name} | {fraction}% | infeasible: {reason} "
                      "| | | | | | |")
                continue
            r = json.load(open(out))
            gib = 1 << 30
            print(f"| {name} | {fraction}% | {r['arena_bytes'] / gib:.3f} GiB"
                  f" | {r['max_live_bytes'] / gib:.3f} GiB | "
                  f"{100.0 * (r['arena_bytes'] / r['max_live_bytes'] - 1):+.3f}%"
                  f" | {r['peak_bytes'] / gib:.3f} GiB | "
                  f"{r['step_us'] / 1000:.3f} | "
                  f"{r.get('predicted_step_us', 0) / 1000:.3f} | "
                  f"{r['plan_attempts'] - 1} |")


if __name__ == "__main__":
    main()

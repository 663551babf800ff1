#!/usr/bin/env python3
"""Times `lethe report` (import + costs + lifetimes + report) on the bundled
graphs and on synthetic graphs of 2,000 and 10,000 nodes; prints a markdown
table: best and median wall clock of N runs, and the best CPU time (user +
sys), which other load on the machine does not inflate.

    bench/report_time.py [--build build] [--runs 7]
"""
import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def time_runs(cmd, runs):
    """Best wall time and best CPU (user + sys) time of `runs` runs. CPU
    time does not grow when other processes share the cores."""
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    lethe = os.path.join(args.build, "bin", "lethe")
    tmp = tempfile.mkdtemp()
    graphs = [os.path.join(ROOT, "graphs", "graph_gpt2.json"),
              os.path.join(ROOT, "graphs", "graph_resnet50.json")]
    for n in (2000, 10000):
        path = os.path.join(tmp, f"synthetic-{n}.json")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"),
                        "--nodes", str(n), "-o", path], check=True,
                       stdout=subprocess.DEVNULL)
        graphs.append(path)
    print(f"machine: {platform.node()} ({os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print("| graph | nodes | wall best s | wall median s | CPU best s |")
    print("|---|---:|---:|---:|---:|")
    for path in graphs:
        import json
        nodes = len(json.load(open(path))["nodes"])
        best, median, cpu = time_runs([lethe, "report", path], args.runs)
        print(f"| {os.path.basename(path)} | {nodes} | {best:.3f} | "
              f"{median:.3f} | {cpu:.3f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compares `lethe.report(graph)` (Python bindings over the C API) with the
C++ driver `lethe report GRAPH --json FILE` on the shared graphs.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_api_overhead.py

The driver's time is a whole process (start, load, analyse, write JSON);
the bindings' is the call in an already running interpreter plus parsing the
JSON into a dict. Medians of --repeat runs.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    opts = parser.parse_args()
    sys.path.insert(0, os.path.join(opts.build, "python"))
    import lethe

    driver = os.path.join(opts.build, "bin", "lethe")
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d')}")
    print("| graph | driver s | lethe.report s | overhead |")
    print("|---|---|---|---|")
    for name in ("graph_resnet50.json", "graph_gpt2.json"):
        path = os.path.join(ROOT, "graphs", name)
        cli, api = [], []
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            for _ in range(opts.repeat):
                start = time.perf_counter()
                subprocess.run([driver, "report", path, "--json", out],
                               check=True, stdout=subprocess.DEVNULL)
                cli.append(time.perf_counter() - start)
                start = time.perf_counter()
                lethe.report(path)
                api.append(time.perf_counter() - start)
        c, a = statistics.median(cli), statistics.median(api)
        print(f"| {name} | {c:.3f} | {a:.3f} | {100 * (a - c) / c:+.1f}% |")


if __name__ == "__main__":
    main()

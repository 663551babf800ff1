#!/usr/bin/env python3
"""Times lethe.torch.export_training_step (and, where the tools exist,
import + report + plan of the exported graph) for small transformer LMs.

    /usr/bin/python3 bench/python_export.py [--device cuda] [--layers 2]

Prints one table row per model: export wall time split into capture (AOT
tracing + partition) and replay, graph size, and the C++ tools' times.
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python-bindings"))
sys.path.insert(0, os.path.join(ROOT, "python-bindings", "tests"))

t0 = time.perf_counter()
import torch  # noqa: E402
import_s = time.perf_counter() - t0

import lethe.torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from models import TinyLM  # noqa: E402

CONFIGS = {  # name: (vocab, dim, heads, seq, batch)
    "tiny": (64, 32, 4, 16, 2),
    "small": (8192, 256, 4, 128, 8),
    "medium": (8192, 512, 8, 256, 8),
}


def run_tool(args):
    """Wall seconds of a tool run, and whether it succeeded (`lethe plan`
    exits 1 on a budget it cannot meet, after planning)."""
    start = time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True)
    return time.perf_counter() - start, result.returncode == 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--configs", default="tiny,small,medium")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    opts = parser.parse_args()
    tools = os.path.join(opts.build, "bin")
    print(f"# torch {torch.__version__} on {opts.device} "
          f"({platform.node()}, {os.cpu_count()} CPUs); import torch "
          f"{import_s:.2f} s")
    print("| model | layers | nodes | export s | capture s | replay s "
          "| JSON MB | import+report s | plan 50% s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in opts.configs.split(","):
        vocab, dim, heads, seq, batch = CONFIGS[name]
        torch.manual_seed(0)
        model = TinyLM(vocab, dim, heads, opts.layers, seq).to(opts.device)
        tokens = torch.randint(0, vocab, (batch, seq), device=opts.device)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"{name}.json")
            start = time.perf_counter()
            graph = lethe.torch.export_training_step(
                model, (tokens,), lambda logits, y: F.cross_entropy(
                    logits.reshape(-1, vocab), y.reshape(-1)), path,
                targets=(tokens.roll(-1, 1),))
            export_s = time.perf_counter() - start
            report_s = plan_s = None
            feasible = False
            if os.path.exists(os.path.join(tools, "lethe")):
                report_s, _ = run_tool([os.path.join(tools, "lethe"),
                                        "report", path])
                plan_s, feasible = run_tool([os.path.join(tools, "lethe"),
                                             "plan", path, "--budget", "50%"])
            size_mb = os.path.getsize(path) / 1e6
        cap = graph["capture"]
        fmt = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"| {name} (d={dim}, s={seq}, b={batch}) | {opts.layers} "
              f"| {len(graph['nodes'])} | {export_s:.2f} "
              f"| {cap['capture_s']:.2f} | {cap['replay_s']:.2f} "
              f"| {size_mb:.2f} | {fmt(report_s)} | {fmt(plan_s)}"
              f"{'' if feasible or plan_s is None else ' (infeasible)'} |")


if __name__ == "__main__":
    main()

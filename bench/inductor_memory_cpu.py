#!/usr/bin/env python3
"""Lethe's predicted peak against what inductor's CPU backend runs, no GPU
needed: the 4-layer Llama and DiT of python-bindings/tests/
test_inductor_memory.py compiled with Lethe as inductor's partitioner
(modelled costs, no calibration, no offload) at each budget; the step's
peak read from the CPU allocator through torch.profiler, as the memory
tests read it. Prints one table row per model and budget.

  PYTHONPATH=build/python VENV/bin/python bench/inductor_memory_cpu.py \\
      [--models llama4,dit4] [--budgets least,60%,70%,22000000]
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python-bindings", "tests"))
# A compile the caches answer never calls the partitioner: no plan to read.
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch  # noqa: E402

import test_inductor_memory as tm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="llama4,dit4")
    ap.add_argument("--budgets", default="least,60%,70%")
    args = ap.parse_args()
    import lethe.torch as lt
    makers = {"llama4": tm._llama, "dit4": tm._dit}
    print("| model | budget | measured MB | predicted MB | error | "
          "recomputed | predicted step us |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for budget in args.budgets.split(","):
            model, a, b = makers[name]()
            backend = lt.backend(budget=budget, costs="model",
                                 calibrate=False, device="h100")
            torch._dynamo.reset()
            run = torch.compile(model, backend=backend, dynamic=False)
            try:
                for _ in range(2):  # compiles, then a steady-state step
                    run(a, b).backward()
                    for p in model.parameters():
                        p.grad = None
            except Exception as e:  # an infeasible budget, said in a row
                print(f"| {name} | {budget} | {type(e).__name__} | | | | |")
                continue
            measured = tm._step_peak(run, model, a, b)
            plan = backend.plans[-1].plan
            recomputed = sum(1 for d in plan.decisions
                             if d.get("decision") == "recompute")
            print(f"| {name} | {budget} | {measured / 1e6:.2f} | "
                  f"{plan.peak_bytes / 1e6:.2f} | "
                  f"{100 * (measured / plan.peak_bytes - 1):+.1f}% | "
                  f"{recomputed} | {plan.step_us:.0f} |", flush=True)


if __name__ == "__main__":
    main()

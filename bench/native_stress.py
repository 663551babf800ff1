#!/usr/bin/env python3
"""Many calls into Lethe's native library (liblethe-c.so, through ctypes) in
one process, to catch heap corruption under a sanitizer: the torch backend
plans many graphs in one process, and one such run aborted in glibc
("malloc(): smallbin double linked list corrupted"; bench/results/
hardening.md). Meant to run against a library built with
-fsanitize=address, the runtime preloaded (python is not instrumented):

    LD_PRELOAD=$(clang-22 -print-file-name=libclang_rt.asan-x86_64.so) \\
    ASAN_OPTIONS=detect_leaks=0 PYTHONPATH=build-asan/python \\
    python3 bench/native_stress.py [--rounds 2] [--graphs 'graphs/graph_*.json']

Each round, for every graph: loads it from its file, as a dict (the torch
backend's route) and as its printed MLIR; reports; writes both traces;
plans under every policy at no limit, 90%, 50% and 1 byte (allowing
infeasible plans), and replays each plan's own JSON through `plan_file=`;
then feeds the library bad input: mutated graphs, a truncated file, bad
options, another graph's plan, a mutated plan. Two threads plan at once
(ctypes releases the GIL), and plans outlive their graphs' wrappers in
reference cycles that the collector frees in any order. Exits 0 when the
process survives; the sanitizer aborts it otherwise.
"""

import argparse
import gc
import glob
import json
import os
import random
import sys
import tempfile
import threading
import time

import lethe
from lethe import _native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["auto", "none", "full", "every-n", "selective-op", "offload-all"]
# A share close to the peak, one that needs recomputation or offload, and a
# budget no plan meets.
BUDGETS = [None, "90%", "50%", 1]


def expect_error(what, call):
    """Runs a call that must fail with Lethe's error (or Python's check)."""
    try:
        call()
    except (lethe.LetheError, ValueError, TypeError, FileNotFoundError):
        return
    # Some mutations leave a valid graph; that is fine, not a failure.
    print(f"  note: {what} was accepted", flush=True)


def mutate(value, rng, rate):
    """`value` with some leaves replaced by values of another type or out of
    range, and some keys dropped."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if rng.random() < rate / 4:
                continue
            out[key] = mutate(item, rng, rate)
        return out
    if isinstance(value, list):
        items = [mutate(item, rng, rate) for item in value]
        if items and rng.random() < rate:
            del items[rng.randrange(len(items))]
        return items
    if rng.random() >= rate:
        return value
    return rng.choice([-1, 0, 2**62, -2**62, 1e300, "", "x" * 300, None,
                       [], {}, True, 3.5])


def plan_and_replay(graph, tmp, policy, budget):
    p = lethe.plan(graph, budget=budget, policy=policy,
                   allow_infeasible=True)
    text = p.to_json()
    json.loads(text)
    path = os.path.join(tmp, "plan.json")
    with open(path, "w") as f:
        f.write(text)
    try:
        lethe.plan(graph, budget=budget, policy=policy, plan_file=path,
                   allow_infeasible=True).to_json()
    except lethe.LetheError:
        pass  # an infeasible plan's file may be refused
    return p


def good_calls(path, document, tmp, rng):
    graph = lethe.load(path)
    graph.report(5)
    graph.write_trace(os.path.join(tmp, "step.trace.json"))
    mlir = graph.mlir
    mlir_path = os.path.join(tmp, "step.mlir")
    with open(mlir_path, "w") as f:
        f.write(mlir)
    lethe.load(mlir_path).report(3)
    lethe.Graph(_native.Graph.loads(mlir, "mlir", "<mlir>", "h200"), "h200",
                "<mlir>").report(1)
    from_dict = lethe.load(document)
    plans = []
    for policy in POLICIES:
        for budget in BUDGETS:
            source = rng.choice([graph, from_dict, path])
            p = plan_and_replay(source, tmp, policy, budget)
            plans.append(p)
    plans[-1].trace(os.path.join(tmp, "plan.trace.json"))
    lethe.plan(graph, budget="50%", bound=True, allow_infeasible=True)
    lethe.plan(graph, budget="70%", solver="fast", allow_infeasible=True)
    return graph, plans


def bad_calls(path, document, other_plan, tmp, rng):
    graph = lethe.load(path)
    bad = [
        ("budget abc", lambda: lethe.plan(graph, budget="abc")),
        ("budget -5%", lambda: lethe.plan(graph, budget="-5%")),
        ("policy nope", lambda: lethe.plan(graph, policy="nope")),
        ("solver nope", lambda: lethe.plan(graph, solver="nope")),
        ("keep_ops unknown", lambda: lethe.plan(graph, policy="selective-op",
                                                keep_ops=["no.such_op"])),
        ("alignment 0", lambda: lethe.plan(graph, alignment=0)),
        ("alignment 3", lambda: lethe.plan(graph, alignment=3,
                                           allow_infeasible=True)),
        ("alignment -256", lambda: lethe.plan(graph, alignment=-256)),
        ("device nope", lambda: lethe.load(path, device="nope")),
        ("plan file missing", lambda: lethe.plan(
            graph, plan_file=os.path.join(tmp, "missing.json"))),
        ("host budget 1", lambda: lethe.plan(graph, budget="50%",
                                             policy="offload-all",
                                             host_budget=1)),
    ]
    # Another graph's plan, and this graph's plan mutated or truncated.
    other = os.path.join(tmp, "other-plan.json")
    with open(other, "w") as f:
        f.write(other_plan)
    bad.append(("another graph's plan",
                lambda: lethe.plan(graph, plan_file=other,
                                   allow_infeasible=True)))
    own = json.loads(lethe.plan(graph, budget="50%",
                                allow_infeasible=True).to_json())
    for k in range(4):
        mutated = os.path.join(tmp, f"mutated-plan{k}.json")
        with open(mutated, "w") as f:
            json.dump(mutate(own, rng, 0.05), f)
        bad.append((f"mutated plan {k}",
                    lambda m=mutated: lethe.plan(graph, plan_file=m,
                                                 allow_infeasible=True)))
    cut = os.path.join(tmp, "cut-plan.json")
    with open(cut, "w") as f:
        text = json.dumps(own)
        f.write(text[:rng.randrange(1, len(text))])
    bad.append(("truncated plan", lambda: lethe.plan(graph, plan_file=cut)))
    # Mutated and truncated graphs.
    for k in range(4):
        doc = mutate(document, rng, 0.002 * (k + 1))
        bad.append((f"mutated graph {k}",
                    lambda d=doc: lethe.plan(d, budget="50%",
                                             allow_infeasible=True)))
    text = json.dumps(document)
    truncated = os.path.join(tmp, "cut-graph.json")
    with open(truncated, "w") as f:
        f.write(text[:rng.randrange(1, len(text))])
    bad.append(("truncated graph", lambda: lethe.load(truncated)))
    bad.append(("mlir garbage", lambda: _native.Graph.loads(
        "module { func.func @f( }", "mlir", "<bad>", "h200")))
    bad.append(("empty json", lambda: lethe.load({})))
    for what, call in bad:
        expect_error(what, call)


def cycles(path):
    """Plans and graphs in reference cycles: the collector frees them in
    whatever order, a graph's handle possibly before its plan's."""
    for _ in range(3):
        graph = lethe.load(path)
        p = lethe.plan(graph, budget="50%", allow_infeasible=True)
        box = {"graph": graph, "plan": p}
        box["self"] = box
        graph.box = box
        p.box = box
        del graph, p, box
    gc.collect()


def threaded(paths, rounds):
    errors = []

    def work(seed):
        rng = random.Random(seed)
        try:
            for _ in range(rounds):
                path = rng.choice(paths)
                lethe.plan(path, budget=rng.choice(BUDGETS[1:]),
                           policy=rng.choice(POLICIES),
                           allow_infeasible=True).to_json()
        except Exception as e:  # reported, not raised, from a thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def count_calls(counts):
    """Counts the graph loads and plans that reach the library."""
    for name in ("load", "loads"):
        method = getattr(_native.Graph, name)

        def counted(*args, _method=method, _name=name):
            counts[_name] += 1
            return _method(*args)
        setattr(_native.Graph, name, staticmethod(counted))
    plan = _native.Graph.plan

    def counted_plan(self, options):
        counts["plan"] += 1
        return plan(self, options)
    _native.Graph.plan = counted_plan


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--graphs", nargs="+",
                        default=[os.path.join(ROOT, "graphs", "graph_*.json")])
    parser.add_argument("--skip", nargs="*", default=["graph_mamba.json"],
                        help="file names left out (mamba: 7 MB, slow)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    paths = sorted(p for pattern in args.graphs for p in glob.glob(pattern)
                   if os.path.basename(p) not in args.skip)
    if not paths:
        sys.exit("no graphs")
    print(f"library: {_native.library_path()}", flush=True)
    rng = random.Random(args.seed)
    counts = {"load": 0, "loads": 0, "plan": 0}
    count_calls(counts)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        previous_plan = None
        for r in range(args.rounds):
            for path in paths:
                t = time.time()
                with open(path) as f:
                    document = json.load(f)
                graph, plans = good_calls(path, document, tmp, rng)
                if previous_plan is not None:
                    bad_calls(path, document, previous_plan, tmp, rng)
                previous_plan = plans[len(plans) // 2].to_json()
                cycles(path)
                del graph, plans
                print(f"round {r} {os.path.basename(path)}: "
                      f"{time.time() - t:.1f} s", flush=True)
            threaded(paths, 6)
            gc.collect()
    print(f"OK: {args.rounds} rounds over {len(paths)} graphs, "
          f"{time.time() - start:.0f} s; calls that reached the library "
          f"(failed ones included): {counts}", flush=True)


if __name__ == "__main__":
    main()

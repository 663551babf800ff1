#!/usr/bin/env python3
"""Plans and compiles every graph of the corpus (graphs/graph_*.json) at the
least budget Lethe reports and at 40/50/70/90% of the unplanned peak, and
checks the properties issue 16 asks of any model and any budget:

- `lethe compile` succeeds at every budget from the reported least up, and
  the plan's peak is within the budget;
- `lethe plan` and `lethe compile` agree on feasibility;
- `auto` is never slower than `full` or `every-n` where they fit;
- `full` peaks no higher than `every-n` (per-layer policies find layers);
- `full` peaks within 5% of the torch.utils.checkpoint-style plan: a plan
  given to `lethe plan --plan` that, with layers found here from the
  scopes (independently of Lethe's Layers.cpp), recomputes every activation
  produced inside a block except those a later block reads, and keeps each
  block's input (what checkpoint(block) does). Activations Lethe says may
  not be recomputed (RNG, in-place) are kept in both. Graphs whose scopes
  number no blocks get no reference.

    python3 bench/corpus_bench.py [--build build] [--graphs 'graphs/graph_*.json' ...]
        [--budgets least,40%,50%,70%,90%] [--md FILE] [--require all|compile]

Prints one table (one row per graph) and exits 1 if a property fails.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lethe(build, *args):
    start = time.perf_counter()
    r = subprocess.run([os.path.join(build, "bin", "lethe"), *args],
                       capture_output=True, text=True)
    return r, time.perf_counter() - start


def plan(build, graph, budget, policy="auto"):
    """The plan's JSON figures, or the error text."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        r, _ = lethe(build, "plan", graph, "--budget", budget, "--policy",
                     policy, "--json", out)
        if os.path.exists(out):
            with open(out) as f:
                return json.load(f), r.stderr
        return None, r.stderr.strip()[:300]


def least_budget(build, graph):
    r, _ = lethe(build, "plan", graph, "--budget", "1")
    m = re.search(r"least budget .*?\((\d+) B\)", r.stderr + r.stdout)
    return int(m.group(1)) if m else None


def compile_ok(build, graph, budget):
    with tempfile.TemporaryDirectory() as tmp:
        r, seconds = lethe(build, "compile", graph, "--budget", budget,
                           "-o", tmp)
        return r.returncode == 0, seconds, r.stderr.strip()[-200:]


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def block_of_scopes(nodes):
    """Forward node id -> block key, from the scopes: the first scope
    component that numbers a module (`layers.3`, `encoder_layer_3`) among
    at least two siblings, with everything before it."""
    stems = {}
    for n in nodes:
        comps = (n.get("scope") or "").split(".")
        for i, c in enumerate(comps):
            m = _NUMBERED.match(c)
            if m:
                key = (".".join(comps[:i]), m.group(1))
                stems.setdefault(key, set()).add(m.group(2))
    block = {}
    for n in nodes:
        if n.get("phase") != "fwd" or n.get("kind") != "op":
            continue
        comps = (n.get("scope") or "").split(".")
        for i, c in enumerate(comps):
            m = _NUMBERED.match(c)
            if m and len(stems[(".".join(comps[:i]), m.group(1))]) >= 2:
                block[n["id"]] = ".".join(comps[:i + 1])
                break
    return block


def checkpoint_reference(build, graph, full_doc):
    """The peak and step of the torch.utils.checkpoint-style plan, or None."""
    with open(graph) as f:
        nodes = json.load(f)["nodes"]
    block = block_of_scopes(nodes)
    if len(set(block.values())) < 2 or not full_doc:
        return None
    readers = {}
    for n in nodes:
        if n.get("phase") != "fwd":
            continue
        for src, out in n.get("inputs", []):
            readers.setdefault((src, out), []).append(n["id"])
    # Views alias their input: a block reading a view of a value reads it.
    alias_of = {}
    for n in nodes:
        for k, o in enumerate(n.get("outputs") or []):
            if o.get("alias") is not None and o["alias"] < len(n["inputs"]):
                alias_of[(n["id"], k)] = tuple(n["inputs"][o["alias"]])
    def all_readers(key, depth=0):
        result = list(readers.get(key, []))
        if depth < 8:
            for a, base in alias_of.items():
                if base == key:
                    result += all_readers(a, depth + 1)
        return result
    decisions = []
    for v in full_doc["values"]:
        if "node_id" not in v:
            continue
        node, out = v["node_id"], v.get("output", 0)
        b = block.get(node)
        if b is None or "cannot be recomputed" in v.get("reason", ""):
            continue
        if any(block.get(r) != b for r in all_readers((node, out))):
            continue  # read by a later block (or outside): its input, kept
        decisions.append({"node_id": node, "output": out,
                          "decision": "recompute"})
    # A value whose chain needs an RNG op (stochastic depth) is kept, as
    # torch would have to replay it: Lethe names it (by its offset in the
    # file) and the plan is tried again without it.
    with tempfile.TemporaryDirectory() as tmp:
        given = os.path.join(tmp, "given.json")
        out = os.path.join(tmp, "plan.json")
        for _ in range(200):
            text, starts = '{"decisions": [', []
            for k, d in enumerate(decisions):
                text += ", " if k else ""
                starts.append(len(text))
                text += json.dumps(d)
            text += "]}"
            with open(given, "w") as f:
                f.write(text)
            r, _ = lethe(build, "plan", graph, "--budget", "100%", "--plan",
                         given, "--json", out)
            if os.path.exists(out):
                with open(out) as f:
                    return json.load(f)
            m = re.search(r"given\.json:1:(\d+): error: .*cannot be "
                          r"recomputed", r.stderr)
            if not m:
                return None
            col = int(m.group(1)) - 1
            k = max(i for i, st in enumerate(starts) if st <= col)
            del decisions[k]
    return None


def run_graph(build, graph, budgets):
    name = os.path.basename(graph)[len("graph_"):-len(".json")]
    row = {"graph": name, "problems": []}
    least = least_budget(build, graph)
    row["least"] = least
    row["working_set"] = largest_working_set(graph)[0]
    full, _ = plan(build, graph, "100%", "full")
    every, _ = plan(build, graph, "100%", "every-n")
    for policy, doc in (("full", full), ("every_n", every)):
        row[policy] = doc
    if full and every and full["peak_bytes"] > every["peak_bytes"]:
        row["problems"].append(
            f"full peaks above every-n ({full['peak_bytes']} > "
            f"{every['peak_bytes']} B)")
    ref = checkpoint_reference(build, graph, full)
    row["reference"] = ref
    if ref and full and full["peak_bytes"] > 1.05 * ref["peak_bytes"]:
        row["problems"].append(
            f"full peaks over 105% of the checkpoint-style plan "
            f"({full['peak_bytes']} > 1.05 x {ref['peak_bytes']} B)")
    row["budgets"] = {}
    for b in budgets:
        text = str(least) if b == "least" else b
        if text is None or text == "None":
            row["problems"].append("no least budget reported")
            continue
        doc, err = plan(build, graph, text)
        ok, compile_s, cerr = compile_ok(build, graph, text)
        cell = {"plan": doc, "compile_ok": ok, "compile_s": compile_s}
        row["budgets"][b] = cell
        if doc is None:
            row["problems"].append(f"{b}: plan failed: {err}")
            continue
        feasible = doc["feasible"]
        if feasible and doc["peak_bytes"] > doc["budget_bytes"]:
            row["problems"].append(f"{b}: feasible plan over budget")
        if b == "least" and not feasible:
            row["problems"].append("least: plan infeasible at the least")
        if feasible != ok:
            row["problems"].append(
                f"{b}: plan says {'feasible' if feasible else 'infeasible'}"
                f", compile {'succeeds' if ok else 'fails'}: {cerr}")
        if feasible:
            for policy, fixed in (("full", full), ("every-n", every)):
                if fixed and fixed["peak_bytes"] <= doc["budget_bytes"] \
                        and doc["step_us"] > fixed["step_us"] * (1 + 1e-9):
                    row["problems"].append(
                        f"{b}: auto slower than {policy} that fits")
    return row


def largest_working_set(graph):
    """The op that needs the most step-allocated bytes at once: the distinct
    storages it reads and writes (views and in-place results share their
    input's; graph inputs are resident, outside the budget). No plan can
    peak below it (bytes unaligned: a lower bound on Lethe's aligned
    figure). Returns (bytes, op name)."""
    with open(graph) as f:
        nodes = json.load(f)["nodes"]
    by_id = {n["id"]: n for n in nodes}
    root = {}  # (node, output) -> (storage key, bytes); None for inputs

    def storage(ref):
        ref = tuple(ref)
        if ref not in root:
            node = by_id[ref[0]]
            if node.get("kind") != "op":
                root[ref] = None
            else:
                out = node["outputs"][ref[1]]
                alias = out.get("alias")
                root[ref] = (storage(node["inputs"][alias])
                             if alias is not None else (ref, out["bytes"]))
        return root[ref]

    best = (0, None)
    for n in nodes:
        if n.get("kind") != "op":
            continue
        held = {}
        for ref in n["inputs"]:
            s = storage(ref)
            if s:
                held[s[0]] = s[1]
        for k in range(len(n["outputs"])):
            s = storage((n["id"], k))
            if s:
                held[s[0]] = s[1]
        total = sum(held.values())
        if total > best[0]:
            best = (total, n["name"])
    return best


def step_floor(graph):
    """A floor under any retain/recompute/offload plan of the graph in its
    op order: at each op, its working set (largest_working_set) plus what
    no decision on the activations frees there: the step's outputs already
    produced (parameter gradients, to the end of the step) and every other
    value the backward produced that a later op still reads (gradients in
    flight: U-Net's skip connections' gradients wait for the encoder's
    backward, 0.77 GB of its floor against a 0.67 GB working set). Returns
    (bytes, op name)."""
    with open(graph) as f:
        nodes = json.load(f)["nodes"]
    by_id = {n["id"]: n for n in nodes}

    def root(ref):
        while True:
            node = by_id[ref[0]]
            if node.get("kind") != "op":
                return None
            alias = node["outputs"][ref[1]].get("alias")
            if alias is None:
                return (ref[0], ref[1])
            ref = tuple(node["inputs"][alias])

    def size(key):
        return by_id[key[0]]["outputs"][key[1]]["bytes"]

    position = {n["id"]: i for i, n in enumerate(nodes)}
    last_read = {}
    for n in nodes:
        for r in n["inputs"]:
            key = root(tuple(r))
            if key is not None:
                last_read[key] = max(last_read.get(key, -1), position[n["id"]])
    outputs = {root(tuple(r)) for n in nodes if n.get("kind") == "output"
               for r in n["inputs"]} - {None}
    kept = set()  # step outputs produced, backward values still to be read
    best = (0, None)
    for n in nodes:
        if n.get("kind") != "op":
            continue
        at = position[n["id"]]
        mine = {(n["id"], k) for k in range(len(n["outputs"]))}
        kept |= {k for k in mine if root(k) == k
                 and (k in outputs or n.get("phase") == "bwd")}
        held = {root(tuple(r)) for r in n["inputs"]} | {root(k) for k in mine}
        held.discard(None)
        total = sum(size(k) for k in held | kept)
        if total > best[0]:
            best = (total, n["name"])
        kept = {k for k in kept if k in outputs or last_read.get(k, -1) > at}
    return best


def fmt_bytes(b):
    return f"{b / 2**30:.2f}" if b is not None else "-"


def table(rows, budgets):
    head = ("| graph | unplanned GiB | least GiB (% of unplanned) | "
            "least / largest op working set | "
            "full / every-n / checkpoint-style peak % | "
            + " | ".join(f"{b}: overhead, solve ms" for b in budgets)
            + " | compile ok | problems |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        any_plan = next((c["plan"] for c in r["budgets"].values()
                         if c["plan"]), None)
        base = any_plan["baseline_peak_bytes"] if any_plan else None
        least = (f"{fmt_bytes(r['least'])} ({100 * r['least'] / base:.0f}%)"
                 if r["least"] and base else "-")
        fe = "-"
        if r["full"] and r["every_n"] and base:
            ref = r.get("reference")
            fe = (f"{100 * r['full']['peak_bytes'] / base:.0f} / "
                  f"{100 * r['every_n']['peak_bytes'] / base:.0f} / "
                  + (f"{100 * ref['peak_bytes'] / base:.0f}" if ref
                     else "-"))
        cells = []
        for b in budgets:
            c = r["budgets"].get(b)
            if not c or not c["plan"]:
                cells.append("-")
            elif not c["plan"]["feasible"]:
                cells.append("infeasible")
            else:
                cells.append(f"+{100 * c['plan']['overhead']:.1f}%, "
                             f"{c['plan']['solve_ms']:.0f}")
        compiled = sum(c["compile_ok"] for c in r["budgets"].values())
        ws = r.get("working_set")
        ratio = (f"{r['least'] / ws:.3f}" if r["least"] and ws else "-")
        lines.append(f"| {r['graph']} | {fmt_bytes(base)} | {least} | "
                     f"{ratio} | {fe} | "
                     + " | ".join(cells)
                     + f" | {compiled}/{len(r['budgets'])} | "
                     + ("; ".join(r["problems"]) or "none") + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--graphs", nargs="+",
                   default=[os.path.join(ROOT, "graphs", "graph_*.json")],
                   help="graph files or glob patterns")
    p.add_argument("--budgets", default="least,40%,50%,70%,90%")
    p.add_argument("--md", default=None, help="also write the table here")
    p.add_argument("--require", default="all", choices=["all", "compile"],
                   help="which failed properties make the exit status 1: "
                   "all, or only plan/compile agreement and peaks within "
                   "budget (compile)")
    p.add_argument("--least-vs-working-set", action="store_true",
                   help="only compare each graph's least budget with its "
                   "largest single-op working set (issue 16's target)")
    p.add_argument("--floor", action="store_true",
                   help="only print each graph's step floor (step_floor): "
                   "the least peak any plan of its ops in their order "
                   "can have")
    args = p.parse_args()
    budgets = args.budgets.split(",")
    graphs = sorted({g for pattern in args.graphs for g in glob.glob(pattern)})
    if not graphs:
        p.error(f"no graph matches {args.graphs}")
    if args.floor:
        print("| graph | floor GB | at op |\n|---|---:|---|")
        for g in graphs:
            floor, op = step_floor(g)
            print(f"| {g} | {floor / 1e9:.3f} | {op} |")
        return 0
    if args.least_vs_working_set:
        lines = ["| graph | least GiB | largest op working set GiB (op) "
                 "| least / working set |", "|---|---:|---|---:|"]
        for g in graphs:
            least = least_budget(args.build, g)
            ws, op = largest_working_set(g)
            lines.append(
                f"| {os.path.basename(g)[len('graph_'):-len('.json')]} | "
                f"{fmt_bytes(least)} | {fmt_bytes(ws)} ({op}) | "
                + (f"{least / ws:.2f}" if least and ws else "-") + " |")
        print("\n".join(lines))
        return 0
    start = time.perf_counter()
    rows = [run_graph(args.build, g, budgets) for g in graphs]
    text = table(rows, budgets)
    print(text)
    print(f"\n{len(rows)} graphs, {time.perf_counter() - start:.0f} s")
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    def counts(problem):
        return args.require == "all" or not (
            "full peaks above" in problem or "full peaks over" in problem
            or "auto slower" in problem)
    return 1 if any(counts(p) for r in rows for p in r["problems"]) else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where the compiled step's memory goes, against Lethe's model of it.

Runs one model of bench/torch_inductor_bench.py with Lethe as inductor's
partitioner at one budget (no calibration), records the CUDA caching
allocator's history over one step after warm-up
(torch.cuda.memory._record_memory_history), and writes a compact JSON:
the step's measured peak (bytes beyond what was allocated before it, as
max_memory_allocated counts them), the blocks live at that peak with the FX
nodes that inductor's generated code names above each allocation ("Source
Nodes" comments) and whether the forward or backward graph allocated them,
and Lethe's prediction (peak, the fused graph and plan it dumped).

  python3 bench/inductor_memory.py --model llama-8l --budget 2827587840 \
      --out DIR          # on the GPU machine; DIR/memory.json, DIR/dump/,
                         # all of it in DIR.tar.gz

Lethe's side is read here afterwards: `lethe report` / `lethe simulate
--plan` on DIR/dump/*.
"""

import argparse
import collections
import json
import linecache
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import torch_inductor_bench as ib  # noqa: E402

_SOURCE = re.compile(r"Source Nodes: \[([^\]]*)\]")


def _origin(frames):
    """(graph file, line, FX nodes) of an allocation from inductor's
    generated code, else (None, innermost Python frame, [])."""
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or "\0"
    for f in frames:
        name = f.get("filename", "")
        if ("torchinductor" in name or name.startswith(cache)) \
                and name.endswith(".py"):
            line = f.get("line", 0)
            nodes = []
            for back in range(0, 12):
                text = linecache.getline(name, line - back)
                m = _SOURCE.search(text)
                if m:
                    nodes = [x.strip() for x in m.group(1).split(",")]
                    break
            return name, line, nodes
    for f in frames:
        if f.get("filename", "").endswith(".py"):
            return None, f"{os.path.basename(f['filename'])}:" \
                f"{f.get('line')} {f.get('name')}", []
    return None, "?", []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=ib.model_names())
    ap.add_argument("--budget", required=True,
                    help="Lethe's budget (bytes, N%%)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--offload", choices=["auto", "off"], default="off",
                    help="Lethe may offload (auto: on CUDA) or not")
    args = ap.parse_args()
    import lethe.torch as lt
    os.makedirs(args.out, exist_ok=True)
    device = torch.device("cuda")
    model, a, b = ib.make_model(args.model, args.tiny, device,
                                torch.bfloat16)
    params = list(model.parameters())
    backend = lt.backend(budget=args.budget, calibrate=False,
                         offload={"auto": "auto", "off": False}[args.offload],
                         dump_dir=os.path.join(args.out, "dump"))
    run = backend(model)

    def step():
        run(a, b).backward()

    for _ in range(3):
        step()
        for p in params:
            p.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000,
                                             stacks="python")
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)

    trace = snap["device_traces"][device.index or 0]
    live, now, best, best_at = {}, 0, 0, -1
    timeline = []
    for i, e in enumerate(trace):
        act = e["action"]
        if act == "alloc":
            live[e["addr"]] = e
            now += e["size"]
        elif act == "free_requested" and e["addr"] in live:
            now -= live.pop(e["addr"])["size"]
        else:
            continue
        timeline.append(now)
        if now > best:
            best, best_at = now, i
    # Replay to the peak for its live set.
    live = {}
    for e in trace[:best_at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_requested":
            live.pop(e["addr"], None)
    files = {}
    blocks = []
    for e in live.values():
        fname, where, nodes = _origin(e.get("frames", []))
        if fname is not None:
            files.setdefault(fname, f"graph{len(files)}")
            where = f"{files[fname]}:{where}"
        blocks.append({"bytes": e["size"], "where": where, "nodes": nodes})
    blocks.sort(key=lambda b: -b["bytes"])
    by_where = collections.Counter()
    for b in blocks:
        by_where[b["where"].split(":")[0]] += b["bytes"]
    records = backend.plans
    doc = dict(
        model=args.model, budget=args.budget,
        device=torch.cuda.get_device_name(), torch=torch.__version__,
        measured_peak_bytes=peak, trace_peak_bytes=best,
        trace_events=len(trace), live_at_peak=len(blocks),
        live_bytes_by_origin=dict(by_where), graphs=files,
        blocks=blocks[:400],
        timeline=timeline[::max(1, len(timeline) // 2000)],
        predicted_peak_bytes=[r.plan.peak_bytes for r in records],
        predicted_step_us=[r.plan.step_us for r in records],
        budget_bytes=[r.plan.budget_bytes for r in records],
        workspace_nodes=[r.measured.get("workspace_nodes") for r in records])
    with open(os.path.join(args.out, "memory.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for fname, tag in files.items():  # the generated code, to read here
        with open(fname) as src, \
                open(os.path.join(args.out, f"{tag}.py"), "w") as dst:
            dst.write(src.read())
    # One archive: the device tool brings back a few files per call.
    import tarfile
    with tarfile.open(args.out.rstrip("/") + ".tar.gz", "w:gz") as tar:
        tar.add(args.out, arcname=os.path.basename(args.out.rstrip("/")))
    print(f"{args.model} budget {args.budget}: measured peak {peak / 1e9:.3f}"
          f" GB (trace {best / 1e9:.3f}), predicted "
          f"{[round(x / 1e9, 3) for x in doc['predicted_peak_bytes']]} GB "
          f"(library workspaces in {doc['workspace_nodes']} ops); "
          f"live at peak by origin (GB): "
          + ", ".join(f"{k} {v / 1e9:.3f}" for k, v in by_where.items()))


if __name__ == "__main__":
    main()

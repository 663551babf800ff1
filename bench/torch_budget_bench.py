#!/usr/bin/env python3
"""Lethe's torch backend against PyTorch's own activation-memory options.

Two models (GPT-2-medium-like: 24 layers, width 1024, 16 heads, batch 8,
seq 1024; Llama-style: 8 layers, hidden 2048, GQA 16/4 heads, SwiGLU, seq
2048, batch 4; bf16), one training step (forward, loss, backward; no
optimizer), measured per method: peak device memory the step allocates
beyond what is resident before it (parameters, data; gradients are
allocated by the step) and the median step time. Methods: no
checkpointing, full checkpointing of every block, every 2nd block,
selective op checkpointing (matmuls and attention saved), `save_on_cpu`,
torch.compile (inductor) with `activation_memory_budget` 0.5 and 0.1, and
Lethe's backend at each budget, with Lethe's predicted peak and step time.

Lethe's compiler need not be on the GPU machine: `prepare` traces the step
here with torch 2.x on CPU at the bench sizes (fake tensors: nothing is
computed), plans it with Lethe at every budget and writes the plans keyed
by op kind and occurrence (stable across CPU and CUDA traces: only the
attention kernel differs, and its first two results are the same); `run`
on the GPU hands each plan to `lethe.torch.backend(planner=...)`.

    python3 bench/torch_budget_bench.py prepare --out plans/ [--tiny]
    python3 bench/torch_budget_bench.py run --plans plans/ --out r.json \
        [--deadline-s 200] [--tiny]
    python3 bench/torch_budget_bench.py report r.json --md M.md --svg P.svg
    python3 bench/torch_budget_bench.py selftest   # --tiny, all on CPU
    python3 bench/torch_budget_bench.py export --model llama-8l \
        --out graphs/graph_llama8l.json [--device cuda] [--tiny]
"""

import argparse
import contextlib
import datetime
import functools
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python-bindings"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import lethe.torch as lt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The report's functions, also this module's (tests and callers use them).
from torch_budget_report import (_gb, check_targets,  # noqa: E402,F401
                                 load_results, report, report_text,
                                 svg_plot)

CONFIGS = {
    # name: vocab, dim, layers, heads, kv_heads, mlp, seq, batch, kind
    "gpt2-medium": dict(vocab=50304, dim=1024, layers=24, heads=16,
                        kv_heads=16, mlp=4096, seq=1024, batch=8, kind="gpt"),
    "llama-8l": dict(vocab=32000, dim=2048, layers=8, heads=16, kv_heads=4,
                     mlp=5632, seq=2048, batch=4, kind="llama"),
}
TINY = {
    "gpt2-medium": dict(vocab=128, dim=64, layers=4, heads=4, kv_heads=4,
                        mlp=256, seq=32, batch=2, kind="gpt"),
    "llama-8l": dict(vocab=128, dim=64, layers=2, heads=4, kv_heads=2,
                     mlp=160, seq=32, batch=2, kind="llama"),
}
# Lethe's budgets, as fractions of its unplanned peak: a grid dense where
# PyTorch's options land (full checkpointing and torch.compile's budgets
# sit at 30-60% of the unplanned peak). An infeasible budget is replaced
# by the least one Lethe can meet ("least"), planned once per model.
BUDGETS = ["80%", "65%", "55%", "48%", "42%"]
# At the tiny sizes also a plan that offloads every activation, so that a
# smoke run drives the CUDA offload path (streams, events, pinned buffers).
TINY_EXTRA = {"offload-all": dict(policy="offload-all", min_offload_bytes=0)}
BASELINES = ["none", "full", "every2", "selective", "save_on_cpu",
             "compile", "compile-0.5", "compile-0.1"]


# --- models ----------------------------------------------------------------

class Attention(nn.Module):
    def __init__(self, c, rope):
        super().__init__()
        self.heads, self.kv_heads = c["heads"], c["kv_heads"]
        self.head_dim = c["dim"] // c["heads"]
        kv = self.kv_heads * self.head_dim
        bias = c["kind"] == "gpt"
        self.q = nn.Linear(c["dim"], c["dim"], bias=bias)
        self.kv = nn.Linear(c["dim"], 2 * kv, bias=bias)
        self.o = nn.Linear(c["dim"], c["dim"], bias=bias)
        self.rope = rope

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k, v = (t.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
                for t in self.kv(x).chunk(2, dim=-1))
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        if self.kv_heads != self.heads:  # GQA: repeat K/V as Llama does
            rep = self.heads // self.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, -1))


class Rope(nn.Module):
    def __init__(self, head_dim, seq):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float()
                               / head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        s = x.shape[-2]
        return (x * self.cos[:s].to(x.dtype)
                + rotated * self.sin[:s].to(x.dtype))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) \
            * self.weight


class Block(nn.Module):
    def __init__(self, c, rope):
        super().__init__()
        llama = c["kind"] == "llama"
        norm = (lambda: RMSNorm(c["dim"])) if llama else \
            (lambda: nn.LayerNorm(c["dim"]))
        self.norm1, self.norm2 = norm(), norm()
        self.attn = Attention(c, rope)
        self.llama = llama
        if llama:
            self.gate_up = nn.Linear(c["dim"], 2 * c["mlp"], bias=False)
            self.down = nn.Linear(c["mlp"], c["dim"], bias=False)
        else:
            self.fc = nn.Linear(c["dim"], c["mlp"])
            self.proj = nn.Linear(c["mlp"], c["dim"])

    def mlp(self, x):
        if self.llama:
            gate, up = self.gate_up(x).chunk(2, dim=-1)
            return self.down(F.silu(gate) * up)
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class LM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        rope = (Rope(c["dim"] // c["heads"], c["seq"])
                if c["kind"] == "llama" else None)
        self.embed = nn.Embedding(c["vocab"], c["dim"])
        self.pos = (nn.Embedding(c["seq"], c["dim"])
                    if c["kind"] == "gpt" else None)
        self.blocks = nn.ModuleList(Block(c, rope) for _ in range(c["layers"]))
        self.norm = (RMSNorm(c["dim"]) if c["kind"] == "llama"
                     else nn.LayerNorm(c["dim"]))
        self.head = nn.Linear(c["dim"], c["vocab"], bias=False)
        self.checkpointed = set()   # block indices run under checkpoint
        self.context_fn = None      # selective checkpointing policy

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos.weight[: tokens.shape[1]]
        for i, block in enumerate(self.blocks):
            if i in self.checkpointed:
                kwargs = {"context_fn": self.context_fn} \
                    if self.context_fn else {}
                x = checkpoint(block, x, use_reentrant=False, **kwargs)
            else:
                x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(),
                               targets.flatten())


def make_model(name, tiny, device, dtype):
    c = (TINY if tiny else CONFIGS)[name]
    torch.manual_seed(0)
    # Initialised on the device itself: a GPT-2-medium initialised on the
    # host takes seconds, and every method builds its model afresh.
    with torch.device(device):
        model = LM(c).to(dtype=dtype)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, c["vocab"], (c["batch"], c["seq"]),
                           generator=g).to(device)
    targets = torch.randint(0, c["vocab"], (c["batch"], c["seq"]),
                            generator=g).to(device)
    return model, tokens, targets


# --- plans that travel: keyed by op kind and occurrence ----------------------

def _norm_op(op):
    """Op names equal across CPU and CUDA traces (attention kernels)."""
    if "scaled_dot_product" in op:
        return "sdpa_backward" if "backward" in op else "sdpa"
    return op


def node_keys(graph):
    """JSON op node id -> "phase|scope|op#k": the k-th op of that kind in
    that module scope and phase. A trace that differs in one module (the
    attention kernel) shifts no key outside it."""
    counts, keys = {}, {}
    for e in graph["nodes"]:
        if e["kind"] != "op":
            continue
        base = f"{e['phase']}|{e.get('scope') or ''}|{_norm_op(e['op'])}"
        keys[e["id"]] = f"{base}#{counts.get(base, 0)}"
        counts[base] = counts.get(base, 0) + 1
    return keys


def _result_bytes(graph, nid, index):
    outputs = graph["nodes"][nid]["outputs"]
    return outputs[index]["bytes"] if index < len(outputs) else None


def to_portable(raw, graph):
    """A plan document with node references as keys instead of names."""
    from lethe._planclient import parse_plan
    keys = node_keys(graph)
    parsed = parse_plan(raw, graph)
    decisions = []
    for (nid, index), d in sorted(parsed.owners.items()):
        decisions.append({
            "key": keys.get(nid), "result": index, "decision": d.kind,
            "bytes": _result_bytes(graph, nid, index),
            "release_after": keys.get(d.release_after),
            "prefetch_after": keys.get(d.prefetch_after)})
    figures = {k: v for k, v in raw.items() if k != "decisions"
               and not isinstance(v, (list, dict))}
    return dict(figures, decisions=decisions)


def keyed_planner(portable, record=None):
    """A `planner=` for lethe.torch.backend that maps a portable plan onto
    the graph it is given."""
    def planner(graph, **_):
        ids = {v: k for k, v in node_keys(graph).items()}
        names = {v: graph["nodes"][k]["name"] for v, k in ids.items()}
        decisions, missing = [], 0
        for d in portable["decisions"]:
            nid = ids.get(d["key"])
            if nid is None or _result_bytes(graph, nid, d["result"]) \
                    != d.get("bytes"):
                missing += 1  # not in this trace: retained
                continue
            name = names[d["key"]]
            decisions.append({
                "name": name, "result": d["result"],
                "decision": d["decision"],
                "release_after": names.get(d["release_after"]),
                "prefetch_after": names.get(d["prefetch_after"])})
        if record is not None:
            record["unmapped_decisions"] = missing
        return dict(portable, decisions=decisions)
    return planner


class _StopAfterPlanning(Exception):
    pass


def prepare(args):
    """Traces each model on CPU at the bench sizes and plans every budget."""
    os.makedirs(args.out, exist_ok=True)
    from lethe._planclient import plan_json
    for name in args.models:
        config = (TINY if args.tiny else CONFIGS)[name]
        out = {"model": name, "config": config, "torch": torch.__version__,
               "budgets": {}}
        graph_path = os.path.join(args.out, f"graph-{name}.json")

        def planner(graph, **_):
            with open(graph_path, "w") as f:
                json.dump(graph, f)
            todo = [(b, b, args.policy, {}) for b in args.budgets]
            if args.tiny:
                todo += [(label, None, o["policy"], {
                    k: v for k, v in o.items() if k != "policy"})
                    for label, o in TINY_EXTRA.items()]
            least = None
            while todo:
                label, budget, policy, options = todo.pop(0)
                start = time.perf_counter()
                try:
                    raw = plan_json(graph, budget, policy, args.device,
                                    **options)
                    entry = to_portable(raw, graph)
                except lt.InfeasibleBudgetError as e:
                    entry = {"feasible": False, "error": str(e)}
                entry["plan_s"] = time.perf_counter() - start
                entry["budget"] = label
                if entry.get("feasible") is False and least is None \
                        and entry.get("least_feasible_budget_bytes"):
                    least = entry["least_feasible_budget_bytes"]
                    todo.append(("least", least, policy, options))
                out["budgets"][label] = entry
                print(f"{name} {label}: feasible={entry.get('feasible')} "
                      f"peak={entry.get('peak_bytes')} "
                      f"step_us={entry.get('step_us')}", flush=True)
            out["graph_nodes"] = len(graph["nodes"])
            raise _StopAfterPlanning()

        if os.path.exists(graph_path):  # traced before: plan again only
            with open(graph_path) as f:
                graph = json.load(f)
            try:
                planner(graph)
            except _StopAfterPlanning:
                pass
            _write_plans(args.out, name, out)
            continue
        model, tokens, targets = make_model(name, args.tiny, "cpu",
                                            torch.bfloat16)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=lt.backend(planner=planner),
                                 dynamic=False, fullgraph=True)
        start = time.perf_counter()
        try:
            compiled(tokens, targets)
        except Exception as e:  # dynamo wraps what the backend raises
            if not _caused_by(e, _StopAfterPlanning):
                raise
        out["trace_and_plan_s"] = time.perf_counter() - start
        _write_plans(args.out, name, out)


def export(args):
    """Writes one model's training step as Lethe's graph JSON with the
    project's exporter: on CUDA with every op timed alone, on CPU with fake
    tensors only (no op times: Lethe's cost model prices the ops)."""
    device = torch.device(args.device)
    model, tokens, targets = make_model(args.model, args.tiny, device,
                                        torch.bfloat16)
    config = (TINY if args.tiny else CONFIGS)[args.model]
    start = time.perf_counter()
    graph = lt.export_training_step(
        model, (tokens, targets), lambda loss: loss, args.out,
        meta={"model": args.model, "config": config,
              "batch": config["batch"], "seq": config["seq"]})
    t = graph["totals"]
    print(f"wrote {args.out}: {t['n_nodes']} nodes ({t['n_fwd_ops']} fwd, "
          f"{t['n_bwd_ops']} bwd ops), {t['n_saved']} saved "
          f"({t['saved_bytes_unique_storage'] / 1e9:.2f} GB), "
          f"{len(graph['warnings'])} warnings, "
          f"{time.perf_counter() - start:.0f} s", flush=True)


def _write_plans(directory, name, out):
    path = os.path.join(directory, f"plans-{name}.json")
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"wrote {path}", flush=True)


def _caused_by(e, cls):
    while e is not None:
        if isinstance(e, cls):
            return True
        e = e.__cause__ or e.__context__
    return False


# --- measurement -----------------------------------------------------------

def _sac_context():
    from torch.utils.checkpoint import (CheckpointPolicy,
                                        create_selective_checkpoint_contexts)
    aten = torch.ops.aten
    keep = {aten.mm.default, aten.addmm.default, aten.bmm.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_cudnn_attention.default}

    def policy(ctx, op, *args, **kwargs):
        return (CheckpointPolicy.MUST_SAVE if op in keep
                else CheckpointPolicy.PREFER_RECOMPUTE)
    return functools.partial(create_selective_checkpoint_contexts, policy)


class _Timer:
    def __init__(self, cuda):
        self.cuda = cuda

    def __enter__(self):
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.end.record()
            self.end.synchronize()
            self.ms = self.start.elapsed_time(self.end)
        else:
            self.ms = (time.perf_counter() - self.t0) * 1000.0


def _grad_norm(params):
    """The gradients' global 2-norm (fp32): compares methods' steps."""
    total = None
    for p in params:
        if p.grad is not None:
            sq = p.grad.detach().float().pow(2).sum()
            total = sq if total is None else total + sq
    return None if total is None else float(total.sqrt())


# The seed of the step whose loss and gradient norm methods are compared by.
_COMPARED_SEED = 1234


def measure(step, params, cuda, warmup, steps):
    """Median step time (ms) and the peak bytes the step allocates beyond
    what is resident before it (gradients are freed before each step), the
    first step's loss and gradient norm."""
    def one():
        for p in params:
            p.grad = None
        return step()

    # The compared step draws its dropout masks from one seed in every
    # method: methods reach it after different numbers of steps (Lethe's
    # calibration runs hundreds), and each step advances the generators.
    torch.manual_seed(_COMPARED_SEED)
    start = time.perf_counter()
    loss = one()  # compiles, where there is anything to compile
    if cuda:
        torch.cuda.synchronize()
    first_s = time.perf_counter() - start
    first = {"loss": float(loss), "grad_norm": _grad_norm(params)}
    del loss
    for _ in range(warmup - 1):
        one()
    times, peak = timed_steps(step, params, cuda, steps)
    return dict(first, step_ms=statistics.median(times), step_ms_all=times,
                peak_bytes=peak, first_step_s=first_s)


def timed_steps(step, params, cuda, steps):
    """Each of `steps` steps timed from an idle GPU: (ms each, the peak
    bytes beyond what was resident, None off CUDA)."""
    times, peak = [], None
    for _ in range(steps):
        for p in params:
            p.grad = None
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        with _Timer(cuda) as t:
            step()
        times.append(t.ms)
        if cuda:
            torch.cuda.synchronize()
            peak = max(peak or 0, torch.cuda.max_memory_allocated() - before)
    return times, peak


def _is_oom(e):
    return any(isinstance(c, torch.OutOfMemoryError) or
               "out of memory" in str(c).lower()
               for c in _chain(e))


def _chain(e):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


def _free_device_memory(cuda):
    import gc
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def capped_step(step, params, device, budget_bytes):
    """One step with the caching allocator capped at what is reserved now
    (parameters, data) plus the budget: "ok" or "oom". The strict reading
    of "no out-of-memory at a budget Lethe accepted": the cap holds
    reserved segments, so allocator rounding and fragmentation count."""
    for p in params:
        p.grad = None
    _free_device_memory(True)
    index = torch.device(device).index
    if index is None:  # "cuda": the memory-fraction call needs an index
        index = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    limit = torch.cuda.memory_reserved(index) + budget_bytes
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total),
                                               index)
    try:
        step()
        torch.cuda.synchronize()
        return "ok"
    except Exception as e:  # noqa: BLE001 - an OOM is the result
        if _is_oom(e):
            return "oom"
        raise
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)
        for p in params:
            p.grad = None
        _free_device_memory(True)


def run_method(name, method, args, device, plans):
    """Builds the step for `method` and measures it."""
    cuda = device.type == "cuda"
    model, tokens, targets = make_model(name, args.tiny, device,
                                        torch.bfloat16)
    params = list(model.parameters())
    run = model
    extra = {}
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()
    ctx = contextlib.nullcontext
    backend = None
    if method == "full":
        model.checkpointed = set(range(len(model.blocks)))
    elif method == "every2":
        model.checkpointed = set(range(0, len(model.blocks), 2))
    elif method == "selective":
        model.checkpointed = set(range(len(model.blocks)))
        model.context_fn = _sac_context()
    elif method == "save_on_cpu":
        ctx = functools.partial(torch.autograd.graph.save_on_cpu,
                                pin_memory=cuda)
    elif method.startswith("compile"):
        import torch._functorch.config as fconfig
        budget = float(method.split("-")[1]) if "-" in method else 1.0
        fconfig.activation_memory_budget = budget
        run = torch.compile(model, dynamic=False)
    elif method.startswith("lethe"):
        budget = method.split(":")[1]
        portable = plans[name]["budgets"][budget]
        if not portable.get("feasible", True):
            return {"skipped": portable.get("error", "infeasible")}
        backend = lt.backend(planner=keyed_planner(portable, extra))
        run = torch.compile(model, backend=backend, dynamic=False)
        extra.update(predicted_peak_bytes=portable.get("peak_bytes"),
                     predicted_step_us=portable.get("step_us"),
                     baseline_peak_bytes=portable.get("baseline_peak_bytes"),
                     baseline_step_us=portable.get("baseline_step_us"),
                     budget_bytes=portable.get("budget_bytes"),
                     policy=portable.get("policy"))

    def step():
        with ctx():
            loss = run(tokens, targets)
        loss.backward()
        return loss.detach()

    from lethe import _offload
    stats_before = dict(_offload.stats)
    try:
        result = measure(step, params, cuda, args.warmup, args.steps)
        if cuda and method.startswith("lethe") and \
                extra.get("budget_bytes") and extra["budget_bytes"] < 2 ** 60:
            result["capped_step"] = capped_step(step, params, device,
                                                extra["budget_bytes"])
    finally:
        if method.startswith("compile"):
            import torch._functorch.config as fconfig
            fconfig.activation_memory_budget = 1.0
    result.update(extra)
    if backend is not None and backend.plans:
        s = backend.plans[0].summary()
        result.update(decisions=s["decisions"], offloaded=s["offloaded"],
                      recomputed_nodes=s["recomputed_nodes"],
                      retained_instead=len(s["retained_instead"]),
                      graphs=len(backend.plans))
        result["offload_stats"] = {k: v - stats_before.get(k, 0)
                                   for k, v in _offload.stats.items()}
    return result


def _method_queue(args, plans):
    """(model, method) pairs in run order. Rounds across the models (or
    model by model), so that a deadline cuts the least useful runs: the
    unplanned step and Lethe's plans first, then the eager checkpointing
    baselines, then the torch.compile ones."""
    queue = []
    for name in args.models:
        budgets = plans.get(name, {}).get("budgets", {})
        if args.lethe_budgets == ["all"]:
            lethe = [b for b, e in budgets.items() if e.get("feasible")]
            if args.smoke:  # one of each kind: retain, recompute, offload
                lethe = list(dict.fromkeys(
                    [b for b in ("offload-all", "least") if b in lethe]
                    + lethe[:1]))
        else:
            lethe = [b for b in args.lethe_budgets if b in budgets]
        rounds = [[m for m in args.baselines if m == "none"]
                  + [f"lethe:{b}" for b in lethe],
                  [m for m in args.baselines
                   if m != "none" and not m.startswith("compile")],
                  [m for m in args.baselines if m.startswith("compile")]]
        queue.append(rounds)
    if args.by_model or len(queue) == 1:
        return [(name, m) for name, rounds in zip(args.models, queue)
                for methods in rounds for m in methods]
    return [(name, m) for k in range(3)
            for name, rounds in zip(args.models, queue) for m in rounds[k]]


def run(args):
    start = time.monotonic()
    deadline = start + args.deadline_s
    if args.smoke:
        args.tiny, args.warmup, args.steps = True, 1, 1
    # An indexed device: some torch.cuda calls refuse a bare "cuda".
    device = (torch.device("cuda", torch.cuda.current_device())
              if torch.cuda.is_available() else torch.device("cpu"))
    cuda = device.type == "cuda"
    plans = {}
    for name in args.models:
        path = os.path.join(args.plans, f"plans-{name}.json")
        if os.path.exists(path):
            with open(path) as f:
                plans[name] = json.load(f)
            if bool(plans[name]["config"] == TINY[name]) != args.tiny:
                raise SystemExit(f"{path}: plans for the "
                                 f"{'tiny' if not args.tiny else 'full'} "
                                 "config; prepare them with matching --tiny")
    results = {"date": datetime.date.today().isoformat(),
               "time": datetime.datetime.now().isoformat(timespec="seconds"),
               "device": (torch.cuda.get_device_name(device) if cuda
                          else platform.processor() or "cpu"),
               "device_memory_bytes": (
                   torch.cuda.get_device_properties(device).total_memory
                   if cuda else None),
               "host": platform.node(),
               "torch": torch.__version__, "tiny": args.tiny,
               "smoke": args.smoke, "models": args.models,
               "configs": {n: (TINY if args.tiny else CONFIGS)[n]
                           for n in args.models},
               "warmup": args.warmup, "steps": args.steps,
               "deadline_s": args.deadline_s, "runs": []}
    observed = {}  # method family -> longest wall time seen
    for name, method in _method_queue(args, plans):
        entry = {"model": name, "method": method}
        left = deadline - time.monotonic()
        family = _family(method)
        expected = max(_expected_s(method, name, args.tiny),
                       observed.get(family, 0))
        if left < expected:
            entry["skipped"] = f"deadline ({left:.0f} s left, " \
                f"{expected:.0f} s expected)"
        else:
            t0 = time.monotonic()
            try:
                entry.update(run_method(name, method, args, device, plans))
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                if _is_oom(e):
                    entry["oom"] = True
                text = str(e).splitlines()[0][:300] if str(e) else ""
                entry["error"] = f"{type(e).__name__}: {text}"
                if args.smoke:
                    import traceback
                    traceback.print_exc()
                del e
            finally:
                if hasattr(torch, "_dynamo"):
                    torch._dynamo.reset()
                _free_device_memory(cuda)
            entry["wall_s"] = time.monotonic() - t0
            observed[family] = max(observed.get(family, 0), entry["wall_s"])
        results["runs"].append(entry)
        print(_row(entry), flush=True)
        _write_json(results, args.out)
    results["wall_s"] = time.monotonic() - start
    _write_json(results, args.out)
    failed = [e for e in results["runs"] if "error" in e]
    if args.smoke and cuda:
        # The offload path must have run on the device.
        for e in results["runs"]:
            if e["method"] == "lethe:offload-all" and "step_ms" in e and \
                    not (e.get("offload_stats") or {}).get("d2h_copies"):
                e["error"] = "no D2H copy was issued"
                failed.append(e)
        _write_json(results, args.out)
    if args.smoke:
        print(f"smoke: {len(results['runs']) - len(failed)} of "
              f"{len(results['runs'])} runs passed in "
              f"{results['wall_s']:.0f} s", flush=True)
    return results, failed


def _write_json(doc, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def _family(method):
    return method.split(":")[0].split("-")[0]


def _expected_s(method, model, tiny):
    """A rough lower bound of a method's wall time on an H100/H200 host
    (compile included), to skip what cannot end before the deadline; the
    longest time seen for the method's family replaces it."""
    if tiny:
        return 0
    layers = CONFIGS[model]["layers"]
    if method.startswith("compile"):
        return 20 + 2 * layers
    if method.startswith("lethe"):
        return 5 + 0.5 * layers
    return 10 if method == "save_on_cpu" else 5


def _row(e):
    if "skipped" in e or "error" in e:
        return f"{e['model']:12} {e['method']:14} " \
            f"{e.get('skipped') or e.get('error')}"
    pred = ""
    if e.get("predicted_peak_bytes") is not None and "step_ms" in e:
        pred = f" predicted {_gb(e['predicted_peak_bytes'])} GB " \
            f"{(e.get('predicted_step_us') or 0) / 1000:.1f} ms"
    return (f"{e['model']:12} {e['method']:14} {e['step_ms']:8.1f} ms "
            f"{_gb(e.get('peak_bytes'))} GB (first step "
            f"{e['first_step_s']:.1f} s){pred}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", required=True)
    p.add_argument("--budgets", default=",".join(BUDGETS))
    p.add_argument("--policy", default="auto")
    p.add_argument("--device", default="h200")
    r = sub.add_parser("run")
    r.add_argument("--plans", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--baselines", default=",".join(BASELINES))
    r.add_argument("--lethe-budgets", default="all",
                   help="comma-separated plan labels, or all feasible ones")
    r.add_argument("--smoke", action="store_true",
                   help="tiny configs, one step per method; exits 1 when a "
                   "method fails")
    r.add_argument("--by-model", action="store_true",
                   help="every method of a model before the next model "
                   "(default: rounds across the models)")
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--steps", type=int, default=5)
    r.add_argument("--deadline-s", type=float, default=1e9)
    s = sub.add_parser("selftest")
    s.add_argument("--out", default="/tmp/lethe-torch-bench")
    for q in (p, r, s):
        q.add_argument("--models", default=",".join(CONFIGS))
        q.add_argument("--tiny", action="store_true")
    x = sub.add_parser("export")
    x.add_argument("--model", default="llama-8l", choices=sorted(CONFIGS))
    x.add_argument("--out", required=True)
    x.add_argument("--device", default="cpu")
    x.add_argument("--tiny", action="store_true")
    rep = sub.add_parser("report")
    rep.add_argument("results", nargs="+")
    rep.add_argument("--md")
    rep.add_argument("--svg")
    args = parser.parse_args()
    if getattr(args, "models", None):
        args.models = args.models.split(",")
    if args.cmd == "prepare":
        args.budgets = args.budgets.split(",")
        prepare(args)
    elif args.cmd == "run":
        args.baselines = args.baselines.split(",")
        args.lethe_budgets = args.lethe_budgets.split(",")
        _, failed = run(args)
        if failed and args.smoke:
            sys.exit(1)
    elif args.cmd == "report":
        report(args)
    elif args.cmd == "export":
        export(args)
    else:  # selftest: everything at tiny sizes on this machine
        args.tiny = True
        args.budgets, args.policy, args.device = BUDGETS, "auto", "h200"
        prepare(argparse.Namespace(**dict(vars(args), out=args.out)))
        ra = argparse.Namespace(**dict(
            vars(args), plans=args.out, out=os.path.join(args.out, "r.json"),
            baselines=BASELINES, lethe_budgets=["all"], warmup=1, steps=2,
            deadline_s=1e9, by_model=False, smoke=False))
        _, failed = run(ra)
        report(argparse.Namespace(results=[ra.out], md=None,
                                  svg=os.path.join(args.out, "plot.svg")))
        if failed:
            sys.exit(1)


if __name__ == "__main__":
    main()

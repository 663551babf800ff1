#!/usr/bin/env python3
"""Lethe inside torch.compile (issue 15) against PyTorch's options, on a GPU.

One process per model, and on a GPU each method in a process of its own
(--isolate): a method timed after others in the same process issued its
steps up to 2x slower on the host (T5, Swin-T on an H200), which the
method did not cause. Lethe plans in the process (the `lethe` wheel, no
build tree). Methods:
  none, full, every2, selective, save_on_cpu  eager PyTorch
  aot_eager                                    AOTAutograd, no inductor
  compile, compile-0.8/0.5/0.3/0.1             inductor, min-cut with
                                               activation_memory_budget
  lethe:B                                      inductor with Lethe as the
                                               partitioner at budget B:
                                               "compile" = plain compile's
                                               measured peak (bytes), "N%"
                                               of Lethe's unplanned peak,
                                               "least" = the least budget
                                               Lethe can meet, "at:M" =
                                               method M's measured peak,
                                               "at:M*F" = F times it
                                               "B+C": budget B planned
                                               with peak correction C
                                               (bytes; no automatic
                                               calibration). Otherwise
                                               Lethe calibrates itself on
                                               the second step
                                               (--lethe-calibrate auto).

  python3 bench/torch_inductor_bench.py run --model gpt2-medium --out R.json
      [--profile-kernels]   (and profile one more step of each method:
                             device busy time, gaps, host issue time)
  python3 bench/torch_inductor_bench.py run --model corpus:swin_t ...
                            (a model of the graph corpus, built by
                             bench/export_corpus.py: torchvision and
                             transformers, random weights; methods none,
                             save_on_cpu, aot_eager, compile[-F], lethe:B)
  python3 bench/torch_inductor_bench.py run ... --interleave R
                            (each method's process kept after its first
                             timed round; R rounds in all, the methods
                             timed in turns: the host's wander within a
                             call falls on every method alike)
  python3 bench/torch_inductor_bench.py run ... --cudagraphs
                            (every compiled method as CUDA graphs: compile
                             with mode="reduce-overhead", Lethe with
                             triton.cudagraphs, calibrated without them;
                             the peak is the recording step's)
  python3 bench/torch_inductor_bench.py report R1.json R2.json --md M --svg S

Peak: bytes the step allocates beyond what is resident before it
(parameters, data; gradients are the step's), median step time of
--steps steps after --warmup steps.
"""

import argparse
import ast
import json
import os
import platform
import re
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import inductor_interleave as interleave  # noqa: E402
from inductor_steps import (host_times, profile_kernels,  # noqa: E402
                            recorded_peak)
# The report's functions, also this module's (tests and callers use them).
from inductor_report import (check_targets, report_text,  # noqa: E402,F401
                             svg_plot)
import torch_budget_bench as tb  # noqa: E402  (models, eager baselines)

# ViT-B/16-like and a static-shape MoE LM (every expert runs on every
# token, weighted by a top-2 gate: no data-dependent shapes, so dynamo
# compiles it whole).
CONFIGS = dict(tb.CONFIGS)
CONFIGS.update({
    "vit-b16": dict(dim=768, layers=12, heads=12, mlp=3072, image=224,
                    patch=16, classes=1000, batch=64, kind="vit"),
    "moe-8l": dict(vocab=32000, dim=1024, layers=8, heads=16, kv_heads=16,
                   mlp=1408, experts=4, top_k=2, seq=1024, batch=8,
                   kind="moe"),
})
TINY = dict(tb.TINY)
TINY.update({
    "vit-b16": dict(dim=64, layers=2, heads=4, mlp=128, image=32, patch=8,
                    classes=10, batch=2, kind="vit"),
    "moe-8l": dict(vocab=128, dim=64, layers=2, heads=4, kv_heads=4, mlp=96,
                   experts=4, top_k=2, seq=32, batch=2, kind="moe"),
})
# "corpus:NAME": a model of the graph corpus (bench/export_corpus.py); its
# modules have no `blocks`, so only the methods below run on it.
CORPUS_PREFIX = "corpus:"
CORPUS_METHODS = ("none", "save_on_cpu", "aot_eager", "compile")
BASELINES = ["none", "full", "every2", "selective", "save_on_cpu",
             "aot_eager", "compile", "compile-0.8", "compile-0.5",
             "compile-0.3", "compile-0.1"]
# "compile" / "at:M": the measured peak of plain compile / of method M.
LETHE_BUDGETS = ["compile", "at:compile-0.5", "at:compile-0.1", "least"]


class ViTBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1 = nn.LayerNorm(c["dim"])
        self.norm2 = nn.LayerNorm(c["dim"])
        self.qkv = nn.Linear(c["dim"], 3 * c["dim"])
        self.proj = nn.Linear(c["dim"], c["dim"])
        self.fc1 = nn.Linear(c["dim"], c["mlp"])
        self.fc2 = nn.Linear(c["mlp"], c["dim"])
        self.heads = c["heads"]

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(
            b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.patch = nn.Conv2d(3, c["dim"], c["patch"], c["patch"])
        n = (c["image"] // c["patch"]) ** 2
        self.pos = nn.Parameter(torch.zeros(1, n, c["dim"]))
        self.blocks = nn.ModuleList(ViTBlock(c) for _ in range(c["layers"]))
        self.norm = nn.LayerNorm(c["dim"])
        self.head = nn.Linear(c["dim"], c["classes"])
        self.checkpointed = set()
        self.context_fn = None

    def forward(self, images, labels):
        x = self.patch(images).flatten(2).transpose(1, 2) + self.pos
        for i, block in enumerate(self.blocks):
            x = _maybe_checkpoint(self, i, block, x)
        logits = self.head(self.norm(x).mean(1))
        return F.cross_entropy(logits.float(), labels)


class MoEMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate = nn.Linear(c["dim"], c["experts"], bias=False)
        self.up = nn.ModuleList(nn.Linear(c["dim"], 2 * c["mlp"], bias=False)
                                for _ in range(c["experts"]))
        self.down = nn.ModuleList(nn.Linear(c["mlp"], c["dim"], bias=False)
                                  for _ in range(c["experts"]))
        self.top_k = c["top_k"]

    def forward(self, x):
        scores = self.gate(x).float().softmax(-1)
        top, idx = scores.topk(self.top_k, dim=-1)
        weights = torch.zeros_like(scores).scatter(-1, idx, top).to(x.dtype)
        out = 0
        for e, (up, down) in enumerate(zip(self.up, self.down)):
            a, b = up(x).chunk(2, dim=-1)
            out = out + weights[..., e:e + 1] * down(F.silu(a) * b)
        return out


class MoEBlock(nn.Module):
    def __init__(self, c, rope):
        super().__init__()
        self.norm1 = tb.RMSNorm(c["dim"])
        self.norm2 = tb.RMSNorm(c["dim"])
        self.attn = tb.Attention(c, rope)
        self.moe = MoEMLP(c)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.moe(self.norm2(x))


class MoELM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        rope = tb.Rope(c["dim"] // c["heads"], c["seq"])
        self.embed = nn.Embedding(c["vocab"], c["dim"])
        self.blocks = nn.ModuleList(MoEBlock(c, rope)
                                    for _ in range(c["layers"]))
        self.norm = tb.RMSNorm(c["dim"])
        self.head = nn.Linear(c["dim"], c["vocab"], bias=False)
        self.checkpointed = set()
        self.context_fn = None

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            x = _maybe_checkpoint(self, i, block, x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(),
                               targets.flatten())


def _maybe_checkpoint(model, i, block, x):
    if i not in model.checkpointed:
        return block(x)
    kwargs = {"context_fn": model.context_fn} if model.context_fn else {}
    return tb.checkpoint(block, x, use_reentrant=False, **kwargs)


def _corpus():
    """The real-graph corpus's models (bench/export_corpus.py: torchvision,
    transformers and small definitions, random weights), by name."""
    import export_corpus
    return export_corpus.CORPUS


def _corpus_model(name, tiny, device, dtype):
    torch.manual_seed(0)
    module, (x, y), _ = _corpus()[name][1](tiny)
    module = module.to(device=device, dtype=dtype).train()
    x = x.to(device=device, dtype=dtype if x.is_floating_point() else None)
    return module, x, y.to(device)


def model_names():
    """Every --model: the bench's own models and the corpus's."""
    return sorted(CONFIGS) + [CORPUS_PREFIX + n for n in sorted(_corpus())]


def make_model(name, tiny, device, dtype):
    if name.startswith(CORPUS_PREFIX):
        return _corpus_model(name[len(CORPUS_PREFIX):], tiny, device, dtype)
    c = (TINY if tiny else CONFIGS)[name]
    if c["kind"] in ("gpt", "llama"):
        saved = tb.TINY if tiny else tb.CONFIGS
        return tb.make_model(name, tiny, device, dtype) \
            if name in saved else None
    torch.manual_seed(0)
    with torch.device(device):
        model = (ViT(c) if c["kind"] == "vit" else MoELM(c)).to(dtype=dtype)
    g = torch.Generator().manual_seed(1)
    if c["kind"] == "vit":
        x = torch.randn(c["batch"], 3, c["image"], c["image"], generator=g)
        y = torch.randint(0, c["classes"], (c["batch"],), generator=g)
        return model, x.to(device=device, dtype=dtype), y.to(device)
    tokens = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g)
    targets = torch.randint(0, c["vocab"], (c["batch"], c["seq"]),
                            generator=g)
    return model, tokens.to(device), targets.to(device)


# --- one method ---------------------------------------------------------------

def run_method(name, method, args, device, budgets):
    import lethe
    import lethe.torch as lt
    cuda = device.type == "cuda"
    if name.startswith(CORPUS_PREFIX) and not (
            method.startswith(CORPUS_METHODS) or method.startswith("lethe")):
        raise ValueError(f"{method} needs the bench's own models (their "
                         f"blocks); {name} runs {', '.join(CORPUS_METHODS)}"
                         "[-F] and lethe:B")
    model, a, b = make_model(name, args.tiny, device, torch.bfloat16)
    params = list(model.parameters())
    torch._dynamo.reset()
    import torch._functorch.config as fconfig
    fconfig.activation_memory_budget = 1.0
    run, ctx, extra, backend = model, None, {}, None
    if args.cudagraphs:
        extra["cudagraphs"] = True
    if method == "full":
        model.checkpointed = set(range(len(model.blocks)))
    elif method == "every2":
        model.checkpointed = set(range(0, len(model.blocks), 2))
    elif method == "selective":
        model.checkpointed = set(range(len(model.blocks)))
        model.context_fn = tb._sac_context()
    elif method == "save_on_cpu":
        ctx = lambda: torch.autograd.graph.save_on_cpu(pin_memory=cuda)  # noqa: E731
    elif method == "aot_eager":
        run = torch.compile(model, backend="aot_eager", dynamic=False)
    elif method.startswith("compile"):
        fconfig.activation_memory_budget = \
            float(method.split("-")[1]) if "-" in method else 1.0
        run = torch.compile(model, dynamic=False, **(
            {"mode": "reduce-overhead"} if args.cudagraphs else {}))
    elif method.startswith("lethe"):
        budget = budgets[method.split(":", 1)[1]]
        correction = 0
        if "+" in budget:  # "B+C": budget B, peak correction C (bytes)
            budget, correction = budget.split("+")
            correction = int(correction)
        extra["budget"] = budget
        extra["peak_correction"] = correction
        # Under CUDA graphs the backend calibrates without them and then
        # compiles the kept plan with them.
        calibrate = args.lethe_calibrate == "auto" and not correction
        extra["calibrate"] = calibrate
        backend = lt.backend(budget=budget, device=args.profile,
                             peak_correction=correction,
                             calibrate=calibrate,
                             costs=args.lethe_costs,
                             offload=_OFFLOAD[args.lethe_offload],
                             dump_dir=_dump_dir(args, method),
                             inductor_options=_inductor_options(args),
                             **({} if args.lethe_fusion_guards is None else
                                {"fusion_guards": args.lethe_fusion_guards}))
        run = backend(model)  # torch.compile(..., dynamic=False), calibrating

    def step():
        if args.cudagraphs:
            # A new step: CUDA graph trees may reuse the last one's outputs.
            torch.compiler.cudagraph_mark_step_begin()
        if ctx is None:
            loss = run(a, b)
        else:
            with ctx():
                loss = run(a, b)
        loss.backward()
        # A replay overwrites a graph's outputs: keep the loss apart.
        return loss.detach().clone() if args.cudagraphs else loss.detach()

    warmup = args.warmup
    if extra.get("calibrate"):
        # The calibration measures 3 steps after a second of warm ones,
        # re-plans, recompiles and measures again (up to four compiles):
        # time the steps after it is done.
        for _ in range(2000):
            for p in params:
                p.grad = None
            step()
            if backend.calibration.get("done"):
                break
    try:
        # After the calibration: under CUDA graphs its end recompiles.
        timed = recorded_peak(step, extra) if args.cudagraphs and cuda \
            else step
        result = tb.measure(timed, params, cuda, warmup, args.steps)
        if "recorded_peak_bytes" in extra:
            # Replays allocate nothing: the step's peak is the recording's,
            # which Lethe's calibration measured where it ended by
            # recompiling with CUDA graphs (the timed calls only replay).
            attempts = backend.calibration.get("cudagraph_attempts") \
                if backend is not None else None
            graph_peak = attempts[-1]["peak_bytes"] if attempts else None
            result["replay_peak_bytes"] = result["peak_bytes"]
            result["peak_bytes"] = max(extra["recorded_peak_bytes"],
                                       graph_peak or 0)
        turns = interleave.Turns.from_env()
        if turns is not None:
            def more():
                # One untimed step first: the process waited its turn
                # (cold caches, a sleeping thread pool).
                for p in params:
                    p.grad = None
                step()
                times, peak = tb.timed_steps(step, params, cuda, args.steps)
                if peak is not None:
                    result["peak_bytes"] = max(result["peak_bytes"] or 0,
                                               peak)
                return times
            turns.rounds(result, more)
        if args.profile_kernels and cuda:
            result["host"] = host_times(step, params)
            try:
                result["kernels"] = profile_kernels(step, params)
            except RuntimeError as e:  # e.g. another profiler running
                result["kernels"] = {"error": str(e)}
    finally:
        fconfig.activation_memory_budget = 1.0
    result.update(extra)
    if backend is not None and backend.plans:
        records = backend.plans
        if backend.calibrated_plan is not None:
            records = [backend.calibrated_plan]  # the plan the steps ran
        r = records[0]
        s = r.summary()
        result.update(
            graphs=len(records),
            predicted_peak_bytes=sum(x.plan.peak_bytes for x in records),
            predicted_step_us=sum(x.plan.step_us for x in records),
            baseline_peak_bytes=s["baseline_peak_bytes"],
            baseline_step_us=s["baseline_step_us"],
            budget_bytes=s["budget_bytes"], decisions=s["decisions"],
            saved=s["saved"], offloaded=s["offloaded"],
            mismatches=sum(len(x.mismatches) for x in records),
            mismatch_bytes=sum(m.get("bytes", 0) for x in records
                               for m in x.mismatches),
            plan_s=sum(x.plan_s for x in records),
            costs=args.lethe_costs,
            measured_nodes=sum(x.measured.get("timed_nodes", 0)
                               for x in records),
            profiled_nodes=sum(x.measured.get("profiled_nodes", 0)
                               for x in records),
            measure_s=sum(x.measured.get("measure_s", 0) for x in records),
            measured_rates=r.measured.get("rates"),
            calibration=backend.calibration)
        if extra.get("peak_correction") or extra.get("calibrate"):
            # The user's budget, which the measured peak must meet; the
            # planner saw budget + correction.
            result["planned_budget_bytes"] = result["budget_bytes"]
            if str(extra["budget"]).isdigit():
                result["budget_bytes"] = int(extra["budget"])
    del lethe
    return result


def _inductor_options(args):
    """Lethe's inductor config patches: --lethe-inductor-option KEY=VALUE
    (VALUE a Python literal) and, with --cudagraphs, triton.cudagraphs."""
    options = {}
    for item in getattr(args, "lethe_inductor_option", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--lethe-inductor-option {item!r}: expected "
                             "KEY=VALUE")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    if args.cudagraphs:
        options["triton.cudagraphs"] = True
    return options or None


# --lethe-offload: lethe.torch.backend's offload=.
_OFFLOAD = {"auto": "auto", "off": False, "on": True}


def _dump_dir(args, method):
    """Where a Lethe run writes each graph it planned (--dump-graphs)."""
    if not args.dump_graphs:
        return None
    return os.path.join(args.dump_graphs,
                        re.sub(r"[^A-Za-z0-9._-]", "_", method))


def least_budget(name, args, device):
    """Lethe's least budget on this model (bytes), 2% over it for packing
    slack. Calibrating (CUDA): the plan at the model's least is run and its
    peak measured, since the model's peak of a compiled step is an estimate
    and a least it cannot meet is no least. Else: plan at 1% and read the
    least from the error."""
    import lethe.torch as lt
    model, a, b = make_model(name, args.tiny, device, torch.bfloat16)
    torch._dynamo.reset()
    calibrate = args.lethe_calibrate == "auto" and device.type == "cuda"
    offload = _OFFLOAD[args.lethe_offload]
    if calibrate:
        # A byte budget far below any step's: the least plan runs
        # (provisional) and the calibration reports its measured peak.
        backend = lt.backend(budget=str(1 << 20), device=args.profile,
                             calibrate=True, costs=args.lethe_costs,
                             offload=offload,
                             dump_dir=_dump_dir(args, "least-search"))
        run = backend(model)
        params = list(model.parameters())
        for _ in range(12):
            for p in params:
                p.grad = None
            run(a, b).backward()
            if backend.calibration.get("done"):
                break
        unmet = backend.calibration.get("unmet")
        if unmet:
            return int(unmet["least_measured_bytes"] * 1.02)
        raise RuntimeError(f"least: no measured least "
                           f"({backend.calibration})")
    backend = lt.backend(budget="1%", device=args.profile, calibrate=False,
                         costs=args.lethe_costs, offload=offload)
    run = torch.compile(model, backend=backend, dynamic=False)
    try:
        run(a, b).backward()
    except Exception as e:  # noqa: BLE001 - dynamo wraps the error
        for err in _chain(e):
            least = getattr(err, "least_feasible_budget", None)
            if least is None and getattr(err, "plan", None) is not None:
                least = err.plan.least_feasible_budget_bytes
            if least:
                # Packing slack: the partition is not exactly the plan.
                return int(least * 1.02)
        raise
    return None


def _isolate(args, device):
    return args.isolate == "on" or (args.isolate == "auto"
                                    and device.type == "cuda")


def run_method_isolated(method, args, budgets):
    """run_method in a fresh process (`one` below): what a method costs on
    the host must not depend on what ran before it. A failure in the
    child is the method's row, as in-process."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory(prefix="lethe-bench-") as d:
        spec = os.path.join(d, "spec.json")
        out = os.path.join(d, "result.json")
        with open(spec, "w") as f:
            json.dump({"args": vars(args), "method": method,
                       "budgets": budgets}, f)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__),
                               "one", spec, out], stderr=subprocess.PIPE,
                              text=True)
        if proc.stderr:
            sys.stderr.write(proc.stderr)
        if not os.path.exists(out):
            raise RuntimeError(f"the process of {method} exited with "
                               f"{proc.returncode} and no result: "
                               f"{proc.stderr[-400:]}")
        with open(out) as f:
            r = json.load(f)
    return r


def start_interleaved(inter, method, args, budgets):
    """run_method_isolated's process, kept alive after its first round for
    `inter` (bench/inductor_interleave.py) to time more rounds in turns;
    its row after the first round."""
    spec = os.path.join(inter.dir, f"{len(inter.children)}.spec.json")
    out = os.path.join(inter.dir, f"{len(inter.children)}.result.json")
    with open(spec, "w") as f:
        json.dump({"args": vars(args), "method": method,
                   "budgets": budgets}, f)
    return inter.start(method, [sys.executable, os.path.abspath(__file__),
                                "one", spec, out], out)


def run_one(spec_path, out_path):
    """The child of run_method_isolated."""
    with open(spec_path) as f:
        spec = json.load(f)
    args = argparse.Namespace(**spec["args"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        r = run_method(args.model, spec["method"], args, device,
                       spec["budgets"])
    except Exception as e:  # noqa: BLE001 - the parent makes it the row
        r = {"error": f"{type(e).__name__}: {str(e)[:400]}",
             "trace": traceback.format_exc()[-2000:]}
    r["pid"] = os.getpid()  # which process measured it
    with open(out_path, "w") as f:
        json.dump(r, f, default=str)


def _chain(e):
    seen = []
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return seen


def run(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    deadline = time.time() + args.deadline if args.deadline else None
    doc = {"model": args.model, "tiny": args.tiny, "device": str(device),
           "gpu": torch.cuda.get_device_name() if device.type == "cuda"
           else platform.processor(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv),
           "results": {}}
    methods = BASELINES if args.methods is None else args.methods
    budgets = {}
    # Plain compile first (its peak is a Lethe budget), with every method
    # an "at:M" budget names, then Lethe, then compile's budgets, then the
    # eager options: a deadline cuts the least needed runs.
    named = [b.split("+")[0][3:].split("*")[0] for b in args.lethe_budgets
             if b.startswith("at:")]
    first = list(dict.fromkeys(
        ["compile", "compile-0.5", "compile-0.1"] + named
        + [f"lethe:{b}" for b in args.lethe_budgets]
        + ["compile-0.3", "compile-0.8"]))
    order = [m for m in first if m in methods or m.startswith("lethe")] + \
        [m for m in methods if m not in first]
    inter = None
    if args.interleave > 1 and _isolate(args, device):
        import tempfile
        tmp = tempfile.TemporaryDirectory(prefix="lethe-bench-")
        inter = interleave.Interleaver(tmp.name)
    for method in order:
        if deadline and time.time() > deadline:
            doc["results"][method] = {"skipped": "deadline"}
            continue
        key = method.split(":", 1)[1] if method.startswith("lethe") else None
        # "compile+C" / "at:M+C": that measured peak, peak correction C.
        base, plus = (key.split("+", 1) + [None])[:2] if key else (None, None)
        try:
            if key is not None and (base == "compile" or
                                    base.startswith("at:")):
                # "at:M*F": F times method M's measured peak.
                name, _, frac = (base[3:] if base.startswith("at:")
                                 else "compile").partition("*")
                c = doc["results"].get(name, {})
                if not c.get("peak_bytes"):
                    doc["results"][method] = {"skipped": "no compile peak"}
                    continue
                budgets[key] = str(int(c["peak_bytes"] * float(frac or 1))) \
                    + (f"+{plus}" if plus else "")
            elif key == "least":
                budgets[key] = str(least_budget(args.model, args, device))
            elif key is not None:
                budgets[key] = key
            start = time.time()
            if inter is not None:
                r = start_interleaved(inter, method, args, budgets)
            elif _isolate(args, device):
                r = run_method_isolated(method, args, budgets)
            else:
                r = run_method(args.model, method, args, device, budgets)
            r["wall_s"] = time.time() - start
        except Exception as e:  # noqa: BLE001 - a failed method is a row
            r = {"error": f"{type(e).__name__}: {str(e)[:400]}",
                 "trace": traceback.format_exc()[-2000:]}
        doc["results"][method] = r
        print(f"{args.model:12s} {method:16s} " + (
            f"{r['step_ms']:8.2f} ms {r['peak_bytes'] / 1e9 if r.get('peak_bytes') else 0:7.3f} GB"
            if "step_ms" in r else r.get("error", r.get("skipped", ""))[:200]),
            flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1, default=str)
    if inter is not None:
        # Every method timed in turns; the rows after the first round
        # (above) gave the later methods their budgets.
        inter.rounds(args.interleave)
        for method, r in inter.finish().items():
            r["wall_s"] = doc["results"][method].get("wall_s")
            r["interleaved_rounds"] = args.interleave
            doc["results"][method] = r
            print(f"{args.model:12s} {method:16s} " + (
                f"{r['step_ms']:8.2f} ms over {args.interleave} rounds "
                f"{[round(x, 2) for x in r.get('step_ms_rounds', [])]}"
                if "step_ms" in r else r.get("error", "")[:200]),
                flush=True)
        tmp.cleanup()
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1, default=str)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure one model")
    r.add_argument("--model", required=True, metavar="MODEL",
                   choices=model_names(),
                   help="a bench model (" + ", ".join(sorted(CONFIGS))
                   + ") or corpus:NAME, a model of bench/export_corpus.py")
    r.add_argument("--tiny", action="store_true")
    r.add_argument("--out", required=True)
    r.add_argument("--methods", nargs="*", default=None,
                   help="baselines to run (default: all; none with an empty list)")
    r.add_argument("--lethe-budgets", nargs="*", default=LETHE_BUDGETS)
    r.add_argument("--lethe-offload", choices=sorted(_OFFLOAD),
                   default="auto",
                   help="off: recompute-only plans (host budget 0); on: "
                   "offload=True (under --cudagraphs too, where auto plans "
                   "recompute-only)")
    r.add_argument("--lethe-inductor-option", action="append",
                   metavar="KEY=VALUE",
                   help="an inductor config patch for Lethe's methods "
                   "(repeatable; VALUE a Python literal), e.g. "
                   "max_fusion_size=32")
    r.add_argument("--lethe-fusion-guards", default=None,
                   metavar="LIST",
                   help="which of lethe._fusion's guards hold under a plan: "
                   "a comma-separated subset of horizontal,vertical,order "
                   "('' for none; default all), to measure what each is "
                   "worth")
    r.add_argument("--lethe-costs", choices=["auto", "model"],
                   default="auto",
                   help="auto: op times and copy rates measured on this GPU "
                   "(lethe._measure); model: the analytic cost model")
    r.add_argument("--profile", default=None,
                   help="Lethe device profile (default: this GPU's)")
    r.add_argument("--lethe-calibrate", choices=["auto", "off"],
                   default="auto",
                   help="Lethe's calibration on the second step (auto) or "
                        "none (off)")
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--steps", type=int, default=5)
    r.add_argument("--profile-kernels", action="store_true",
                   help="profile one more step of each method: device busy "
                   "time, gaps, generated vs library kernels, top kernels")
    r.add_argument("--dump-graphs", default=None, metavar="DIR",
                   help="write every graph Lethe plans, its plan and a "
                   "summary under DIR/<method>/ (see corpus_bench.py "
                   "--floor)")
    r.add_argument("--deadline", type=float, default=None,
                   help="seconds after which remaining methods are skipped")
    r.add_argument("--isolate", choices=["auto", "on", "off"],
                   default="auto",
                   help="run each method in a process of its own (auto: "
                   "on a GPU)")
    r.add_argument("--interleave", type=int, default=1, metavar="R",
                   help="with --isolate: keep each method's process after "
                   "its first timed round and time R rounds of --steps "
                   "steps in all, the methods in turns "
                   "(bench/inductor_interleave.py); a row is the median "
                   "over its rounds")
    r.add_argument("--cudagraphs", action="store_true",
                   help="every compiled method as CUDA graphs "
                   "(mode='reduce-overhead'; Lethe with inductor option "
                   "triton.cudagraphs, calibrating without them first); the "
                   "peak is the recording step's, replays allocate nothing")
    o = sub.add_parser("one", help=argparse.SUPPRESS)
    o.add_argument("spec")
    o.add_argument("out")
    p = sub.add_parser("report", help="tables and plot from run outputs")
    p.add_argument("results", nargs="+")
    p.add_argument("--md", default=None)
    p.add_argument("--svg", default=None)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args)
    elif args.cmd == "one":
        run_one(args.spec, args.out)
    else:
        docs = []
        for path in args.results:
            with open(path) as f:
                doc = json.load(f)
            # Runs of one model in several calls share a table: a later
            # call's plain compile is kept as "compile (call k)".
            same = next((d for d in docs if d["model"] == doc["model"]
                         and d.get("tiny") == doc.get("tiny")), None)
            if same is None:
                docs.append(doc)
                continue
            k = same.setdefault("calls", 1) + 1
            same["calls"] = k
            for m, r in doc["results"].items():
                name = m if m not in same["results"] else f"{m} (call {k})"
                same["results"][name] = r
        text = report_text(docs)
        print(text)
        if args.md:
            with open(args.md, "w") as f:
                f.write(text + "\n")
        if args.svg:
            svg_plot(docs, args.svg)


if __name__ == "__main__":
    main()

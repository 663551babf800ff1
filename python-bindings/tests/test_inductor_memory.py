"""The compiled step's memory against Lethe's prediction, on CPU (torch >=
2.9, inductor's CPU backend; CI runs it under torch 2.11).

Lethe predicts the peak of the step that inductor compiles from its plan.
Inductor's CPU backend frees and allocates the same buffers as its GPU
backend, so the CPU allocator, read through torch.profiler, measures what a
GPU's caching allocator would hold: the test that the plan's memory is what
inductor runs needs no GPU.
"""

from inductor_common import (  # noqa: F401 (the fixture is autouse)
    pytest, torch, lt, _inductor, needs_lethe, _no_compile_caches)


import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# A 4-layer Llama of the bench's (bench/torch_budget_bench.py: RMSNorm,
# rotary attention with grouped k/v, SwiGLU on one fused gate/up
# projection) at a CPU's size.
LLAMA = dict(vocab=1000, dim=256, layers=4, heads=8, kv_heads=2, mlp=704,
             seq=256, batch=2, kind="llama")


def _bench_module(name):
    """bench/NAME.py, imported (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(ROOT, "bench", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _llama():
    bench = _bench_module("torch_budget_bench")
    torch.manual_seed(0)
    model = bench.LM(LLAMA)
    tokens = torch.randint(0, LLAMA["vocab"], (2, LLAMA["seq"]))
    targets = torch.randint(0, LLAMA["vocab"], (2, LLAMA["seq"]))
    return model, tokens, targets


def _dit():
    """A 4-layer DiT of the corpus (bench/export_corpus.py: adaLN-Zero
    blocks) at a CPU's size, with its loss."""
    corpus = _bench_module("export_corpus")
    torch.manual_seed(0)
    model = corpus.LossOf(corpus.DiT(256, 4, 4), corpus._dit_loss)
    return model, torch.randn(8, 4, 32, 32), torch.randint(0, 1000, (8,))


def _step_peak(run, model, tokens, targets):
    """Bytes the step allocates at its peak beyond what was resident
    before it (what a budget bounds), measured by the CPU allocator."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) \
            as prof:
        run(tokens, targets).backward()
    sizes = []

    def walk(event):
        fields = event.extra_fields
        if type(fields).__name__ == "_ExtraFields_Allocation":
            sizes.append((event.start_time_ns, fields.alloc_size))
        for child in event.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    now = peak = 0
    for _, size in sorted(sizes):
        now += size
        peak = max(peak, now)
    for p in model.parameters():
        p.grad = None
    return peak


def _least_plan_peaks(model, a, b):
    """(measured, predicted) peak of the step compiled with Lethe at its
    least budget."""
    backend = lt.backend(budget="least", costs="model", calibrate=False,
                         device="h100")
    torch._dynamo.reset()
    run = torch.compile(model, backend=backend, dynamic=False)
    for _ in range(2):  # compiles, then a step in the allocator's steady state
        run(a, b).backward()
        for p in model.parameters():
            p.grad = None
    measured = _step_peak(run, model, a, b)
    (record,) = backend.plans
    return measured, record.plan.peak_bytes


@needs_lethe
def test_the_least_plans_peak_is_what_inductor_runs():
    # At the least budget Lethe recomputes the residual stream, and the
    # backward's RMSNorm weight-gradient reductions of neighbouring layers
    # all read it. Inductor fused them by those shared reads, so a layer's
    # tensors lived until the next layer's backward: 28% over the
    # prediction (25.8 against 20.2 MB). Compiled as the plan assumes
    # (Backend sets partitioner.inductor_options(): no horizontal fusion),
    # 21.3 MB, 6% over.
    measured, predicted = _least_plan_peaks(*_llama())
    assert measured <= 1.10 * predicted, (measured, predicted)


@needs_lethe
@pytest.mark.xfail(strict=True, reason="known: inductor re-runs some of "
                   "DiT's recomputations layers before their use (97.1 MB "
                   "measured for 67.3 predicted; bench/results/"
                   "torch-inductor.md, 2026-11-28)")
def test_the_least_plans_peak_is_what_inductor_runs_on_a_dit():
    # The same on DiT's adaLN blocks. On an H200, plans predicted at 3.14,
    # 2.74 and 1.77 GB all measured 3.52 GB without CUDA graphs. Inductor
    # re-runs layer 0's q/k/v projection at the backward's start and
    # holds it to the end, and re-makes the MLP inputs of two layers in
    # one fused kernel. Min-cut's backward has each recomputation right
    # before its first use. When this passes, drop the mark.
    measured, predicted = _least_plan_peaks(*_dit())
    assert measured <= 1.10 * predicted, (measured, predicted)


def test_the_partitioners_inductor_options():
    p = lt.partitioner(budget="50%", device="h100")
    options = p.inductor_options()
    assert options["custom_partitioner_fn"] is p
    assert options["score_fusion_memory_threshold"] == \
        _inductor.NO_HORIZONTAL_FUSION
    assert "allow_buffer_reuse" not in options  # offload off by default
    assert lt.partitioner(budget="50%", device="h100", offload=True) \
        .inductor_options()["allow_buffer_reuse"] is False
    # No budget: plain compile's partition, with its fusion.
    assert "score_fusion_memory_threshold" not in \
        lt.partitioner(budget=None, device="h100").inductor_options()

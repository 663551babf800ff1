"""Lethe inside torch.compile on a CUDA GPU: what the CPU suite cannot
run. Skipped without one (CI has none); the GPU runs are recorded in
bench/results/torch-inductor.md."""

import pytest

from inductor_common import (Attention, _close, _planner, needs_lethe,
                             offload_all, torch)
from inductor_common import _model as _cpu_model
import lethe.torch as lt  # noqa: E402

pytestmark = [
    needs_lethe,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU"),
]


def _model(d=64, layers=3):
    return _cpu_model(layers, d).cuda()


def _step(model, run, x, graphs=False):
    if graphs:
        torch.compiler.cudagraph_mark_step_begin()
    loss = run(x).pow(2).mean()
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    for p in model.parameters():
        p.grad = None
    return loss.detach().clone(), grads


def _offload_matmuls(e):
    return "offload" if e["op"] == "aten.addmm.default" else "retain"


def _compiled(model, planner, graphs=True):
    torch._dynamo.reset()
    p = lt.partitioner(budget=None, offload=True, planner=planner)
    return p, torch.compile(model, dynamic=False, options={
        "custom_partitioner_fn": p, "allow_buffer_reuse": False,
        "triton.cudagraphs": graphs})


def test_offload_under_cuda_graphs_replays_eagers_numbers():
    """Each replayed step copies every offloaded value out and back and
    gives eager's loss and gradients for that step's input (a new input
    each step: a replay that copied nothing would reload the last step's
    values); every value is released each step; no graph is skipped. With
    the copies captured in the graphs (lethe._offload_ops.IN_GRAPHS), the
    host buffers belong to the captured graphs and no Python runs in a
    replay; else the copies run between the graphs every step."""
    from torch._dynamo.utils import counters
    from lethe import _offload_ops
    counters.clear()
    model = _model()
    xs = [torch.randn(8, 32, 64, device="cuda") for _ in range(6)]
    eager = [_step(model, model, x) for x in xs]
    p, run = _compiled(model, _planner(_offload_matmuls))
    graph_host = _offload_ops.stats["graph_host_bytes"]
    for i, x in enumerate(xs):
        before = dict(_offload_ops.stats)
        _close(_step(model, run, x, graphs=True), eager[i])
        torch.cuda.synchronize()
        moved = len(p.records[-1].offloaded)
        assert moved > 0
        copies = _offload_ops.stats["d2h_copies"] - before["d2h_copies"]
        if not _offload_ops.IN_GRAPHS:
            assert copies == moved, f"step {i}"
            assert _offload_ops.stats["h2d_copies"] - before["h2d_copies"] \
                == moved, f"step {i}"
        elif i >= 2:  # warm-up, recording, then replays only
            assert copies == 0, f"step {i}"
        assert _offload_ops.held() == 0 and not _offload_ops._token_host
    if _offload_ops.IN_GRAPHS:
        assert _offload_ops.stats["graph_host_bytes"] > graph_host
    assert counters["inductor"]["cudagraph_skips"] == 0


def _graph_peak(planner, graphs, d=1024, layers=4):
    """The most a step holds beyond what was resident before: with CUDA
    graphs, their pool's peak as the recording made it."""
    model = _model(d, layers)
    x = torch.randn(16, 512, d, device="cuda")
    _, run = _compiled(model, planner, graphs)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    for _ in range(4):  # warm-up, recording, replays
        _step(model, run, x, graphs=graphs)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


@pytest.mark.parametrize("graphs", [True, False])
def test_offload_lowers_the_peak(graphs):
    """Each release lets its value's memory go in the forward (inside the
    graphs' memory pool under CUDA graphs), each reload takes it back just
    before its use: offloading the four blocks' activations (128 MiB each
    for fc1's outputs and the GELU's) lowers the peak by more than a
    block's worth against keeping them."""
    kept = _graph_peak(_planner(lambda e: "retain"), graphs)
    offloaded = _graph_peak(offload_all, graphs)
    assert offloaded < kept - 4 * (128 << 20), (kept, offloaded)



def test_offloading_attention_outputs_under_cuda_graphs():
    """Every saved value of an attention stack offloaded, the attention's
    outputs among them (the outputs of one multi-output kernel, which
    crossed a graph partition's boundary into the copy ops when those ran
    between the graphs): the replayed steps give eager's numbers for a new
    input each step, and every value is released each step (Llama-8l
    offloading under CUDA graphs failed cudagraph trees' pool check,
    2026-11-28)."""
    from torch._dynamo.utils import counters
    from lethe import _offload_ops
    counters.clear()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Attention(256) for _ in range(3)]).cuda()
    xs = [torch.randn(4, 256, 256, device="cuda") for _ in range(6)]
    eager = [_step(model, model, x) for x in xs]

    def planner(doc, budget, policy, device, **options):
        return offload_all(doc, budget, policy, device, min_bytes=1 << 14)
    p, run = _compiled(model, planner)
    for i, x in enumerate(xs):
        loss, grads = _step(model, run, x, graphs=True)
        torch.cuda.synchronize()
        want_loss, want_grads = eager[i]
        assert torch.allclose(loss, want_loss, rtol=1e-4), f"step {i}"
        assert float((grads - want_grads).norm() / want_grads.norm()) \
            < 1e-4, f"step {i}"
        assert _offload_ops.held() == 0
    assert len(p.records[-1].offloaded) > 3
    assert counters["inductor"]["cudagraph_skips"] == 0

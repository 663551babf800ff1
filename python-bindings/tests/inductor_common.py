"""What the inductor tests share (test_torch_inductor.py,
test_calibration.py): torch >= 2.9 or the importing module is skipped, the
fixture that turns inductor's compile caches off, a small model and its
step, and a hand-made planner. CI imports it with torch 2.11 from PyPI
(scripts/test.sh)."""

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch.compile is missing (torch < 2)", allow_module_level=True)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import lethe  # noqa: E402
import lethe.torch as lt  # noqa: E402
from lethe import _inductor  # noqa: E402
from lethe._planclient import available  # noqa: E402

try:
    _inductor.require_inductor_hooks()
except RuntimeError as e:  # torch < 2.9
    pytest.skip(str(e), allow_module_level=True)

needs_lethe = pytest.mark.skipif(not available(),
                                 reason="Lethe's native library is not built")


@pytest.fixture(autouse=True)
def _no_compile_caches():
    """Each test plans afresh: inductor's FX-graph and AOT caches would
    replay an earlier test's compile of the same graph and partitioner key
    without calling the partitioner (test_cached_compile_... checks that)."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    with inductor_config.patch(fx_graph_cache=False), \
            functorch_config.patch(enable_autograd_cache=False):
        yield


class Block(nn.Module):
    """Pre-norm MLP block: a LayerNorm, two matmuls around a GELU and a
    residual add, the pattern whose pointwise chains inductor fuses."""

    def __init__(self, d=64):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))



class Attention(nn.Module):
    """A causal self-attention block on one fused q/k/v projection: q, k
    and v are views with gaps into its output, and
    scaled_dot_product_attention is one op of several outputs (the
    attention, its log-sum-exp, ...), which inductor runs as one extern
    kernel."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, -1) \
            .permute(2, 0, 3, 1, 4).unbind(0)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(o.transpose(1, 2).reshape(b, t, d))

class SwiGLU(nn.Module):
    """One matmul split in two halves (chunk): the backward reads the two
    views, min-cut saves the matmul's output they view."""

    def __init__(self, d=64, bias=False):
        super().__init__()
        self.up = nn.Linear(d, 4 * d, bias=bias)
        self.down = nn.Linear(2 * d, d, bias=bias)

    def forward(self, x):
        a, b = self.up(x).chunk(2, dim=-1)
        return x + self.down(F.silu(a) * b)


def _model(layers=3, d=64):
    torch.manual_seed(0)
    return nn.Sequential(*[Block(d) for _ in range(layers)])


def _step(model, run):
    torch.manual_seed(1)
    x = torch.randn(8, 32, 64)
    loss = run(x).pow(2).mean()
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    for p in model.parameters():
        p.grad = None
    return loss.detach(), grads


def _compile(model, partitioner):
    torch._dynamo.reset()
    return torch.compile(model, dynamic=False,
                         options={"custom_partitioner_fn": partitioner})


def _close(a, b):
    loss_a, grad_a = a
    loss_b, grad_b = b
    assert torch.allclose(loss_a, loss_b, rtol=1e-5, atol=1e-6)
    assert float((grad_a - grad_b).norm() / grad_b.norm()) < 1e-5


def _planner(kinds, by_output=False):
    """A hand-made planner: `kinds(entry)` (`kinds(entry, index)` with
    `by_output`) decides each saved value."""
    def plan(doc, budget, policy, device, **options):
        values = []
        for nid, index in doc["saved"]:
            entry = doc["nodes"][nid]
            if entry["kind"] == "op":
                decision = kinds(entry, index) if by_output \
                    else kinds(entry)
                values.append({"node": entry["name"], "result": index,
                               "decision": decision})
        return {"feasible": True, "policy": policy, "values": values,
                "peak_bytes": 0, "step_us": 0.0}
    return plan


def offload_all(doc, budget, policy, device, min_bytes=1 << 20,
                **options):
    """Offloads every saved value of `min_bytes` or more, released two
    forward ops after it and prefetched two backward ops before its first
    use (the points Lethe's planner gives)."""
    nodes = doc["nodes"]
    fwd = [e for e in nodes if e["kind"] == "op" and e["phase"] == "fwd"]
    bwd = [e for e in nodes if e["kind"] == "op" and e["phase"] == "bwd"]
    values = []
    for nid, index in doc["saved"]:
        e = nodes[nid]
        if e["kind"] != "op":
            continue
        d = {"node": e["name"], "result": index, "decision": "retain"}
        users = [k for k, b in enumerate(bwd) if [nid, index] in b["inputs"]]
        if e["outputs"][index]["bytes"] >= min_bytes and users:
            later = fwd[min(fwd.index(e) + 2, len(fwd) - 1)]
            d.update(decision="offload", placement={
                "release_after": later["name"],
                "prefetch_after": bwd[max(users[0] - 2, 0)]["name"]})
        values.append(d)
    return {"feasible": True, "policy": policy, "values": values,
            "peak_bytes": 0, "step_us": 0.0}


# --- the graph Lethe plans ------------------------------------------------

def _fused_doc(model):
    """The graph the partitioner builds for `model`'s step."""
    docs = []

    def record(doc, **kwargs):
        docs.append(doc)
        return _planner(lambda e: "retain")(doc, **kwargs)
    p = lt.partitioner(budget=None, planner=record)
    _step(model, _compile(model, p))
    return docs[0]

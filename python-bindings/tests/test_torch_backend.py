"""lethe.torch.backend on CPU (Debian's torch 1.13 in CI: functorch's
aot_module route; torch.compile where torch 2.x is installed).

The planned step must compute the same loss and gradients as the eager
step, bit for bit: recompute re-runs the same CPU kernels on the same
inputs, RNG ops (dropout) are never re-run, and offload copies are exact.
Two groups of tests: hand-made plans that push every activation one way
(the partition machinery, no planner needed), and Lethe's own plans at
several budgets (need the planner: the native library).
"""

import copy

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import lethe.torch as lt  # noqa: E402
from lethe import _offload  # noqa: E402
from lethe._planclient import available  # noqa: E402
from lethe._joint_graph import is_rng_op  # noqa: E402
from models import MLP, ConvNet, TinyLM, WideMLP  # noqa: E402

needs_lethe = pytest.mark.skipif(not available(),
                                 reason="Lethe's native library is not built")


def _tiny_lm(dropout):
    torch.manual_seed(0)
    model = TinyLM(vocab=64, dim=32, heads=4, layers=2, seq=16)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    tokens = torch.randint(0, 64, (2, 16))
    targets = torch.randint(0, 64, (2, 16))
    return model, tokens, lambda out: F.cross_entropy(
        out.reshape(-1, 64), targets.reshape(-1))


def _mlp():
    torch.manual_seed(0)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    return MLP(), x, lambda out: F.mse_loss(out, y)


def _convnet():
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    return ConvNet(), x, lambda out: F.cross_entropy(out, y)


def _wide():
    torch.manual_seed(0)
    x = torch.randn(256, 16)
    return WideMLP(), x, lambda out: out.pow(2).mean()


MODELS = {"lm": lambda: _tiny_lm(0.0), "lm_dropout": lambda: _tiny_lm(0.1),
          "mlp": _mlp, "convnet": _convnet, "wide": _wide}
UNIFORM = ["lm_dropout", "convnet", "wide"]


def _step(module, params, x, loss_fn, seed=1):
    """One step: the loss, every parameter's gradient, the buffers."""
    for p in params:
        p.grad = None
    torch.manual_seed(seed)
    loss = loss_fn(module(x))
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in params]


def _compiled_step(backend, model, x, loss_fn):
    """A step of `backend(model)` after a first, compiling call (torch 1.13
    traces with real tensors, drawing random numbers and updating buffers
    while it does): the loss, gradients and buffers of that step."""
    if hasattr(torch, "_dynamo"):  # torch 2.x: a fresh compile each time
        torch._dynamo.reset()
    wrapped = backend(model)
    params = list(model.parameters())
    state = copy.deepcopy(model.state_dict())
    _step(wrapped, params, x, loss_fn)
    model.load_state_dict(state)
    got = _step(wrapped, params, x, loss_fn)
    return got, [b.clone() for b in model.buffers()]


def _run(name, make_backend):
    """(eager loss, grads), (planned ...), the buffers after a step of the
    default partition and of the planned one, the backend."""
    model, x, loss_fn = MODELS[name]()
    reference = copy.deepcopy(model)
    twin = copy.deepcopy(model)
    ref = _step(reference, list(reference.parameters()), x, loss_fn)
    # Buffers (BatchNorm statistics) are compared with AOTAutograd's own
    # default partition: torch 1.13's aot_module does not update them as
    # eager does, with or without Lethe.
    _, ref_buffers = _compiled_step(
        lt.backend(planner=_uniform_planner("retain")), twin, x, loss_fn)
    backend = make_backend()
    got, buffers = _compiled_step(backend, model, x, loss_fn)
    return ref, got, ref_buffers, buffers, backend


def _assert_bitwise(ref, got, ref_buffers=(), buffers=()):
    assert torch.equal(ref[0], got[0]), (ref[0].item(), got[0].item())
    assert len(ref[1]) == len(got[1])
    for i, (a, b) in enumerate(zip(ref[1], got[1])):
        assert torch.equal(a, b), f"gradient {i} differs by " \
            f"{(a - b).abs().max().item()}"
    for a, b in zip(ref_buffers, buffers):
        assert torch.equal(a, b)


def _uniform_planner(kind):
    """A plan that gives every activation storage the same decision."""
    def planner(graph, budget, policy, device, **options):
        nodes = graph["nodes"]
        roots = set()
        for nid, index in graph["saved"]:
            while "alias" in nodes[nid]["outputs"][index]:
                out = nodes[nid]["outputs"][index]
                nid, index = nodes[nid]["inputs"][out["alias"]]
            if nodes[nid]["kind"] == "op":
                roots.add((nid, index))
        return {"feasible": True, "policy": f"all-{kind}", "decisions": [
            {"name": nodes[n]["name"], "result": i, "decision": kind}
            for n, i in sorted(roots)]}
    return planner


# --- the partition machinery, with hand-made plans -----------------------

@pytest.mark.parametrize("name", UNIFORM)
@pytest.mark.parametrize("kind", ["retain", "recompute", "offload"])
def test_uniform_plans_are_bitwise_exact(name, kind):
    _offload.stats.update(d2h_bytes=0, h2d_bytes=0, d2h_copies=0,
                          h2d_copies=0)
    ref, got, ref_buffers, buffers, backend = _run(
        name, lambda: lt.backend(planner=_uniform_planner(kind),
                                 offload=kind == "offload"))
    _assert_bitwise(ref, got, ref_buffers, buffers)
    (record,) = backend.plans
    info = record.info
    if kind == "recompute":
        assert info.recomputed, "nothing was re-run"
        rng = [n for n in info.recomputed
               if any(is_rng_op(e["op"]) for e in record.graph["nodes"]
                      if e["name"] == n)]
        assert not rng, f"RNG ops re-run in the backward: {rng}"
    elif kind == "offload":
        assert info.offloaded
        # CPU stand-in copies: every offloaded value went out and came back
        # once per step (two steps ran).
        assert _offload.stats["d2h_copies"] == 2 * len(info.offloaded)
        assert _offload.stats["h2d_copies"] == 2 * len(info.offloaded)
    else:
        assert not info.recomputed and not info.offloaded


def test_recompute_saves_less_and_runs_just_in_time():
    _, _, _, _, keep = _run("lm", lambda: lt.backend(
        planner=_uniform_planner("retain")))
    _, _, _, _, redo = _run("lm", lambda: lt.backend(
        planner=_uniform_planner("recompute")))
    assert len(redo.plans[0].info.saved) < len(keep.plans[0].info.saved)


def test_dropout_masks_are_saved_not_redrawn():
    _, _, _, _, backend = _run("lm_dropout", lambda: lt.backend(
        planner=_uniform_planner("recompute")))
    graph = backend.plans[0].graph
    rng_names = {e["name"] for e in graph["nodes"] if is_rng_op(e["op"])}
    assert rng_names, "the model has no dropout in its graph"
    assert not rng_names & set(backend.plans[0].info.recomputed)


def test_offload_is_retain_on_cpu_by_default():
    _, _, _, _, backend = _run("mlp", lambda: lt.backend(
        planner=_uniform_planner("offload")))
    assert not backend.plans[0].info.offloaded


def test_bad_arguments():
    with pytest.raises(ValueError, match="prefetch"):
        lt.backend(prefetch="never")
    with pytest.raises(ValueError, match="offload"):
        lt.backend(offload="sometimes")
    with pytest.raises(TypeError):
        lt.backend()(lambda x: x)


@needs_lethe
def test_policy_default_is_the_pass_option():
    """The torch front ends state no planning default of their own: policy
    None is the lethe-plan pass's (lethePlanOptionDefaults, Passes.td), as
    lethe.plan's keywords and device=None are."""
    import inspect
    from lethe import _native
    for front in (lt.backend, lt.Backend, lt.partitioner):
        assert inspect.signature(front).parameters["policy"].default is None
    assert lt.backend().policy == _native.plan_option_defaults()["policy"]
    assert lt.backend(policy="full").policy == "full"


def _infeasible(fn):
    """The InfeasibleBudgetError `fn` raises (torch.compile wraps what a
    backend raises in BackendCompilerFailed; the cause is ours)."""
    with pytest.raises(Exception) as error:
        fn()
    e = error.value
    while e is not None and not isinstance(e, lt.InfeasibleBudgetError):
        e = e.__cause__ or e.__context__
    assert e is not None, f"not an InfeasibleBudgetError: {error.value!r}"
    return e


def test_infeasible_plan_raises():
    def planner(graph, **kwargs):
        return {"feasible": False, "least_feasible_budget": 123456,
                "decisions": []}
    e = _infeasible(lambda: _run("mlp", lambda: lt.backend(
        budget="1%", planner=planner)))
    assert "123456" in str(e) and e.least_feasible_budget == 123456


def test_a_share_of_a_graph_with_nothing_to_lower_is_planned_as_is():
    # The planner says the share cannot be met and that the least is the
    # unplanned peak: no decision moves it, so the share cannot apply to
    # this graph. It is planned at its least, with a warning, not raised
    # (a graph break's fragment must not stop the step).
    budgets = []

    def planner(graph, budget=None, **kwargs):
        budgets.append(budget)
        if budget.endswith("%"):
            return {"feasible": False, "least_feasible_budget": 4096,
                    "baseline_peak_bytes": 4096, "decisions": []}
        return {"feasible": True, "budget_bytes": 4096, "peak_bytes": 4096,
                "baseline_peak_bytes": 4096, "decisions": []}
    with pytest.warns(UserWarning, match="no activation Lethe can lower"):
        ref, got, ref_buffers, buffers, backend = _run(
            "mlp", lambda: lt.backend(budget="50%", planner=planner))
    _assert_bitwise(ref, got, ref_buffers, buffers)
    assert budgets == ["50%", "4096"]


# --- Lethe's plans -------------------------------------------------------

@needs_lethe
@pytest.mark.parametrize("name,budget", [
    ("wide", "100%"), ("wide", "50%"), ("wide", "30%"),
    ("lm_dropout", "100%"), ("lm_dropout", "80%"), ("convnet", "80%")])
def test_lethe_plans_are_bitwise_exact(name, budget):
    ref, got, ref_buffers, buffers, backend = _run(
        name, lambda: lt.backend(budget=budget, policy="auto"))
    _assert_bitwise(ref, got, ref_buffers, buffers)
    (record,) = backend.plans
    plan = record.plan
    assert plan.feasible
    assert plan.peak_bytes <= plan.budget_bytes
    assert not record.info.retained_instead, record.info.retained_instead
    if budget != "100%":
        assert record.info.recomputed, "a smaller budget recomputes"
    else:
        assert not record.info.recomputed


@needs_lethe
@pytest.mark.parametrize("policy", ["full", "every-n", "selective-op"])
def test_lethe_policies_run(policy):
    ref, got, _, _, backend = _run(
        "wide", lambda: lt.backend(budget=None, policy=policy))
    _assert_bitwise(ref, got)
    assert backend.plans[0].plan.feasible


@needs_lethe
def test_lethe_infeasible_budget_raises():
    # The LM's least budget is about 60% of its unplanned peak on CPU (no
    # offload): recompute chains stop at dropout masks and layer inputs.
    e = _infeasible(lambda: _run("lm", lambda: lt.backend(budget="30%",
                                                        policy="auto")))
    assert "below what policy 'auto' can meet" in str(e)  # either route
    # A share budget is answered with a share (and the bytes it comes to).
    assert e.least_feasible_budget > 0 and e.least_share.endswith("%")
    assert f'pass budget="{e.least_share}"' in str(e)
    assert f"{e.least_feasible_budget} B" in str(e)


def test_module_paths_name_layers_in_dynamos_spellings():
    from lethe._joint_graph import normalize_module_path as norm
    assert norm("L['self'].model.layers[0]._modules['attn']") == \
        "layers.0.attn"
    # transformers 5 wraps an HF model's forward: dynamo sees the model as
    # the first positional argument (measured: Llama, torch 2.11). Its
    # index is not a layer number.
    assert norm("L['args'][0].model.layers[1].self_attn") == \
        "layers.1.self_attn"
    assert norm("L['args'][0].lm_head") == "lm_head"
    assert norm("L['args'][0]") is None


def test_offload_buffers_keep_the_dimension_order():
    # A transposed (dense, permuted) tensor must come back with its strides,
    # and a sliced one with dense strides in its order: the backward
    # re-derives views (transpose, then view) from the copy.
    for t in (torch.randn(2, 3, 4).transpose(1, 2),
              torch.randn(2, 3, 4).permute(2, 0, 1),
              torch.randn(2, 8, 12)[..., :4]):
        handle = _offload.d2h_start(t)
        back = _offload.h2d_wait(_offload.h2d_start(_offload.host_of(handle),
                                                    "cpu"))
        assert torch.equal(back, t)
        order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
        assert sorted(range(back.dim()), key=lambda d: -back.stride(d)) == order
    merged = torch.randn(2, 4, 3, 5).transpose(1, 2)  # (2, 3, 4, 5) view
    back = _offload.h2d_wait(_offload.h2d_start(
        _offload.host_of(_offload.d2h_start(merged)), "cpu"))
    back.transpose(1, 2).view(2, 4, 15)  # valid on the original layout


# --- fused attention: seeded ops that draw nothing without dropout --------

class _SdpaBlock(torch.nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 4)
        self.dropout = dropout

    def forward(self, x):
        q, k, v = (t.view(2, 8, 2, 8).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout,
                                           is_causal=True)
        return self.out(y.transpose(1, 2).reshape(2, 8, 16))


@pytest.mark.skipif(not hasattr(F, "scaled_dot_product_attention")
                    or not hasattr(torch, "compile"),
                    reason="needs torch 2.x")
@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_attention_recomputed_only_without_dropout(dropout):
    """SDPA kernels carry the nondeterministic_seeded tag; with dropout_p 0
    they draw nothing and re-run exactly (Lethe plans them so). With
    dropout (on CPU: the math route, a native_dropout) the random op's
    results stay saved."""
    torch.manual_seed(0)
    model = _SdpaBlock(dropout)
    x, y = torch.randn(2, 8, 16), torch.randn(2, 8, 4)

    def loss_fn(out):
        return F.mse_loss(out, y)
    reference = copy.deepcopy(model)
    ref = _step(reference, list(reference.parameters()), x, loss_fn)
    backend = lt.backend(planner=_uniform_planner("recompute"))
    got, _ = _compiled_step(backend, model, x, loss_fn)
    info = backend.plans[-1].info
    attention = [n for n in info.recomputed if "scaled_dot_product" in n]
    kept = [n for n, why in info.retained_instead
            if "scaled_dot_product" in n]
    rng_kept = [n for n, why in info.retained_instead if "RNG" in why]
    if dropout == 0:
        assert attention and not kept and not rng_kept
    else:
        assert rng_kept
    _assert_bitwise(ref, got)

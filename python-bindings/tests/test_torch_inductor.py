"""Lethe as inductor's partitioner, on CPU (torch >= 2.9; CI runs this file
in a virtual environment with torch 2.11 from PyPI, scripts/test.sh).

Inductor's CPU backend compiles the same partitioned graphs it would
compile for a GPU (C++ kernels instead of Triton), so the plan → tags →
min-cut → offload-ops route is exercised whole; the offload ops run their
CPU stand-in (synchronous clones).
"""

import json
import os
import warnings

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


def _model(layers=3):
    torch.manual_seed(0)
    return nn.Sequential(*[Block() for _ in range(layers)])


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


def _planner(kinds):
    """A hand-made planner: `kinds(entry)` decides each saved value."""
    def plan(doc, budget, policy, device, **options):
        values = []
        for nid, index in doc["saved"]:
            entry = doc["nodes"][nid]
            if entry["kind"] == "op":
                values.append({"node": entry["name"], "result": index,
                               "decision": kinds(entry)})
        return {"feasible": True, "policy": policy, "values": values,
                "peak_bytes": 0, "step_us": 0.0}
    return plan


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


def test_pointwise_chains_are_virtual_and_matmuls_materialize():
    doc = _fused_doc(_model(1))
    ops = {e["name"]: e for e in doc["nodes"] if e["kind"] == "op"}
    kinds = {e["op"] for e in ops.values()}
    # The GELU's erf / mul chain never reaches memory: no such node.
    assert not any("erf" in k for k in kinds), kinds
    # The matmuls do, and the backward reads their outputs.
    saved_ops = {doc["nodes"][n]["op"] for n, _ in doc["saved"]}
    assert "aten.addmm.default" in saved_ops
    # The backward re-runs the GELU inline: some backward node reads the
    # first matmul's output directly, through the inlined chain.
    assert any(e["phase"] == "bwd" and e.get("inlined") for e in ops.values())
    # Every node is named by its FX name: unique, so plans can refer to it.
    names = [e["name"] for e in doc["nodes"] if e["kind"] != "output"]
    assert len(names) == len(set(names))


@needs_lethe
def test_fused_graph_loads_and_plans_in_lethe():
    doc = _fused_doc(_model(2))
    plan = lethe.plan(doc, budget="80%", device="h100")
    assert plan.feasible
    assert plan.peak_bytes <= plan.budget_bytes


# --- the partition -----------------------------------------------------------

@needs_lethe
@pytest.mark.parametrize("budget", [None, "70%"])
def test_lethe_plans_run_with_the_same_numbers_as_eager(budget):
    model = _model()
    eager = _step(model, model)
    p = lt.partitioner(budget=budget, device="h100")
    got = _step(model, _compile(model, p))
    _close(got, eager)
    (record,) = p.records
    assert record.plan.feasible
    if budget is not None:
        assert record.plan.peak_bytes <= record.plan.budget_bytes
    # This model's plan is what min-cut saved, value for value.
    assert record.mismatches == []
    summary = record.summary()
    assert summary["saved"] == len(record.saved) > 0
    # The calibration's host time an op needs the ops without a dump.
    assert record.graph is None and record.ops > 0


@needs_lethe
def test_backend_compiles_with_inductor_and_lower_budget_saves_less():
    model = _model()
    eager = _step(model, model)
    saved = {}
    for budget in (None, "60%"):
        b = lt.backend(budget=budget, device="h100")
        assert b.compiler == "inductor"
        torch._dynamo.reset()
        _close(_step(model, b(model)), eager)
        saved[budget] = sum(1 for _ in b.plans[-1].saved)
        assert b.plans[-1].plan.counts["recompute"] >= 0
    assert saved["60%"] <= saved[None]


class DropoutBlock(Block):
    """Block with dropout after the GELU: inductor draws the mask from a
    seed (prims.inductor_random) inside the kernels that read it."""

    def forward(self, x):
        h = F.dropout(F.gelu(self.fc1(self.norm(x))), 0.25, self.training)
        return x + self.fc2(h)


@needs_lethe
def test_dropout_masks_are_regenerated_from_their_seeds():
    """No float32 tensor of random numbers is a value to keep (on T5 Lethe
    kept 64 of them, 2.5 GB, and its least stayed above min-cut's peak):
    the backward regenerates each mask from its seed, the seed drawn once,
    so the numbers are plain compile's, which saves the masks instead."""
    torch.manual_seed(0)
    model = nn.Sequential(*[DropoutBlock() for _ in range(3)])
    torch._dynamo.reset()
    compiled = _step(model, torch.compile(model, dynamic=False))
    p = lt.partitioner(budget="60%", device="h100")
    got = _step(model, _compile(model, p))
    # A seed drawn again in the backward would give other masks: gradients
    # far apart, not within rounding.
    _close(got, compiled)
    (record,) = p.records
    assert record.plan.feasible
    names = [v["name"] for v in record.plan.document["values"]]
    assert not any("inductor_random" in n for n in names), names
    assert not any("inductor_random" in n for n in record.saved), \
        record.saved
    assert record.mismatches == []


class SwiGLU(nn.Module):
    """One matmul split in two halves (chunk): the backward reads the two
    views, min-cut saves the matmul's output they view."""

    def __init__(self, d=64):
        super().__init__()
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        a, b = self.up(x).chunk(2, dim=-1)
        return x + self.down(F.silu(a) * b)


@needs_lethe
def test_a_saved_base_of_planned_views_is_no_mismatch():
    torch.manual_seed(0)
    model = nn.Sequential(SwiGLU(), SwiGLU())
    eager = _step(model, model)
    p = lt.partitioner(budget=None, device="h100")
    _close(_step(model, _compile(model, p)), eager)
    assert p.records[-1].mismatches == []


def test_decisions_become_checkpoint_tags_honoured_by_min_cut():
    """Retain every matmul, recompute the rest: min-cut saves exactly the
    matmul outputs (and inputs), and the step's numbers do not change."""
    model = _model()
    eager = _step(model, model)
    p = lt.partitioner(budget=None, planner=_planner(
        lambda e: "retain" if "mm" in e["op"] else "recompute"))
    _close(_step(model, _compile(model, p)), eager)
    (record,) = p.records
    assert record.mismatches == []


def test_offloaded_values_travel_through_the_lethe_ops():
    from lethe import _offload_ops
    model = _model()
    eager = _step(model, model)
    p = lt.partitioner(budget=None, offload=True, planner=_planner(
        lambda e: "offload" if e["op"] == "aten.addmm.default"
        else "retain"))
    before = dict(_offload_ops.stats)
    # Inductor must not hand an offloaded buffer to a later kernel while
    # the copy may still read it: without allow_buffer_reuse=False, refused.
    with pytest.raises(Exception, match="allow_buffer_reuse=False"):
        _step(model, _compile(model, p))
    torch._dynamo.reset()
    run = torch.compile(model, dynamic=False, options={
        "custom_partitioner_fn": p, "allow_buffer_reuse": False})
    _close(_step(model, run), eager)
    record = p.records[-1]
    assert record.offloaded, "no matmul output was offloaded"
    copies = _offload_ops.stats["d2h_copies"] - before["d2h_copies"]
    reloads = _offload_ops.stats["h2d_copies"] - before["h2d_copies"]
    assert copies == reloads == len(record.offloaded)


def test_offload_is_off_by_default_under_inductor():
    p = lt.backend(budget=None)
    assert p.partitioner.offload is False


# --- errors and cache keys -------------------------------------------------

def test_budget_forms():
    norm = _inductor.normalize_budget
    assert norm(0.5) == "50%"
    assert norm("12GiB") == "12GiB"
    assert norm(1 << 30) == str(1 << 30)
    assert norm(None) is None
    with pytest.raises(ValueError, match="would be 1 bytes"):
        norm(1)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        norm(1.5)
    with pytest.raises(TypeError):
        norm(True)


def test_uuid_keys_the_budget_policy_and_costs():
    a = lt.partitioner(budget="50%", device="h100")
    assert a.uuid() == lt.partitioner(budget="50%", device="h100").uuid()
    assert a.uuid() != lt.partitioner(budget="40%", device="h100").uuid()
    assert a.uuid() != lt.partitioner(budget="50%", device="h200").uuid()
    assert a.uuid() != lt.partitioner(budget="50%", policy="full",
                                      device="h100").uuid()
    assert a.uuid() != lt.partitioner(budget="50%", device="h100",
                                      costs={"addmm": 3.0}).uuid()
    b = lt.partitioner(budget="50%", device="h100")
    b.set_host_launch(25.0)  # the calibration's host time an op
    assert a.uuid() != b.uuid()
    with pytest.raises(ValueError, match="host_us"):
        b.set_host_launch(0.0)


def test_host_launch_profile_sets_the_hosts_time_an_op(tmp_path,
                                                       monkeypatch):
    # The calibration's host time an op goes to the simulator through the
    # profile's host_launch_us (the simulator starts no op before the host
    # has issued all before it); the rest of the profile is the base's.
    import json
    from lethe import _measure
    monkeypatch.setenv("LETHE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_measure, "cache_dir", lambda: str(tmp_path))
    path = _measure.host_launch_profile("h100", 25.0)
    with open(path) as f:
        profile = json.load(f)
    base = _measure._load_profile("h100")
    assert profile["host_launch_us"] == 25.0 != base["host_launch_us"]
    assert profile["hbm_gb_per_s"] == base["hbm_gb_per_s"]
    assert "25.00 us an op" in profile["notes"]["host_launch_us"]


@needs_lethe
def test_cached_compile_replays_only_for_the_same_key(monkeypatch,
                                                      tmp_path):
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    model = _model(1)

    def partition(budget):
        p = lt.partitioner(budget=budget, device="h100")
        with inductor_config.patch(fx_graph_cache=True), \
                functorch_config.patch(enable_autograd_cache=True):
            _step(model, _compile(model, p))
        return len(p.records)
    assert partition(None) == 1
    # The same Lethe, budget and planner: the cache replays the compile
    # without planning again; another budget is another key.
    assert partition(None) == 0
    assert partition(str(1 << 30)) == 1
    first = lt.partitioner(budget=None, planner=None).uuid()
    assert first != lt.partitioner(budget="50%").uuid()


def test_dynamic_shapes_are_refused_with_a_clear_message():
    model = _model(1)
    p = lt.partitioner(budget=None, planner=_planner(lambda e: "retain"))
    torch._dynamo.reset()
    run = torch.compile(model, dynamic=True,
                        options={"custom_partitioner_fn": p})
    with pytest.raises(Exception, match="dynamic shape.*dynamic=False") as e:
        run(torch.randn(8, 32, 64)).sum().backward()
    # Dynamo wraps it; the cause is Lethe's, in Lethe's one hierarchy.
    cause = e.value
    while cause is not None and not isinstance(cause, lt.PlanGraphError):
        cause = cause.__cause__ or cause.__context__
    assert isinstance(cause, lethe.LetheError)


def test_user_checkpointing_is_replanned_with_a_warning():
    from torch.utils.checkpoint import checkpoint
    model = _model(2)

    class Wrapped(nn.Module):
        def forward(self, x):
            for block in model:
                x = checkpoint(block, x, use_reentrant=False)
            return x
    eager = _step(model, model)
    p = lt.partitioner(budget=None, planner=_planner(lambda e: "retain"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _step(model, _compile(Wrapped(), p))
    _close(got, eager)
    assert any("Lethe's plan replaces them" in str(w.message)
               for w in caught)
    assert p.records[0].notes


@needs_lethe
def test_infeasible_budget_names_the_least_one():
    model = _model(2)
    p = lt.partitioner(budget="1%", device="h100")
    with pytest.raises(Exception) as info:
        _step(model, _compile(model, p))
    chain, e = [], info.value
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    errors = [x for x in chain if isinstance(x, lethe.InfeasibleBudgetError)]
    assert errors and errors[0].least_feasible_budget > 0


@needs_lethe
def test_calibration_moves_the_planning_budget_by_the_error():
    model = _model()
    b = lt.backend(budget=str(4 << 20), device="h100")
    torch._dynamo.reset()
    _step(model, b(model))
    predicted = b.plans[-1].plan.peak_bytes
    correction = b.calibrate(predicted - (1 << 20))
    assert correction == 1 << 20
    assert b.partitioner._planning_budget() == str((4 << 20) + (1 << 20))
    with pytest.raises(ValueError, match="budget in bytes"):
        lt.partitioner(budget="50%", peak_correction=5)


def test_eager_compiler_is_still_there():
    b = lt.backend(budget=None, compiler="eager")
    assert b.compiler == "eager"
    with pytest.raises(ValueError, match="compiler"):
        lt.backend(budget=None, compiler="tvm")
    json.dumps(b.budget)  # the budget text is plain data


# --- measured costs (lethe._measure) ------------------------------------------

@needs_lethe
def test_measured_costs_time_the_unfused_ops_and_are_cached(monkeypatch,
                                                            tmp_path):
    """costs="measured" times every planned value inductor runs as a
    library kernel (here the matmuls) on this device, keeps what inductor
    generates (pointwise chains, the layer norms' reductions) on the
    model, and caches the
    times per op signature: the three identical blocks share their times,
    and a recompile measures nothing."""
    from torch._subclasses.fake_tensor import FakeTensor
    from lethe import _measure
    monkeypatch.setenv("LETHE_CACHE_DIR", str(tmp_path))
    timed_fake = []
    median_us = _measure._median_us

    def checked(fn, device):
        # The partitioner runs under inductor's fake mode: a measurement
        # that ran on fake tensors would time Python, not a kernel.
        timed_fake.append(isinstance(fn(), FakeTensor))
        return median_us(fn, device)

    monkeypatch.setattr(_measure, "_median_us", checked)
    model = _model()
    eager = _step(model, model)
    p = lt.partitioner(budget="70%", device="h100", costs="measured",
                       dump_dir=str(tmp_path / "dump"))
    _close(_step(model, _compile(model, p)), eager)
    (record,) = p.records
    m = record.measured
    assert m["timed_nodes"] > 0 and m["failed"] == 0
    assert timed_fake and not any(timed_fake)
    # Identical layers: fewer distinct measurements than timed nodes.
    assert 0 < m["new_measurements"] < m["timed_nodes"]
    graph = json.loads((tmp_path / "dump" / "graph0.json").read_text())
    timed = {e["op"] for e in graph["nodes"] if e.get("time_us") is not None}
    assert "aten.mm.default" in timed or "aten.addmm.default" in timed
    assert not any(e.get("time_us") is not None and e["op"] in (
        "aten.gelu.default", "aten.add.Tensor", "aten.mul.Tensor",
        "aten.sum.dim_IntList", "aten.mean.dim", "aten.var_mean.correction")
        for e in graph["nodes"])
    (cache,) = tmp_path.glob("costs-*.json")
    assert json.loads(cache.read_text())["ops"]
    # A new partitioner (a new process, say) replans from the cache.
    q = lt.partitioner(budget="70%", device="h100", costs="measured")
    _step(model, _compile(model, q))
    assert q.records[-1].measured["new_measurements"] == 0
    assert q.records[-1].measured["timed_nodes"] == m["timed_nodes"]


def test_costs_mode_is_checked_and_keys_the_cache():
    with pytest.raises(ValueError, match="costs must be"):
        lt.partitioner(budget="50%", device="h100", costs="profiled")
    model = lt.partitioner(budget="50%", device="h100", costs="model")
    measured = lt.partitioner(budget="50%", device="h100", costs="measured")
    assert model.uuid() != measured.uuid()


def test_measured_profile_overlays_this_devices_rates(tmp_path):
    """On a GPU the host-copy and memory rates come from this device; the
    rest of the named profile stays."""
    from lethe._measure import CostTable, measured_profile
    table = CostTable(torch.device("cpu"), str(tmp_path))
    assert measured_profile("h100", table) == "h100"  # CPU: nothing to do
    table.rates = {"d2h_gb_per_s": 20.0, "h2d_gb_per_s": 25.0,
                   "duplex_factor": 0.7, "hbm_gb_per_s": 1000.0}
    table.device = torch.device("cuda")  # as if measured on a GPU
    path = measured_profile("h100", table)
    profile = json.loads(open(path).read())
    assert profile["d2h_gb_per_s"] == 20.0
    assert profile["name"] == "h100-measured"
    assert profile["peak_tflops"]["bf16"] > 0  # from devices/h100.json
    assert "measured in-process" in profile["notes"]["h2d_gb_per_s"]
    plan = lethe.plan(_fused_doc(_model(2)), budget="80%", device=path)
    assert plan.feasible


# --- calibration against the compiled step --------------------------------

def _correction(peak, step_ms, **kw):
    from lethe._calibrate import Measurement, correction
    args = dict(predicted_peak=1000, predicted_step_us=10000.0,
                library_us=4000.0, budget_bytes=1000, byte_budget=True,
                peak_correction=0, time_scale=1.0)
    args.update(kw)
    return correction(Measurement(peak, step_ms), **args)


def test_calibration_corrects_a_peak_over_the_budget_and_an_unused_one():
    over = _correction(1100, 10.0)
    assert over.replan and over.peak_correction == -100
    assert over.time_scale == 1.0  # the step matched its prediction
    unused = _correction(800, 10.0)  # the plan was at its budget
    assert unused.replan and unused.peak_correction == 200
    # A plan the budget did not constrain: its low peak is no error.
    free = _correction(500, 10.0, predicted_peak=600)
    assert not free.replan and free.peak_correction == 0
    # A share budget is never moved by bytes: the error is only said.
    share = _correction(1100, 10.0, byte_budget=False)
    assert not share.replan and "share budget" in share.reasons[0]


def test_calibration_scales_only_the_modelled_kernels():
    # Predicted 10 ms of which 4 ms measured library kernels; measured 7 ms:
    # the modelled 6 ms took 3 ms.
    fast = _correction(1000, 7.0)
    assert fast.replan and abs(fast.time_scale - 0.5) < 1e-9
    # Within the tolerance: no re-plan for noise.
    assert not _correction(1000, 10.3).replan
    # Composes with the scale the plan was made with; bounded.
    again = _correction(1000, 7.0, time_scale=0.5)
    assert abs(again.time_scale - 0.25) < 1e-9
    assert _correction(1000, 1e6).time_scale == 5.0


def test_scaled_profile_slows_modelled_kernels_only(tmp_path, monkeypatch):
    from lethe._measure import scaled_profile
    monkeypatch.setenv("LETHE_CACHE_DIR", str(tmp_path))
    base = json.load(open(os.path.join(
        os.path.dirname(lethe.__file__), "devices", "h100.json")))
    path = scaled_profile("h100", 2.0)
    scaled = json.load(open(path))
    assert scaled["hbm_gb_per_s"] == base["hbm_gb_per_s"] / 2
    assert scaled["launch_overhead_us"] == base["launch_overhead_us"] * 2
    assert scaled["peak_tflops"]["bf16"] == base["peak_tflops"]["bf16"] / 2
    assert scaled["d2h_gb_per_s"] == base["d2h_gb_per_s"]  # copies measured
    assert scaled_profile("h100", 1.0) == "h100"
    # The planner reads it: a graph priced by the model is predicted slower.
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "graphs",
                           "graph_gpt2.json")) as f:
        g = json.load(f)
    for e in g["nodes"]:
        e.pop("time_us", None)
    if available():
        assert lethe.plan(g, budget=None, device=path).step_us > \
            lethe.plan(g, budget=None, device="h100").step_us


@needs_lethe
def test_backend_calibrates_after_a_warm_step_and_replans_once(monkeypatch):
    # Without kernel provenance (a torch that lacks it): the model's
    # kernels are scaled by the measured error.
    from lethe import _kernel_times
    monkeypatch.setattr(_kernel_times, "supported", lambda: False)
    model = _model()
    ref = _step(model, model)
    torch._dynamo.reset()
    b = lt.backend(budget=str(4 << 20), device="h100", calibrate=True)
    run = b(model)
    # Compile; warm; measure 3; the old plan (its forward was looked up
    # before the hook re-planned); recompile; warm; measure 3; report.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for i in range(12):
            _close(_step(model, run), ref)
            if i == 9:
                assert "after" not in b.calibration  # one step short
    # The recompile is the same frame, not a graph break.
    assert not [w for w in seen if "each compiled graph" in str(w.message)]
    c = b.calibration
    assert len(c["attempts"]) == 2
    assert all(len(a["steps_ms"]) == 3 for a in c["attempts"])
    # On the CPU the step is far from the H100's predicted time: the
    # modelled kernels are scaled (to the bound) and the graph re-planned
    # once, with the same numbers.
    assert c["measured"]["peak_bytes"] is None  # no CUDA memory stats
    assert c["replanned"] and c["time_scale"] == 5.0
    assert b.partitioner.time_scale == 5.0 and b.partitioner.compiles == 2
    assert c["after"]["predicted_step_ms"] > c["predicted"]["step_ms"]
    with pytest.raises(ValueError, match="calibrate must be"):
        lt.backend(calibrate="yes")


@needs_lethe
def test_calibration_prices_generated_kernels_by_a_profiled_step():
    # The warm step after the compile runs under torch.profiler; the
    # kernels inductor generated (C++ here, Triton on a GPU) are matched to
    # the call sites inductor recorded while compiling and their times
    # given to the planned values they compute. The re-plan prices those
    # values by them instead of scaling the model.
    from lethe import _kernel_times
    if not _kernel_times.supported():
        pytest.skip("this torch records no kernel provenance")
    model = _model()
    ref = _step(model, model)
    torch._dynamo.reset()
    b = lt.backend(budget=str(4 << 20), device="h100", calibrate=True)
    run = b(model)
    for _ in range(12):
        _close(_step(model, run), ref)
    c = b.calibration
    first = c["profiles"][0]
    # Every generated kernel of the forward and the backward was found in
    # the profile, and most of their time went to planned values.
    assert first["kernels"] > 0 and first["profiled_nodes"] > 0
    assert first["attributed_ms"] + first["recompute_ms"] \
        + first["unattributed_ms"] == pytest.approx(first["kernel_ms"],
                                                    abs=2e-3)
    assert first["attributed_ms"] > 0.5 * first["kernel_ms"]
    # Re-planned once with the profiled times and no scale.
    assert c["replanned"] and c["time_scale"] == 1.0
    assert c["profiled_nodes"] >= first["profiled_nodes"]
    p = b.partitioner
    assert p.time_scale == 1.0 and p.compiles == 2
    assert len(p.profiled) == c["profiled_nodes"]
    assert p.records[-1].measured["profiled_nodes"] == len(p.profiled)
    assert "priced by their kernels" in " ".join(c["reasons"])


@needs_lethe
def test_a_budget_below_the_models_least_runs_the_least_once_to_measure():
    # Calibrating on CUDA, a byte budget under the model's least is planned
    # at that least for one step (the model's peak of a compiled step is an
    # estimate), marked provisional; without calibration it is an error
    # that names the graph and the budget that works.
    model = _model(2)
    p = lt.partitioner(budget=str(1 << 20), device="h100")
    p.allow_provisional = True
    with pytest.warns(UserWarning, match="running that plan for one step"):
        _step(model, _compile(model, p))
    r = p.records[-1]
    assert r.provisional and r.plan.feasible
    assert r.plan.budget_bytes > 1 << 20
    fix = _correction(r.plan.peak_bytes - 100, 1.0,
                      predicted_peak=r.plan.peak_bytes,
                      budget_bytes=1 << 20, provisional=True)
    assert fix.replan and fix.peak_correction == 100
    p = lt.partitioner(budget=str(1 << 20), device="h100")
    with pytest.raises(Exception) as info:
        _step(model, _compile(model, p))
    message = str(info.value)
    assert "compiled graph" in message and "pass budget=" in message


class _Broken(nn.Module):
    """Two blocks with a graph break between them: two dynamo frames."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = Block(), Block()

    def forward(self, x):
        x = self.a(x)
        torch._dynamo.graph_break()
        return self.b(x)


@needs_lethe
def test_a_byte_budget_over_a_graph_break_is_said_once():
    # Each graph is planned to the whole byte budget; after a break the
    # first graph's saved activations are live while the second runs.
    model = _Broken()
    p = lt.partitioner(budget=str(64 << 20), device="h100")
    with pytest.warns(UserWarning, match="applies to each compiled graph"):
        _step(model, _compile(model, p))
    assert len(p._frames) == 2
    # A share of the peak is a share of each graph's own peak: no warning
    # (one block alone cannot go much below its peak).
    p = lt.partitioner(budget="100%", device="h100")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _step(model, _compile(model, p))
    assert len(p._frames) == 2
    assert not [w for w in seen if "each compiled graph" in str(w.message)]


class _FakePartitioner:
    """What the Calibrator reads of a LethePartitioner: each compile makes
    a record whose predicted peak follows `plan_peak(correction)`."""

    def __init__(self, plan_peak, least=None):
        self.plan_peak = plan_peak
        self.least = least  # the model's least planning budget
        self.compiles, self.records = 0, []
        self.peak_correction, self.time_scale = 0, 1.0
        self.allow_provisional = False
        self.offload = False
        self.offloads = []  # what a plan offloads while offload is on
        self.host_launch_us = None
        self.ops = 100  # the planned graph's ops

    def set_host_launch(self, us):
        self.host_launch_us = us

    def set_peak_correction(self, c):
        self.peak_correction = c

    def set_time_scale(self, s):
        self.time_scale = s

    def compile(self):
        from types import SimpleNamespace
        c, provisional = self.peak_correction, False
        if self.least is not None and 1000 + c < self.least:
            if not self.allow_provisional:
                raise RuntimeError("InfeasibleBudgetError")
            c, provisional = self.least - 1000, True
        plan = SimpleNamespace(peak_bytes=self.plan_peak(c),
                               step_us=10000.0, budget_bytes=1000,
                               decisions=[])
        self.records.append(SimpleNamespace(
            plan=plan, provisional=provisional, measured={"library_us": 0.0},
            graph=None, ops=self.ops,
            offloaded=list(self.offloads) if self.offload else []))
        self.compiles += 1


def _calibrator(monkeypatch, plan_peak, least=None, provisional=False,
                offloads=()):
    from types import SimpleNamespace
    from lethe import _calibrate
    p = _FakePartitioner(plan_peak, least)
    if offloads:
        p.offload, p.offloads = "auto", list(offloads)
    p.allow_provisional = provisional
    backend = SimpleNamespace(budget="1000", partitioner=p, calibration={},
                              calibrated_plan=None)
    # A recompile plans with the partitioner's settings at that moment: the
    # module's "context" names the plan those settings make ("first plan"
    # for the first plan's: a revert compiles it again).
    names = {}

    def settings(p):
        return (p.peak_correction, p.time_scale, p.offload,
                len(getattr(p, "profiled", None) or {}), p.host_launch_us)

    def recompile(c, b):
        key = settings(b.partitioner)
        c.dynamo_ctx = names.setdefault(key, f"plan {len(names) + 1}")
    names[settings(p)] = "first plan"
    compiled = SimpleNamespace(dynamo_ctx="first plan")
    monkeypatch.setattr(_calibrate, "_recompile", recompile)
    cal = _calibrate.Calibrator(backend, compiled)
    p.allow_provisional = provisional  # as on CUDA, or not
    p.compile()
    return cal, p, backend.calibration, compiled


def test_calibration_near_the_least_runs_the_least_instead_of_failing(
        monkeypatch):
    from lethe._calibrate import Measurement
    # The budget (1000) is just above the model's least (950); the plan
    # peaks at 1200 measured, so the corrected budget (800) is below the
    # least: the re-plan is the least plan (provisional), not an error in
    # the middle of training. It peaks over too (1150): the budget cannot
    # be met; training goes on with the lower of the two, said once.
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 1000 + c,
                                           least=950)
    assert cal.on_step(Measurement(1200, 10.0))
    assert p.peak_correction == -200
    p.compile()
    assert p.records[-1].provisional
    with pytest.warns(UserWarning, match="cannot be met"):
        assert not cal.on_step(Measurement(1150, 10.0))
    assert report["unmet"] == dict(budget_bytes=1000,
                                   least_measured_bytes=1150)
    assert compiled.dynamo_ctx == "plan 2" and not report.get("reverted")
    # The same, the least plan measured higher than the first: back to it.
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 1000 + c,
                                           least=950)
    cal.on_step(Measurement(1200, 10.0))
    p.compile()
    with pytest.warns(UserWarning, match="at least 1200 B"):
        cal.on_step(Measurement(1250, 10.0))
    assert report["reverted"] and compiled.dynamo_ctx == "first plan"
    # A provisional first plan that measured under the budget, re-planned
    # with room, whose re-plan (the least again) peaks over: back to the
    # first, which meets the budget, so nothing is unmet.
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 1000 + c,
                                           least=1100, provisional=True)
    assert cal.on_step(Measurement(900, 10.0))
    p.least = 1400  # the least moved with the re-plan's costs
    p.compile()
    assert p.records[-1].provisional
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not cal.on_step(Measurement(1150, 10.0))
    assert report["reverted"] and "unmet" not in report


def test_a_slow_offloading_plan_is_compared_with_a_recompute_only_one(
        monkeypatch):
    from lethe._calibrate import Measurement
    # The plan offloads and runs 13 ms against 10 predicted (copies cost
    # more under inductor than modelled): the re-plan is recompute-only,
    # with the corrections the first plan was made with (its errors are its
    # copies'); it runs 10.2 ms and is kept, then calibrated on its own step
    # (within 5%: done). Were it slower, the offloading plan, which fits,
    # would come back.
    for recompute_ms, kept in ((10.2, "plan 2"), (14.0, "first plan")):
        cal, p, report, compiled = _calibrator(
            monkeypatch, lambda c: 1000 + c, offloads=["h"])
        assert p.records[0].offloaded == ["h"]
        assert cal.on_step(Measurement(990, 13.0))
        assert p.offload is False and p.time_scale == 1.0
        assert p.peak_correction == 0
        assert report["offload_compared"]
        p.compile()
        assert p.records[-1].offloaded == []
        assert not cal.on_step(Measurement(980, recompute_ms))
        assert compiled.dynamo_ctx == kept
        assert (p.offload == "auto") == (kept == "first plan")
        assert bool(report.get("offload_kept")) == (kept == "first plan")


def test_an_offloading_plan_that_fits_is_kept_when_recompute_alone_cannot(
        monkeypatch):
    from lethe._calibrate import Measurement
    # The offloading plan fits (990 of 1000) but runs 13 ms against 10
    # predicted. Measured on an H200 (GPT-2-medium at its least): the
    # recompute-only re-plan, faster, was the model's least and peaked
    # 1.2 GB over the budget, and the calibration kept it. The faster plan
    # that *fits* is kept: the offloading one.
    cal, p, report, compiled = _calibrator(
        monkeypatch, lambda c: 1000 + c, least=900, offloads=["h"])
    assert cal.on_step(Measurement(990, 13.0))
    p.least = 1400  # without offload the least is higher
    p.compile()
    assert p.records[-1].provisional and p.records[-1].offloaded == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not cal.on_step(Measurement(1400, 10.2))
    assert compiled.dynamo_ctx == "first plan" and p.offload == "auto"
    assert report["offload_kept"] and "unmet" not in report
    # Not the model's least: the recompute-only plan is calibrated first
    # (twice), and only when it still peaks over does the offloading plan
    # come back.
    cal, p, report, compiled = _calibrator(
        monkeypatch, lambda c: 1000 + c, offloads=["h"])
    cal.on_step(Measurement(990, 13.0))
    p.compile()
    assert cal.on_step(Measurement(1100, 10.2))  # over: corrected
    assert p.peak_correction == -100 and not report.get("offload_kept")
    p.compile()
    assert cal.on_step(Measurement(1050, 10.2))  # over again: once more
    p.compile()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not cal.on_step(Measurement(1020, 10.2))
    assert compiled.dynamo_ctx == "first plan" and report["offload_kept"]
    assert cal.backend.calibrated_plan is p.records[0]


def test_a_replan_that_changed_only_the_time_scale_retries_by_its_error(
        monkeypatch):
    from lethe._calibrate import Measurement
    # The first plan fits and runs at half its predicted time: re-planned
    # with the time scale alone (no peak correction), the new plan peaks
    # over. Measured on an H200 (MoE): the retry interpolated between two
    # equal corrections and made the same plan again. It is corrected by
    # the re-plan's own error instead.
    box = []
    cal, p, report, compiled = _calibrator(
        monkeypatch,
        lambda c: (990 if not box or box[0].time_scale == 1.0 else 1030) + c)
    box.append(p)
    assert cal.on_step(Measurement(960, 5.0))
    assert p.peak_correction == 0 and p.time_scale == 0.5
    p.compile()
    assert cal.on_step(Measurement(1040, 5.0))
    assert report["retried"] and p.peak_correction == -10
    p.compile()
    assert not cal.on_step(Measurement(995, 5.0))
    assert compiled.dynamo_ctx == "plan 3"


def test_calibration_corrects_twice_when_both_plans_peak_over(monkeypatch):
    from lethe._calibrate import Measurement
    # The model is low by 100 B on the first plan and by 150 B on the
    # corrected one: a second correction (by the second plan's error) fits.
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 1000 + c)
    assert cal.on_step(Measurement(1100, 10.0))
    assert p.peak_correction == -100
    p.compile()
    assert cal.on_step(Measurement(1050, 10.0))  # predicted 900: -150
    assert p.peak_correction == -250 and report["retried"]
    p.compile()
    assert not cal.on_step(Measurement(990, 10.0))
    assert compiled.dynamo_ctx == "plan 3" and not report.get("reverted")
    # Over a third time: said, and the step goes on (no fourth plan).
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 1000 + c)
    cal.on_step(Measurement(1100, 10.0))
    p.compile()
    cal.on_step(Measurement(1050, 10.0))
    p.compile()
    with pytest.warns(UserWarning, match="still over the budget"):
        assert not cal.on_step(Measurement(1010, 10.0))
    assert p.compiles == 3


def test_a_provisional_least_over_the_budget_is_not_replanned(monkeypatch):
    from lethe._calibrate import Measurement
    # A budget below the model's least: the least plan runs (provisional)
    # and peaks over the budget, so nothing can meet it; no re-plan.
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 1000 + c,
                                           least=1100, provisional=True)
    assert p.records[0].provisional
    with pytest.warns(UserWarning, match="cannot be met"):
        assert not cal.on_step(Measurement(1080, 10.0))
    assert p.compiles == 1 and report["done"]
    assert report["unmet"]["least_measured_bytes"] == 1080


def test_calibration_goes_back_to_the_first_plan_when_replans_overshoot(
        monkeypatch):
    from lethe._calibrate import Measurement
    # The model over-states the first plan's peak by 300 B, but a plan at
    # budget + 300 keeps so much more that it peaks over the budget.
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 990 + c)
    assert cal.on_step(Measurement(690, 10.0))  # re-plan at +300
    assert p.peak_correction == 300
    p.compile()
    assert cal.on_step(Measurement(1200, 10.0))  # over: try between
    # Linear between (0, 690) and (300, 1200): 1000 at 182; 90% of it.
    assert p.peak_correction == int(0.9 * 300 * 310 / 510)
    assert report["retried"]
    p.compile()
    assert not cal.on_step(Measurement(1050, 10.0))  # over again: revert
    assert report["reverted"] and compiled.dynamo_ctx == "first plan"
    assert p.peak_correction == 0 and report["after"]["peak_bytes"] == 690
    assert report["done"] and cal.backend.calibrated_plan is p.records[0]


def test_step_meter_skips_a_warm_step_and_reports_the_median_of_three():
    # CPU: the meter times calls of the module; the median is the plan's
    # time (a stalled step is not), the first call (compile) and the warm
    # one after it are not measured.
    from lethe import _calibrate
    seen = []
    lin = nn.Linear(4, 4)
    meter = _calibrate.StepMeter(lin, lambda m: seen.append(m) or False)
    x = torch.randn(2, 4)
    for _ in range(6):
        lin(x).sum().backward()
    assert len(seen) == 1 and len(seen[0].steps_ms) == 3
    assert seen[0].step_ms == sorted(seen[0].steps_ms)[1]
    assert meter._handles == []  # stopped: on_step returned False
    m = _calibrate._median([_calibrate.Measurement(5, 1.0),
                            _calibrate.Measurement(9, 50.0),
                            _calibrate.Measurement(7, 2.0)])
    assert (m.peak_bytes, m.step_ms) == (9, 2.0)


def test_calibration_keeps_a_replan_that_fits(monkeypatch):
    from lethe._calibrate import Measurement
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 990 + c)
    assert cal.on_step(Measurement(690, 10.0))
    p.compile()
    assert not cal.on_step(Measurement(980, 10.0))
    assert compiled.dynamo_ctx == "plan 2" and p.peak_correction == 300
    assert report["replanned"] and not report.get("reverted")
    assert [a["peak_bytes"] for a in report["attempts"]] == [690, 980]


def test_calibration_says_when_the_host_bounds_the_step(monkeypatch):
    # A step the host took as long to issue as the device to run: the
    # model's kernel times do not decide it, and the report says so; a
    # device-bound step says nothing of the host.
    # The re-plan gives each op's launch the host's time over the step's
    # ops (11.8 ms over 100 ops), so the simulator bounds the step by the
    # host; a step the plan predicts right is re-planned for it too.
    from lethe._calibrate import Measurement
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 990 + c)
    assert cal.on_step(Measurement(980, 10.2, host_ms=10.0))
    assert any("host bounds the step: 10.00 ms" in r
               for r in report["reasons"])
    assert report["attempts"][0]["host_ms"] == 10.0
    assert p.host_launch_us == pytest.approx(100.0)
    assert compiled.dynamo_ctx == "plan 2"
    # The re-plan peaks over and the retry too: back to the first plan,
    # with the profile's launch time again.
    p.compile()
    assert cal.on_step(Measurement(1200, 10.0, host_ms=9.9))
    p.compile()
    assert not cal.on_step(Measurement(1100, 10.0, host_ms=9.9))
    assert report["reverted"] and compiled.dynamo_ctx == "first plan"
    assert p.host_launch_us is None
    # A device-bound step says nothing of the host and is not re-planned.
    cal, p, report, compiled = _calibrator(monkeypatch, lambda c: 990 + c)
    assert not cal.on_step(Measurement(980, 10.2, host_ms=6.0))
    assert not any("host" in r for r in report["reasons"])
    assert p.host_launch_us is None


@needs_lethe
def test_a_plan_that_keeps_everything_is_plain_compiles_partition():
    # No budget: Lethe keeps every value, so the partition is min-cut's own
    # (what plain torch.compile saves), not every value tagged MUST_SAVE.
    from torch._functorch import partitioners
    from torch._inductor.custom_graph_pass import CustomPartitionerFn

    class MinCut(CustomPartitionerFn):
        """Inductor's default partition, recording what it saves."""
        saved = None

        def __call__(self, gm, joint_inputs, **kwargs):
            fw, bw = partitioners.min_cut_rematerialization_partition(
                gm, joint_inputs, **kwargs)
            MinCut.saved = _inductor._saved_names(fw,
                                                  kwargs["num_fwd_outputs"])
            return fw, bw

        def uuid(self):
            return "min-cut"
    model = _model()
    eager = _step(model, model)
    p = lt.partitioner(budget=None, device="h100")
    _close(_step(model, _compile(model, p)), eager)
    _close(_step(model, _compile(model, MinCut())), eager)
    record = p.records[-1]
    assert "min-cut's own partition" in record.notes[-1]
    assert record.saved == MinCut.saved and not record.mismatches

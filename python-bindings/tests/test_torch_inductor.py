"""Lethe as inductor's partitioner, on CPU (torch >= 2.9; CI runs this file
in a virtual environment with torch 2.11 from PyPI, scripts/test.sh). The
offload ops' tests are in test_inductor_offload.py.

Inductor's CPU backend compiles the same partitioned graphs it would
compile for a GPU (C++ kernels instead of Triton), so the plan → tags →
min-cut → offload-ops route is exercised whole; the offload ops run their
CPU stand-in (synchronous clones).
"""

import json
import warnings

from inductor_common import (  # noqa: F401 (the fixture is autouse)
    pytest, torch, nn, F, lethe, lt, _inductor, needs_lethe,
    _no_compile_caches, Attention, Block, SwiGLU, _model, _step, _compile,
    _close, _planner, _fused_doc)


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


def test_a_view_a_chain_folds_into_writes_its_own_buffer():
    # fc2 reads the GELU through a view that the addmm cannot fuse: inductor
    # writes the GELU's output there. The view says it aliases nothing, so
    # Lethe prices it (and re-running it) as the kernel it is, not a view.
    doc = _fused_doc(_model(1))
    folded = [e for e in doc["nodes"] if e["kind"] == "op"
              and e.get("inlined") and e["phase"] == "fwd"]
    assert folded
    for e in folded:
        assert all(o.get("alias", -1) == -1 for o in e["outputs"]), e
        assert any(o.get("alias") == -1 for o in e["outputs"]), e


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


def test_a_fused_attention_the_plan_re_runs_is_re_run_whole():
    """The plan re-runs each fused attention (no dropout: deterministic)
    for its output and keeps its small log-sum-exp. Min-cut saves or re-runs
    a node whole: it is re-run, not saved for the small output (on an H200,
    DiT-B/2's twelve attention outputs, 300 MB, were saved against the
    plan). An attention carries torch's nondeterministic_seeded tag whatever
    its dropout, so it had been saved as a seed draw too; the planned graph
    gives its dropout to the planner, which re-runs only one without."""
    torch.manual_seed(0)
    model = nn.Sequential(*[Attention() for _ in range(2)])
    eager = _step(model, model)
    attentions = []

    def plan(doc, budget, policy, device, **options):
        values = []
        for nid, index in doc["saved"]:
            entry = doc["nodes"][nid]
            if entry["kind"] != "op":
                continue
            attention = "scaled_dot_product" in entry["op"]
            if attention:
                attentions.append(entry)
            values.append({"node": entry["name"], "result": index,
                           "decision": "recompute"
                           if attention and index == 0 else "retain"})
        return {"feasible": True, "policy": policy, "values": values,
                "peak_bytes": 0, "step_us": 0.0}

    p = lt.partitioner(budget=None, planner=plan)
    _close(_step(model, _compile(model, p)), eager)
    assert attentions and all(e["kwargs"] == {"dropout_p": 0.0}
                              for e in attentions)
    record = p.records[-1]
    assert not [m for m in record.mismatches
                if m["planned"] == "recompute"], record.mismatches


def test_budget_forms():
    from lethe._budget import normalize_budget as norm
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
    # The fusion guards shape the generated code: a cached graph compiled
    # under other guards is not replayed.
    fewer = lt.partitioner(budget="50%", device="h100",
                           fusion_guards="horizontal,order")
    assert fewer.fusion_guards == {"horizontal", "order"}
    assert a.uuid() != fewer.uuid()
    with pytest.raises(ValueError, match="fusion_guards"):
        lt.partitioner(budget="50%", device="h100", fusion_guards=["sideways"])
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


def test_inductor_profile_prices_views_at_nothing(tmp_path, monkeypatch):
    # Inductor launches no kernel for a view: the profile the partitioner
    # plans with has view_us 0, and the rest is the base's.
    from lethe import _measure
    monkeypatch.setattr(_measure, "cache_dir", lambda: str(tmp_path))
    with open(_measure.inductor_profile("h100")) as f:
        profile = json.load(f)
    base = _measure._load_profile("h100")
    assert base["view_us"] > 0 and profile["view_us"] == 0
    assert profile["launch_overhead_us"] == base["launch_overhead_us"]
    assert "no kernel for a view" in profile["notes"]["view_us"]


def test_the_partitioner_plans_with_the_inductor_profile(tmp_path,
                                                        monkeypatch):
    # The profile the planner is handed is the named one with its views
    # free (the Block's attention reshapes are views of the fused graph).
    from lethe import _measure
    monkeypatch.setattr(_measure, "cache_dir", lambda: str(tmp_path))
    devices, docs = [], []

    def record(doc, device, **kwargs):
        devices.append(device)
        docs.append(doc)
        return _planner(lambda e: "retain")(doc, device=device, **kwargs)
    model = _model(2)
    p = lt.partitioner(budget="80%", device="h100", planner=record)
    _step(model, _compile(model, p))
    assert any(o.get("alias", -1) >= 0 for e in docs[0]["nodes"]
               for o in e["outputs"])
    with open(devices[0]) as f:
        profile = json.load(f)
    assert profile["view_us"] == 0
    assert profile["name"] == f"{_measure._load_profile('h100')['name']}" \
        "-inductor"


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
    # The least it names, as the share asked for, compiles and trains.
    least = errors[0].least_share
    assert least.endswith("%") and f'pass budget="{least}"' in str(errors[0])
    p = lt.partitioner(budget=least, device="h100")
    _step(model, _compile(model, p))
    assert p.records[-1].plan.feasible


def test_the_least_share_is_the_least_whole_percent_that_fits():
    from lethe._budget import least_share
    assert least_share(50, 100) == "50%"
    assert least_share(501, 1000) == "51%"
    # 33% of 301 bytes is 99 bytes: under 100, so 34%.
    assert least_share(100, 301) == "34%"


@needs_lethe
def test_a_share_of_a_graph_with_nothing_to_lower_compiles_it_as_is():
    # A lone linear layer saves no activation (its backward reads its
    # input and weight): no decision moves its peak, so no share of it can
    # be met. Raising would stop training on a graph that needs no plan (a
    # graph break's 9-op fragment of HF GPT-2 did); it is compiled as is,
    # said once. A byte budget under its peak still raises.
    torch.manual_seed(0)
    model = nn.Linear(64, 64)
    eager = _step(model, model)
    p = lt.partitioner(budget="50%", device="h100")
    with pytest.warns(UserWarning, match="no activation Lethe can lower"):
        _close(_step(model, _compile(model, p)), eager)
    plan = p.records[-1].plan
    assert plan.feasible and plan.peak_bytes == plan.baseline_peak_bytes
    with pytest.raises(Exception) as info:
        _step(model, _compile(model, lt.partitioner(budget="4096",
                                                    device="h100")))
    chain, e = [], info.value
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(x, lethe.InfeasibleBudgetError) for x in chain)


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


def test_timing_an_op_leaves_the_users_random_stream_alone():
    """Measuring an op draws its inputs' values and may run a random op
    (attention with dropout): the default generator is where it was, so
    the user's dropout masks after a compile with Lethe are those after
    plain torch.compile."""
    from torch import fx
    from lethe import _measure
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(64, 64)
    n = g.call_function(torch.ops.aten.native_dropout.default, (x, 0.5, True))
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    _measure._time_op(n, torch.device("cpu"))
    assert torch.equal(torch.random.get_rng_state(), before)


@needs_lethe
def test_the_least_budget_is_planned_at_the_least():
    """budget="least" plans at the least budget the policy can meet: the
    number a budget under it is refused with."""
    model = _model()
    eager = _step(model, model)
    p = lt.partitioner(budget="least", device="h100")
    _close(_step(model, _compile(model, p)), eager)
    plan = p.records[-1].plan
    assert plan.feasible
    assert plan.peak_bytes <= plan.budget_bytes < plan.baseline_peak_bytes
    below = lt.partitioner(budget=str(plan.budget_bytes - 4096),
                           device="h100")
    with pytest.raises(Exception, match=f"the least it can meet is "
                                        f"{plan.budget_bytes} B"):
        _step(model, _compile(model, below))


def test_costs_mode_is_checked_and_keys_the_cache():
    with pytest.raises(ValueError, match="costs must be"):
        lt.partitioner(budget="50%", device="h100", costs="profiled")
    model = lt.partitioner(budget="50%", device="h100", costs="model")
    measured = lt.partitioner(budget="50%", device="h100", costs="measured")
    assert model.uuid() != measured.uuid()


@needs_lethe
def test_library_workspaces_are_planned_as_memory_of_their_op(monkeypatch,
                                                               tmp_path):
    """A library kernel's workspace (cuDNN's convolution scratch: 407 MB
    of U-Net's backward on an H200, live at the step's peak and in no
    earlier model) is measured with the op's time and joins the graph as
    the op's last output, read by nothing: the planned peak counts it at
    that op alone, the partition still maps onto the plan, and it is
    cached with the op's time. On the CPU nothing allocates one, so a
    stand-in measures 8 MiB for every library op."""
    from lethe import _measure
    from lethe.schema import is_workspace, validate
    monkeypatch.setenv("LETHE_CACHE_DIR", str(tmp_path))
    model = _model()
    eager = _step(model, model)

    def planned(name):
        p = lt.partitioner(budget="100%", device="h100", costs="measured",
                           dump_dir=str(tmp_path / name))
        _close(_step(model, _compile(model, p)), eager)
        (record,) = p.records
        return record, json.loads((tmp_path / name / "graph0.json")
                                  .read_text())

    plain, plain_graph = planned("plain")
    assert plain.measured["workspace_nodes"] == 0
    assert not any(is_workspace(o) for e in plain_graph["nodes"]
                   for o in e["outputs"])
    ws = 8 << 20
    (tmp_path / "plain").rename(tmp_path / "kept")
    for cache in tmp_path.glob("costs-*.json"):
        cache.unlink()  # measure again, with the stand-in
    monkeypatch.setattr(_measure, "_workspace_bytes", lambda call, dev: ws)
    record, graph = planned("ws")
    library = [e for e in graph["nodes"] if e.get("time_us") is not None]
    assert library and record.measured["workspace_nodes"] == len(library)
    assert all(is_workspace(e["outputs"][-1])
               and e["outputs"][-1]["bytes"] == ws for e in library)
    # (The fused graph folds operands into arguments the schema does not
    # describe; its workspaces are what is checked here.)
    assert not [e for e in validate(graph) if "workspace" in e]
    assert record.mismatches == [] and record.saved == plain.saved
    # Every op's transient is at most one workspace more than before, and
    # the step's peak (a matmul of the backward) carries one.
    grew = record.plan.baseline_peak_bytes - plain.plan.baseline_peak_bytes
    assert 0 < grew <= ws
    # Cached with the time: a new partitioner measures nothing again.
    monkeypatch.setattr(_measure, "_workspace_bytes", None)
    q = lt.partitioner(budget="100%", device="h100", costs="measured")
    _step(model, _compile(model, q))
    assert q.records[-1].measured["new_measurements"] == 0
    assert q.records[-1].measured["workspace_nodes"] == len(library)


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


def test_only_a_binding_plan_compiles_with_fusion_held_to_it(monkeypatch):
    # Under a plan that recomputes, lethe._fusion's guards hold inductor's
    # fusion and order to the plan while it compiles the forward and the
    # backward. A plan that keeps everything needs none of it: inductor's
    # own fusion, as plain compile has (BERT-base ran 1.1-1.3% over plain
    # compile at its own peak with fusion held, on an H200).
    import torch._inductor.graph as graph
    from lethe import _fusion
    seen = []
    real = graph.GraphLowering.compile_to_module

    def spy(self):
        seen.append(_fusion.planned_compile("horizontal"))
        return real(self)
    monkeypatch.setattr(graph.GraphLowering, "compile_to_module", spy)
    model = _model()
    eager = _step(model, model)
    for kind, binds in (("retain", False), ("recompute", True)):
        p = lt.partitioner(budget="50%", device="h100",
                           planner=_planner(lambda e: kind))
        torch._dynamo.reset()
        seen.clear()
        run = torch.compile(model, dynamic=False,
                            options=p.inductor_options())
        _close(_step(model, run), eager)
        assert seen == [binds, binds], kind  # the forward, the backward
        assert p.plan_binds is binds


@needs_lethe
def test_a_fixed_plan_is_evaluated_with_this_compiles_prices():
    # The calibration's revert: a plan's decisions, compiled again under a
    # time scale that doubles the modelled kernels, are those decisions
    # (here the first plan with one more value recomputed, which no
    # planning would choose) priced slower; another graph (another digest)
    # is planned.
    import copy
    model = _model()
    p = lt.partitioner(budget="60%", device="h100")
    _step(model, _compile(model, p))
    first = p.records[-1]
    doc = copy.deepcopy(first.plan.document)
    flipped = next(v for v in doc["values"] if v["decision"] == "retain")
    flipped["decision"] = "recompute"
    key = p.uuid()
    p.fixed_plan = (first.graph_digest, doc)
    assert p.uuid() != key  # a fixed plan keys the caches
    p.set_time_scale(2.0)
    _step(model, _compile(model, p))
    again = p.records[-1]
    kinds = {k: d.kind for k, d in first.plan.owners.items()}
    kinds[(flipped["node_id"], flipped["output"])] = "recompute"
    assert again.graph_digest == first.graph_digest
    assert {k: d.kind for k, d in again.plan.owners.items()} == kinds
    assert again.plan.step_us > first.plan.step_us
    p.fixed_plan = ("another graph", doc)
    _step(model, _compile(model, p))  # planned: the digest differs
    assert {k: d.kind for k, d in p.records[-1].plan.owners.items()} \
        != kinds


def test_a_split_of_a_reshaped_projection_views_the_projection():
    """The projection's output is reshaped (a view, folded) and split: the
    halves are views of the projection's buffer, which no kernel copies.
    They were planned as two buffers of their own (alias -1), so a plan
    could offload or free one half while the buffer stayed."""
    doc = _fused_doc(nn.Sequential(SwiGLU(bias=True)))
    nodes = doc["nodes"]
    (split,) = [e for e in nodes if e["op"] == "aten.split.Tensor"
                and e["phase"] == "fwd"]
    (viewed,) = split["inputs"]
    assert nodes[viewed[0]]["op"] == "aten.addmm.default"
    assert [o.get("alias") for o in split["outputs"]] == [0, 0]

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

from inductor_common import (  # noqa: F401 (the fixture is autouse)
    pytest, torch, nn, F, lethe, lt, _inductor, needs_lethe,
    _no_compile_caches, Attention, Block, _model, offload_all, _step, _compile, _close, _planner,
    _fused_doc)


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



def _compile_offloading(model, planner):
    """`model` compiled with Lethe's partitioner offloading as `planner`
    says (inductor must not reuse an offloaded buffer while its copy may
    read it)."""
    p = lt.partitioner(budget=None, offload=True, planner=planner)
    torch._dynamo.reset()
    return p, torch.compile(model, dynamic=False, options={
        "custom_partitioner_fn": p, "allow_buffer_reuse": False})


def test_offloaded_views_and_attention_outputs_give_eagers_numbers():
    """Every saved value of an attention stack offloaded: q, k and v are
    views with gaps into the q/k/v projection's output, and the
    attention's outputs come from one kernel of several. The projection's
    output is copied once for its three views and viewed again in the
    backward: every reload buffer holds just the bytes copied (a view's
    own copy held its gaps: three times q's bytes). The host copy keeps
    its value's strides, as its fake does (a clone of a view with gaps
    came out contiguous and failed inductor's stride check)."""
    from lethe import _offload_ops
    torch.manual_seed(0)
    model = nn.Sequential(*[Attention() for _ in range(2)])
    eager = _step(model, model)
    p, run = _compile_offloading(model, _planner(lambda e: "offload"))
    before = dict(_offload_ops.stats)
    _close(_step(model, run), eager)
    moved = {k: _offload_ops.stats[k] - before[k] for k in before}
    record = p.records[-1]
    views = [n for n in record.offloaded if n.startswith("getitem")]
    assert len(views) >= 6, record.offloaded  # q, k, v and the attention's
    assert moved["h2d_copies"] < len(record.offloaded)  # q/k/v: one copy
    assert moved["buffer_bytes"] == moved["h2d_bytes"] \
        == moved["d2h_bytes"] > 0
    assert _offload_ops.held() == 0


def test_a_view_whose_buffer_other_saved_views_keep_brings_them_along():
    """Only q offloaded, k and v kept: they keep the q/k/v projection's
    output on the device, so offloading q alone would free nothing (it was
    skipped, silently, until 2026-11-28, and the step kept what the plan
    had freed). k and v are offloaded with it, the buffer copied once a
    layer, each widening said in the record's notes, and the step gives
    eager's numbers."""
    from lethe import _offload_ops
    torch.manual_seed(0)
    model = nn.Sequential(*[Attention() for _ in range(2)])
    eager = _step(model, model)

    only_q = _planner(lambda e, index: "offload" if e["op"] ==
                      "aten.unbind.int" and index == 0 else "retain",
                      by_output=True)
    p, run = _compile_offloading(model, only_q)
    before = dict(_offload_ops.stats)
    _close(_step(model, run), eager)
    record = p.records[-1]
    assert len(record.offloaded) == 6, record.offloaded  # q, k, v a layer
    assert _offload_ops.stats["d2h_copies"] - before["d2h_copies"] == 2
    widened = [n for n in record.notes if n.startswith("offloaded ")]
    assert len(widened) == 2, record.notes


def test_a_value_an_earlier_release_is_placed_on_is_offloaded_too():
    """Every saved value of 64 KiB or more offloaded, each released two
    forward ops after it: fc1's output is the point where its input is
    released, so its place among the saved was the release's. It is
    offloaded all the same (it was kept on the device, silently, until
    2026-11-28: the offloading GPU test lowered the peak by 319 MB, not
    512, on an H200), and the release still runs."""
    from lethe import _offload_ops
    model = _model()
    eager = _step(model, model)
    planned = set()

    def planner(*args, **kwargs):
        plan = offload_all(*args, min_bytes=1 << 16, **kwargs)
        planned.update(v["node"] for v in plan["values"]
                       if v["decision"] == "offload")
        return plan
    p, run = _compile_offloading(model, planner)
    before = dict(_offload_ops.stats)
    _close(_step(model, run), eager)
    record = p.records[-1]
    planned &= set(record.saved)  # not a view of a weight min-cut re-made
    assert len(planned) > 3 and set(record.offloaded) >= planned, \
        (planned, record.offloaded)
    assert _offload_ops.stats["d2h_copies"] - before["d2h_copies"] \
        == len(record.offloaded)
    assert _offload_ops.held() == 0  # every release ran

def _offloading_matmuls_under_graphs(model):
    """`model` compiled for CUDA graphs with Lethe's partitioner offloading
    every matmul output (offload=True)."""
    p = lt.partitioner(budget=None, offload=True, planner=_planner(
        lambda e: "offload" if e["op"] == "aten.addmm.default"
        else "retain"))
    return p, torch.compile(model, dynamic=False, options={
        "custom_partitioner_fn": p, "allow_buffer_reuse": False,
        "triton.cudagraphs": True})


def test_offload_is_captured_in_cuda_graphs():
    """Under CUDA graphs (triton.cudagraphs) the copies are captured with
    the graphs: no lethe op is tagged cudagraph_unsafe (inductor's graph
    partition would split the graph there), and the forward saves a
    one-byte device token of each host copy, never the host tensor (a
    captured graph cannot output or read one); the host copy is held by
    the token until the backward's reload. Every offloaded value is released and every host copy read by the
    step's end, and the numbers are eager's. (On a CPU tensor inductor
    captures nothing; the tags, tokens and graphs are what this tests;
    the capture itself runs in the GPU suite.)"""
    from lethe import _offload_insert, _offload_ops
    if not _offload_ops.IN_GRAPHS:
        pytest.skip("LETHE_OFFLOAD_IN_GRAPHS=0")
    graphs = []
    insert = _offload_insert.insert

    def keep(fw, bw, *args, **kwargs):
        moved = insert(fw, bw, *args, **kwargs)
        graphs.append((fw, bw, kwargs.get("token")))
        return moved
    model = _model()
    eager = _step(model, model)
    import unittest.mock
    with unittest.mock.patch.object(_offload_insert, "insert", keep):
        torch._dynamo.reset()
        p, run = _offloading_matmuls_under_graphs(model)
        _close(_step(model, run), eager)
    record = p.records[-1]
    assert record.offloaded
    assert _offload_ops.held() == 0 and not _offload_ops._token_host
    unsafe = torch.Tag.cudagraph_unsafe
    for name in ("offload", "issued", "release", "buffer", "reload", "wait",
                 "fence"):
        assert unsafe not in getattr(torch.ops.lethe, name).default.tags
    (fw, bw, token), = graphs
    assert token is True
    ops = torch.ops.lethe
    hs = [n for n in fw.graph.nodes if n.target is ops.offload.default]
    assert len(hs) == len(record.offloaded)
    for h in hs:
        assert h.args[1] is True
        val = h.meta["val"]
        assert val.device.type == "cpu" and val.dtype == torch.uint8 \
            and val.numel() == 1  # the device of a CPU step's token
    for n in bw.graph.nodes:
        if n.op == "placeholder" and any(u.target is ops.reload.default
                                         for u in n.users):
            assert n.meta["val"].dtype == torch.uint8


def test_offload_between_cuda_graphs_when_asked():
    """LETHE_OFFLOAD_IN_GRAPHS=0 restores the copies between the captured
    graphs (run in a process of its own: the ops' tags are set when they
    are registered): the test of that way passes there."""
    import subprocess
    import sys
    env = dict(os.environ, LETHE_OFFLOAD_IN_GRAPHS="0")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         __file__, "-k", "runs_between_cuda_graphs"],
        env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout, run.stdout[-3000:]


def test_offload_runs_between_cuda_graphs():
    """Under CUDA graphs (triton.cudagraphs) the offload is planned and
    compiled as without them: the ops that use the side streams or read a
    host tensor carry the cudagraph_unsafe tag, so that inductor's graph
    partition runs them between the captured graphs on every step, and
    the two that only allocate or order device tensors stay inside; no
    captured graph reads a host tensor. Every offloaded value is released by
    the step's end, and the numbers are eager's. (On a CPU tensor inductor
    captures nothing; the plan, the tags and the graphs are what this
    tests; the capture itself runs in the GPU suite.) With
    LETHE_OFFLOAD_IN_GRAPHS=0 only."""
    from lethe import _offload_ops
    if _offload_ops.IN_GRAPHS:
        pytest.skip("copies captured in the graphs (LETHE_OFFLOAD_IN_GRAPHS)")
    model = _model()
    eager = _step(model, model)
    p, run = _offloading_matmuls_under_graphs(model)
    _close(_step(model, run), eager)
    record = p.records[-1]
    assert record.offloaded
    assert _offload_ops.held() == 0
    unsafe = torch.Tag.cudagraph_unsafe
    for name in ("offload", "issued", "release", "reload", "wait"):
        assert unsafe in getattr(torch.ops.lethe, name).default.tags, name
    for name in ("buffer", "fence"):
        assert unsafe not in getattr(torch.ops.lethe, name).default.tags
    assert lt.backend(budget="50%", offload=True, inductor_options={
        "triton.cudagraphs": True}).partitioner.offload is True


def test_auto_offload_is_recompute_only_under_cuda_graphs():
    """offload="auto" plans recompute-only for a step run as CUDA graphs
    (no measured step gained by offloading there,
    lethe._inductor.OFFLOAD_UNDER_CUDA_GRAPHS) and says so; offload=True
    still offloads there (test_offload_is_captured_in_cuda_graphs)."""
    model = _model()
    eager = _step(model, model)

    def planner(doc, **options):  # offloads where the host budget allows
        host = options.get("host_budget")
        return _planner(lambda e: "offload" if host != 0
                        and e["op"] == "aten.addmm.default"
                        else "retain")(doc, **options)
    p = lt.partitioner(budget=None, offload="auto", planner=planner)
    run = torch.compile(model, dynamic=False, options={
        "custom_partitioner_fn": p, "allow_buffer_reuse": False,
        "triton.cudagraphs": True})
    _close(_step(model, run), eager)
    record = p.records[-1]
    assert not record.offloaded
    assert _inductor.OFFLOAD_UNDER_CUDA_GRAPHS in record.notes
    assert lt.backend(budget="50%", offload="auto", inductor_options={
        "triton.cudagraphs": True}).partitioner.offload is False
    assert lt.backend(budget="50%", offload="auto").partitioner.offload \
        == "auto"


def test_an_offloaded_value_is_let_go_at_the_plans_release_point(
        monkeypatch):
    """The forward releases an offloaded value (the compute stream waits
    for its copy and its memory goes back) after the node the plan
    releases it after, not at once and not at the forward's end; the
    backward allocates the reload's buffer, then copies, and waits before
    the first use."""
    from lethe import _offload_insert
    graphs = []
    insert = _offload_insert.insert

    def keep(fw, bw, *args, **kwargs):
        moved = insert(fw, bw, *args, **kwargs)
        graphs.append((fw, bw))
        return moved
    monkeypatch.setattr(_offload_insert, "insert", keep)
    released_after = {}

    ids = {}

    def planner(doc, budget, policy, device, **options):
        ids.update((e["name"], e["id"]) for e in doc["nodes"])
        ops = [e for e in doc["nodes"]
               if e["kind"] == "op" and e["phase"] == "fwd"]
        values = []
        for nid, index in doc["saved"]:
            e = doc["nodes"][nid]
            if e["kind"] != "op":
                continue
            d = {"node": e["name"], "result": index, "decision": "retain"}
            if e["op"] == "aten.addmm.default" and not released_after:
                # Released three forward ops later.
                later = ops[ops.index(e) + 3]
                released_after[e["name"]] = later["id"]
                d.update(decision="offload",
                         placement={"release_after": later["name"]})
            values.append(d)
        return {"feasible": True, "policy": policy, "values": values,
                "peak_bytes": 0, "step_us": 0.0}
    model = _model()
    eager = _step(model, model)
    p = lt.partitioner(budget=None, offload=True, planner=planner)
    run = torch.compile(model, dynamic=False, options={
        "custom_partitioner_fn": p, "allow_buffer_reuse": False})
    _close(_step(model, run), eager)
    (fw, bw), = graphs
    (name, target), = released_after.items()
    ops = torch.ops.lethe
    order = {n: i for i, n in enumerate(fw.graph.nodes)}
    (h,) = [n for n in fw.graph.nodes if n.target is ops.offload.default]
    assert h.args[0].name == name
    (release,) = [u for u in h.users if u.target is ops.release.default]
    # Only the copy ops read the host copy.
    assert all(u.target in (ops.issued.default, ops.release.default)
               for u in h.users if u.op == "call_function")
    at = release.args[0]
    assert order[h] < order[at] < order[release]
    assert ids[at.name] <= target
    assert any(order[u] > order[release] and u.op != "output"
               for u in release.users), "released at the forward's end"
    order = {n: i for i, n in enumerate(bw.graph.nodes)}
    (y,) = [n for n in bw.graph.nodes if n.target is ops.reload.default]
    assert y.args[0].op == "placeholder" and list(y.args[0].users) == [y]
    buf = y.args[1]
    assert buf.target is ops.buffer.default and order[buf] < order[y]
    (w,) = [u for u in y.users if u.target is ops.wait.default]
    assert all(order[w] < order[u] for u in w.users)


def test_offload_is_off_by_default_under_inductor():
    p = lt.backend(budget=None)
    assert p.partitioner.offload is False


# --- errors and cache keys -------------------------------------------------

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


class _SwiGLU(nn.Module):
    """A gated MLP whose up projection is split in halves: the halves are
    views of one buffer."""

    def __init__(self, d=64):
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        a, b = self.up(x).split(x.shape[-1] * 2, dim=-1)
        return x + self.down(F.silu(a) * b)


def test_an_offloaded_half_of_a_split_offloads_its_buffer():
    """The plan offloads the first half of each split projection and keeps
    the second; min-cut saves the projection itself (the halves are views,
    re-made in the backward). The half's memory is freed only with the
    buffer's, so the buffer is offloaded: before, nothing was, silently,
    and the step kept what the plan had freed (Llama-8l on an H200 peaked
    about 300 MB over its prediction)."""
    model = nn.Sequential(*[_SwiGLU() for _ in range(2)])
    eager = _step(model, model)

    planner = _planner(lambda e, index: "offload" if "split" in e["op"]
                       and index == 0 else "retain", by_output=True)
    p, run = _compile_offloading(model, planner)
    _close(_step(model, run), eager)
    record = p.records[-1]
    assert len(record.offloaded) == 2, record.offloaded  # one a block
    assert all(name.startswith("addmm") for name in record.offloaded)


def _split_graph():
    """An aten graph: a projection split in halves, each half read, and a
    var_mean (two outputs, each its own buffer)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        a, b = (x @ w).split(4, dim=-1)
        var, mean = torch.ops.aten.var_mean.correction(x, [1])
        return a * b, var, mean
    gm = make_fx(f)(torch.randn(4, 8), torch.randn(8, 8))
    import operator

    def getitems_of(op):
        return [n for n in gm.graph.nodes if n.target is operator.getitem
                and n.args[0].target == op]
    return (getitems_of(torch.ops.aten.split.Tensor),
            getitems_of(torch.ops.aten.var_mean.correction))


def test_values_of_one_buffer_are_offloaded_together():
    """A value offloaded while another value of its buffer is kept frees
    nothing: the kept one is offloaded too, and said; where it cannot be
    (not a backward input), neither is, and that is said. The two outputs
    of a multi-output op are two buffers."""
    from lethe import _offload_insert as oi
    (a, b), (var, mean) = _split_graph()
    backward = torch.fx.Graph()
    inputs = {n.name: backward.placeholder(n.name)
              for n in (a, b, var, mean)}
    saved = [a, b, var, mean]
    by_buffer = {}
    for y in saved:
        by_buffer.setdefault(oi._shared_buffer(y), []).append(y)
    assert len(by_buffer) == 3  # the split's buffer, var, mean

    chosen, notes = {a: (inputs[a.name], "d"), var: (inputs[var.name], "d")}, []
    oi._widen_to_shared_buffers(chosen, by_buffer, inputs, notes)
    assert set(chosen) == {a, b, var} and chosen[b] == (inputs[b.name], "d")
    assert len(notes) == 1 and b.name in notes[0] and a.name in notes[0]

    chosen, notes = {a: (inputs[a.name], "d")}, []
    without_b = {k: v for k, v in inputs.items() if k != b.name}
    oi._widen_to_shared_buffers(chosen, by_buffer, without_b, notes)
    assert chosen == {} and notes[0].startswith("not offloaded")


def test_a_split_of_a_reshaped_projection_views_the_projection():
    """The projection's output is reshaped (a view, folded) and split: the
    halves are views of the projection's buffer, which no kernel copies.
    They were planned as two buffers of their own (alias -1), so a plan
    could offload or free one half while the buffer stayed."""
    doc = _fused_doc(nn.Sequential(_SwiGLU()))
    nodes = doc["nodes"]
    (split,) = [e for e in nodes if e["op"] == "aten.split.Tensor"
                and e["phase"] == "fwd"]
    (viewed,) = split["inputs"]
    assert nodes[viewed[0]]["op"] == "aten.addmm.default"
    assert [o.get("alias") for o in split["outputs"]] == [0, 0]

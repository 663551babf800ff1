"""The offload ops inside torch.compile, on CPU (torch >= 2.9; CI runs this
file in a virtual environment with torch 2.11 from PyPI, scripts/test.sh):
where the partitioner puts lethe.offload / release / reload / wait, what a
value and its buffer take with them, and the two ways to hold a copy under
CUDA graphs. The ops run their CPU stand-in (synchronous clones); the
captures themselves run in test_inductor_gpu.py."""

import os

from inductor_common import (  # noqa: F401 (the fixture is autouse)
    pytest, torch, nn, lethe, lt, _inductor, needs_lethe, _no_compile_caches,
    Attention, SwiGLU, _model, offload_all, _step, _compile, _close, _planner)


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


def test_an_offloaded_half_of_a_split_offloads_its_buffer():
    """The plan offloads the first half of each split projection and keeps
    the second; min-cut saves the projection itself (the halves are views,
    re-made in the backward). The half's memory is freed only with the
    buffer's, so the buffer is offloaded: before, nothing was, silently,
    and the step kept what the plan had freed (Llama-8l on an H200 peaked
    about 300 MB over its prediction)."""
    model = nn.Sequential(*[SwiGLU(bias=True) for _ in range(2)])
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

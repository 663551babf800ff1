"""Exports real training steps with the installed torch (Debian's 1.13 on
CPU in CI) and checks the JSON against the schema and against the model."""

import copy
import json
import os
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import lethe  # noqa: E402
import lethe.torch as lt  # noqa: E402
from lethe.schema import validate, workspace_output  # noqa: E402
from models import MLP, Block, ConvNet, TinyLM, lm_loss  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Results that share storage with an operand although their schema does not
# declare it (eager `_unsafe_view` returns a view).
STORAGE_VIEWS = {"aten._unsafe_view.default"}


def _mlp():
    torch.manual_seed(0)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    return MLP(), (x,), F.mse_loss, (y,)


def _convnet():
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    return ConvNet(), (x,), F.cross_entropy, (y,)


def _block():
    torch.manual_seed(0)
    x = torch.randn(2, 8, 16)
    return (Block(dim=16, heads=2, dropout=0.1), (x,),
            lambda out: out.pow(2).mean(), ())


MODELS = {"mlp": _mlp, "convnet": _convnet, "block": _block}


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    model, inputs, loss_fn, targets = MODELS[request.param]()
    before = copy.deepcopy(model.state_dict())
    path = tmp_path_factory.mktemp("export") / f"{request.param}.json"
    graph = lt.export_training_step(model, inputs, loss_fn, path,
                                    targets=targets)
    return request.param, model, before, graph, path


def _schema_alias(op):
    """Whether the ATen op's schema says some result aliases an argument."""
    ns, name, overload = op.split(".")
    target = getattr(getattr(getattr(torch.ops, ns), name), overload)
    return [r.alias_info is not None for r in target._schema.returns]


def test_valid_against_schema(exported):
    _, _, _, graph, path = exported
    assert validate(graph) == []
    with open(path) as f:
        text = f.read()
    assert json.loads(text) == json.loads(json.dumps(graph))
    # One node per line, so importer diagnostics quote one node.
    lines = text.splitlines()
    first = lines.index('"nodes": [') + 1
    for i in range(len(graph["nodes"])):
        assert json.loads(lines[first + i].rstrip(","))["id"] == i


def test_param_bytes_match_model(exported):
    _, model, _, graph, _ = exported
    params = list(model.parameters())
    expected = sum(p.numel() * p.element_size() for p in params)
    assert graph["totals"]["param_bytes"] == expected
    nodes = [n for n in graph["nodes"] if n["kind"] == "param"]
    assert [n["name"] for n in nodes] == [n for n, _ in model.named_parameters()]
    for n, p in zip(nodes, params):
        assert n["outputs"][0]["shape"] == list(p.shape)


def test_phases_forward_then_backward(exported):
    _, _, _, graph, _ = exported
    phases = [n["phase"] for n in graph["nodes"]]
    first_bwd = phases.index("bwd")
    assert "fwd" not in phases[first_bwd:]
    assert graph["nodes"][first_bwd - 1]["kind"] == "output"
    assert graph["nodes"][first_bwd]["kind"] == "tangent"
    assert graph["totals"]["n_fwd_ops"] > 0 and graph["totals"]["n_bwd_ops"] > 0
    # Every parameter gets a gradient from the backward output node.
    bwd_out = graph["nodes"][-1]
    grads = dict(zip(bwd_out["args"]["grad_of"], bwd_out["args"]["grads"]))
    for n in graph["nodes"]:
        if n["kind"] == "param":
            assert grads[n["id"]] is not None, n["name"]


def test_saved_set(exported):
    _, _, _, graph, _ = exported
    nodes = graph["nodes"]
    saved = {tuple(s) for s in graph["saved"]}
    assert saved
    # Exactly the forward values that backward nodes read.
    read = {tuple(r) for n in nodes if n["phase"] == "bwd"
            for r in n["inputs"] if nodes[r[0]]["phase"] == "fwd"}
    assert saved == read
    assert graph["totals"]["saved_bytes_logical"] == sum(
        nodes[i]["outputs"][k]["bytes"] for i, k in saved)


def test_aliases_only_on_views(exported):
    _, _, _, graph, _ = exported
    aliased_ops = set()
    for n in graph["nodes"]:
        if n["kind"] != "op":
            continue
        declared = _schema_alias(n["op"])
        for i, out in enumerate(n["outputs"]):
            says = declared[min(i, len(declared) - 1)] if declared else False
            if "alias" in out:
                aliased_ops.add(n["op"])
                assert says or n["op"] in STORAGE_VIEWS, (n["name"], n["op"])
                src = graph["nodes"][n["inputs"][out["alias"]][0]]
                assert src["outputs"], src
            elif says and out["shape"] is not None and out["bytes"] > 0:
                pytest.fail(f"{n['name']} ({n['op']}) result {i} is a view "
                            "without alias")
    assert aliased_ops  # every model here has views (t, view, detach)


def test_model_unchanged(exported):
    _, model, before, _, _ = exported
    after = model.state_dict()
    for key, value in before.items():
        assert torch.equal(after[key], value), key


def test_scopes(exported):
    name, model, _, graph, _ = exported
    ops = [n for n in graph["nodes"] if n["kind"] == "op"]
    modules = {m for m, _ in model.named_modules()}
    scoped = [n for n in ops if "scope" in n]
    assert scoped
    assert all(n["scope"] in modules for n in scoped)
    # Backward ops inherit the scope of the forward op they differentiate.
    assert any(n["phase"] == "bwd" for n in scoped)
    matmuls = [n for n in ops if n["op"] in ("aten.addmm.default",
                                             "aten.convolution.default")]
    assert matmuls and all("scope" in n for n in matmuls)


def test_convnet_batchnorm(exported):
    name, model, _, graph, _ = exported
    if name != "convnet":
        pytest.skip("BatchNorm only in the conv net")
    buffers = [n for n in graph["nodes"] if n.get("buffer")]
    assert {n["name"] for n in buffers} == {b for b, _ in model.named_buffers()}
    assert all(n["kind"] == "input" for n in buffers)
    ops = [n["op"] for n in graph["nodes"]]
    assert any("batch_norm" in op and "backward" in op for op in ops)
    assert "aten.convolution_backward.default" in ops


def test_dropout_is_rng_op(exported):
    name, _, _, graph, _ = exported
    rng = [n for n in graph["nodes"] if n["kind"] == "op"
           and lt.is_rng_op(n["op"])]
    if name != "block":
        assert not rng
        return
    assert len(rng) == 2  # attention and MLP dropout
    assert all(n["phase"] == "fwd" for n in rng)
    assert {n.get("scope") for n in rng} == {"attn.drop", "mlp.3"}


def test_deterministic(exported):
    name, _, _, graph, _ = exported
    model, inputs, loss_fn, targets = MODELS[name]()
    again = lt.export_training_step(model, inputs, loss_fn, targets=targets)
    assert again["nodes"] == graph["nodes"]
    assert again["saved"] == graph["saved"]


def test_lm_export_and_totals(tmp_path):
    torch.manual_seed(0)
    vocab = 64
    tokens = torch.randint(0, vocab, (2, 16))
    model = TinyLM(vocab=vocab, layers=2)
    graph = lt.export_training_step(model, (tokens,),
                                    lm_loss(vocab, tokens.roll(-1, 1)),
                                    tmp_path / "lm.json", replay="real")
    assert validate(graph) == []
    assert graph["batch"] == 2 and graph["seq"] == 16
    assert graph["capture"]["replay"] == "real"
    assert graph["capture"]["loss"] == pytest.approx(
        F.cross_entropy(model(tokens).reshape(-1, vocab),
                        tokens.roll(-1, 1).reshape(-1)).item(), rel=0.2)
    scopes = {n.get("scope") for n in graph["nodes"]}
    assert {"blocks.0.attn.qkv", "blocks.1.mlp.0", "embed"} <= scopes
    assert graph["totals"]["saved_bytes_unique_storage"] <= \
        graph["totals"]["saved_bytes_logical"]
    # The loss closes over the targets: a constant of the graph (1.13) or a
    # graph input that dynamo lifted (2.x).
    inputs = [n for n in graph["nodes"] if n["kind"] == "input"]
    assert [n["outputs"][0]["shape"] for n in inputs] == [[2, 16], [2, 16]]
    if graph["capture"]["method"] == "aot_function":
        assert any("real tensors" in w for w in graph["warnings"])


def test_fake_replay_matches_real(exported):
    name, _, _, graph, _ = exported
    model, inputs, loss_fn, targets = MODELS[name]()
    real = lt.export_training_step(model, inputs, loss_fn, targets=targets,
                                   replay="real")
    assert graph["capture"]["replay"] == "fake"  # the CPU default
    assert real["capture"]["replay"] == "real"
    assert real["nodes"] == graph["nodes"]
    assert real["totals"] == graph["totals"]


def test_real_replay_records_workspaces_as_last_outputs(monkeypatch):
    # A real replay on CUDA measures what each op holds at once beyond its
    # outputs (lethe._measure: cuDNN's convolution workspace, eager
    # temporaries; U-Net's eager peak was 14.5% over the importer's without
    # them) and writes it as the op's last output, read by nothing. The CPU
    # allocates none: a stand-in gives every op on a 4-D tensor 8 MiB.
    from lethe import _joint_graph
    from lethe.schema import is_workspace
    ws = 8 << 20
    model, inputs, loss_fn, targets = _convnet()
    plain = lt.export_training_step(model, inputs, loss_fn, targets=targets,
                                    replay="real")
    assert not any(is_workspace(o) for n in plain["nodes"]
                   for o in n["outputs"])

    def stand_in(target, args, kwargs):
        return ws if any(isinstance(a, torch.Tensor) and a.dim() == 4
                         for a in args) else 0

    monkeypatch.setattr(_joint_graph, "_workspace_bytes", stand_in)
    model, inputs, loss_fn, targets = _convnet()
    graph = lt.export_training_step(model, inputs, loss_fn, targets=targets,
                                    replay="real")
    assert validate(graph) == []
    with_ws = [n for n in graph["nodes"] if n["kind"] == "op"
               and any(is_workspace(o) for o in n["outputs"])]
    assert {n["op"] for n in with_ws} >= {"aten.convolution.default",
                                          "aten.convolution_backward.default"}
    assert all(is_workspace(n["outputs"][-1])
               and n["outputs"][-1]["bytes"] == ws for n in with_ws)
    # The importer counts it at its op alone: the unplanned peak grows by
    # at most one workspace.
    grew = (lethe.report(graph)["baseline_peak_bytes"]
            - lethe.report(plain)["baseline_peak_bytes"])
    assert 0 < grew <= ws


def test_targets_are_inputs():
    model, inputs, loss_fn, targets = _convnet()
    graph = lt.export_training_step(model, inputs, loss_fn, targets=targets)
    placeholders = [n for n in graph["nodes"] if n["kind"] == "input"
                    and not n.get("buffer")]
    assert [n["outputs"][0]["shape"] for n in placeholders] == [[4, 3, 8, 8], [4]]
    assert graph["warnings"] == []


def test_bad_arguments(tmp_path):
    model, inputs, loss_fn, targets = _mlp()
    loss_fn = lambda out: F.mse_loss(out, targets[0])  # noqa: E731
    path = tmp_path / "out.json"
    with pytest.raises(TypeError, match="torch.nn.Module"):
        lt.export_training_step(lambda x: x, inputs, loss_fn, path)
    with pytest.raises(ValueError, match="format"):
        lt.export_training_step(model, inputs, loss_fn, path, format="mlir")
    with pytest.raises(ValueError, match="replay mode"):
        lt.export_training_step(model, inputs, loss_fn, path, replay="meta")
    with pytest.raises(ValueError, match="capture method"):
        lt.export_training_step(model, inputs, loss_fn, path, method="jit")
    with pytest.raises(lt.ExportError, match="scalar"):
        lt.export_training_step(model, inputs, lambda out: out, path)
    assert not path.exists()
    assert os.listdir(tmp_path) == []  # no temporary left behind either


def test_validator_rejects_broken_graphs(exported):
    _, _, _, graph, _ = exported
    nodes = graph["nodes"]
    op = next(n for n in nodes if n["kind"] == "op" and n["inputs"])

    def broken(edit):
        g = json.loads(json.dumps(graph))
        edit(g, g["nodes"][op["id"]])
        return validate(g)

    def dangling(g, n):
        n["inputs"][0] = [len(nodes) + 5, 0]

    def wrong_bytes(g, n):
        n["outputs"][0]["bytes"] += 1

    def bad_alias(g, n):
        n["outputs"][0]["alias"] = len(n["inputs"])

    def bad_ref(g, n):
        n["args"] = [{"in": len(n["inputs"])}]

    def bad_saved(g, n):
        g["saved"].append([len(nodes) - 1, 0])

    def bwd_first(g, n):
        g["nodes"][0]["phase"] = "bwd"

    # A workspace (schema.workspace_output) is an op's last output, read
    # and saved by nothing.
    reader = next(n for n in nodes if n["kind"] == "op" and any(
        src == op["id"] for src, _ in n["inputs"]))

    def with_workspace(g, n):
        n["outputs"].append(workspace_output(1 << 20))

    def read_workspace(g, n):
        with_workspace(g, n)
        r = g["nodes"][reader["id"]]
        k = next(k for k, (src, _) in enumerate(r["inputs"])
                 if src == n["id"])
        r["inputs"][k] = [n["id"], len(n["outputs"]) - 1]

    def workspace_not_last(g, n):
        with_workspace(g, n)
        n["outputs"].append(dict(n["outputs"][0]))

    def saved_workspace(g, n):
        with_workspace(g, n)
        g["saved"].append([n["id"], len(n["outputs"]) - 1])

    assert broken(with_workspace) == []
    for edit, message in ((dangling, "not an earlier node"),
                          (wrong_bytes, "bytes"), (bad_alias, "alias"),
                          (bad_ref, "operand index"), (bad_saved, "saved"),
                          (bwd_first, "forward node after"),
                          (read_workspace, "reads the workspace"),
                          (workspace_not_last, "last output only"),
                          (saved_workspace, "is a workspace")):
        errors = broken(edit)
        assert errors and any(message in e for e in errors), (edit, errors)


def test_validator_accepts_shared_graphs():
    if not os.path.isdir(os.path.join(REPO, "graphs")):
        pytest.skip("the shared graphs are not in this checkout")
    for name in ("graph_gpt2.json", "graph_resnet50.json"):
        with open(os.path.join(REPO, "graphs", name)) as f:
            assert validate(json.load(f)) == [], name


def _translate():
    tool = os.path.join(REPO, os.environ.get("LETHE_BUILD_DIR", "build"),
                        "bin", "lethe-translate")
    if not os.path.exists(tool):
        return None
    help_text = subprocess.run([tool, "--help"], capture_output=True,
                               text=True).stdout
    return tool if "--import-graph-json" in help_text else None


def test_imports_with_lethe_translate(exported, tmp_path):
    tool = _translate()
    if tool is None or not shutil.which(tool):
        pytest.skip("lethe-translate has no --import-graph-json yet")
    _, _, _, _, path = exported
    result = subprocess.run([tool, "--import-graph-json", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "lethe.node" in result.stdout


def _methods():
    methods = ["aot_function"]
    try:
        import torch._dynamo  # noqa: F401
        methods.append("dynamo")
    except ImportError:
        pass
    return methods


@pytest.mark.parametrize("method", _methods())
def test_capture_methods_agree(method):
    model, inputs, loss_fn, _ = _block()
    graph = lt.export_training_step(model, inputs, loss_fn, method=method)
    assert validate(graph) == []
    assert graph["capture"]["method"] == method
    ops = [n for n in graph["nodes"] if n["kind"] == "op"]
    assert sum(1 for n in ops if lt.is_rng_op(n["op"])) == 2
    # Scopes come from dynamo's metadata, or from hooks on torch 1.13.
    if method == "dynamo" or torch.__version__ < "2":
        assert any(n.get("scope") == "attn.qkv" and n["phase"] == "bwd"
                   for n in ops)
    if method == "dynamo":
        assert all("seq_nr" in n for n in ops if n["op"] == "aten.mm.default")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_op_times(tmp_path):
    torch.manual_seed(0)
    vocab = 256
    tokens = torch.randint(0, vocab, (4, 64), device="cuda")
    model = TinyLM(vocab=vocab, dim=128, heads=4, layers=2, seq=64).cuda()
    graph = lt.export_training_step(model, (tokens,),
                                    lm_loss(vocab, tokens.roll(-1, 1)),
                                    tmp_path / "lm.json")
    assert validate(graph) == []
    ops = [n for n in graph["nodes"] if n["kind"] == "op"]
    assert all(n["time_us"] > 0 and len(n["times_us"]) == 5 for n in ops)
    totals = graph["totals"]
    assert totals["fwd_ms_sum_ops"] > 0 and totals["bwd_ms_sum_ops"] > 0
    assert totals["act_peak_bytes_eager"] >= totals["act_fwd_end_bytes_eager"] > 0
    assert graph["device"] != "cpu" and graph["timing"]


def test_tensor_passed_twice():
    torch.manual_seed(0)
    tokens = torch.randint(0, 64, (2, 16))
    model = TinyLM(vocab=64, layers=1)
    graph = lt.export_training_step(
        model, (tokens,), lambda logits, t: F.cross_entropy(
            logits.reshape(-1, 64), t.reshape(-1)), targets=(tokens,))
    assert validate(graph) == []
    inputs = [n for n in graph["nodes"] if n["kind"] == "input"]
    assert len(inputs) == 1 and inputs[0]["outputs"][0]["shape"] == [2, 16]


@pytest.mark.parametrize("method", _methods())
def test_tied_weights(method):
    torch.manual_seed(0)
    tokens = torch.randint(0, 64, (2, 16))
    model = TinyLM(vocab=64, layers=1)
    model.head.weight = model.embed.weight
    graph = lt.export_training_step(
        model, (tokens,), lambda logits, t: F.cross_entropy(
            logits.reshape(-1, 64), t.reshape(-1)),
        targets=(tokens.roll(-1, 1),), method=method)
    assert validate(graph) == [] and graph["warnings"] == []
    params = [n["name"] for n in graph["nodes"] if n["kind"] == "param"]
    assert "embed.weight" in params and "head.weight" not in params
    assert graph["totals"]["param_bytes"] == sum(
        p.numel() * p.element_size() for p in model.parameters())
    # The shared weight gets one gradient, summed over both uses.
    bwd_out = graph["nodes"][-1]
    assert sum(g is not None for g in bwd_out["args"]["grads"]) == len(params)


@pytest.mark.parametrize("kind", ["encoder", "mha"])
def test_torch_nn_transformer_modules(kind):
    torch.manual_seed(0)
    x = torch.randn(2, 8, 16)
    if kind == "encoder":
        model = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
            16, 2, 32, dropout=0.1, batch_first=True), 2)
        args, loss_fn = (x,), lambda out: out.pow(2).mean()
    else:
        model = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        args, loss_fn = (x, x, x), lambda out: out[0].pow(2).mean()
    graph = lt.export_training_step(model, args, loss_fn)
    assert validate(graph) == [] and graph["warnings"] == []
    assert graph["totals"]["param_bytes"] == sum(
        p.numel() * p.element_size() for p in model.parameters())
    rng = [n for n in graph["nodes"] if n["kind"] == "op"
           and lt.is_rng_op(n["op"])]
    assert (len(rng) > 0) == (kind == "encoder")

"""The compiled bindings: lethe.load / lethe.report over the C API."""

import json
import os

import pytest

import lethe

pytestmark = pytest.mark.skipif(
    lethe._lethe is None, reason="the compiled module is not built "
    "(scripts/build.sh; PYTHONPATH=build/python)")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RESNET = os.path.join(REPO, "graphs", "graph_resnet50.json")


def _tiny_graph():
    return {"nodes": [
        {"id": 0, "name": "x", "op": "placeholder", "kind": "input",
         "phase": "fwd", "inputs": [],
         "outputs": [{"shape": [256], "dtype": "float32", "bytes": 1024}]},
        {"id": 1, "name": "relu", "op": "aten.relu.default", "kind": "op",
         "phase": "fwd", "inputs": [[0, 0]], "args": [{"in": 0}],
         "outputs": [{"shape": [256], "dtype": "float32", "bytes": 1024}],
         "time_us": 2.0},
        {"id": 2, "name": "output", "op": "output", "kind": "output",
         "phase": "fwd", "inputs": [[1, 0]], "outputs": []}],
        "saved": []}


def test_report_of_shared_graph(tmp_path):
    if not os.path.exists(RESNET):
        pytest.skip("the shared graphs are not in this checkout")
    report = lethe.report(RESNET)
    assert report["graph"] == "resnet50"
    assert report["baseline_peak_bytes"] > 0 and report["top_live"]
    graph = lethe.load(RESNET, device="h100")
    assert graph.report(top=2)["device"] == "h100"
    assert len(graph.report(top=2)["top_live"]) <= 2
    trace = tmp_path / "trace.json"
    graph.write_trace(trace)
    assert "traceEvents" in json.loads(trace.read_text())


def test_load_dict_and_mlir():
    graph = lethe.load(_tiny_graph())
    assert "lethe.node" in graph.mlir
    assert graph.report()["num_nodes"] == 1
    assert lethe.load(graph) is graph


def test_exported_torch_graph():
    torch = pytest.importorskip("torch")
    import lethe.torch
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 2))
    exported = lethe.torch.export_training_step(
        model, (torch.randn(4, 8),), lambda out: out.pow(2).mean())
    report = lethe.report(exported, device="h100")
    assert report["num_nodes"] == exported["totals"]["n_fwd_ops"] + \
        exported["totals"]["n_bwd_ops"]


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="graph must be"):
        lethe.load(42)
    with pytest.raises(ValueError, match=".json or .mlir"):
        lethe.load(tmp_path / "graph.onnx")
    with pytest.raises(FileNotFoundError):
        lethe.load(tmp_path / "missing.json")
    with pytest.raises(TypeError, match="device"):
        lethe.load(_tiny_graph(), device=None)
    with pytest.raises(lethe.LetheError, match="unknown device 'tpu'"):
        lethe.load(_tiny_graph(), device="tpu")
    with pytest.raises(ValueError, match="top"):
        lethe.load(_tiny_graph()).report(top=-1)
    bad = _tiny_graph()
    bad["nodes"][1]["inputs"] = [[9, 0]]
    with pytest.raises(lethe.LetheError, match="node 1 'relu'.*node 9"):
        lethe.load(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": [')
    with pytest.raises(lethe.LetheError, match="broken.json:1:.*malformed JSON"):
        lethe.load(broken)
    with pytest.raises(lethe.LetheError, match="cannot open output file"):
        lethe.load(_tiny_graph()).write_trace(tmp_path / "no" / "dir.json")

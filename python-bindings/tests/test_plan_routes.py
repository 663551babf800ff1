"""One plan from every route (issue 19): the same graph and the same
lethe-plan options give the same decisions, predicted peak and step time
through the pass (lethe-opt --lethe-plan), the driver (lethe plan --json),
the C API (its first options struct and its option text) and Python
(lethe.plan), alignment included."""

import ctypes
import inspect
import json
import os
import re
import subprocess

import pytest

import lethe
from lethe import _native

pytestmark = pytest.mark.skipif(
    not _native.available(), reason="the native library is not built "
    "(scripts/build.sh; PYTHONPATH=build/python)")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(REPO, os.environ.get("LETHE_BUILD_DIR", "build"), "bin")

# Python keyword -> lethe-plan option; the driver's flag is the option
# itself (PlanOptionFlags).
OPTION = {"every_n": "n"}


def option_name(key):
    return OPTION.get(key, key.replace("_", "-"))


def odd_chain():
    """A chain whose tensors are no multiple of 256 bytes, so that the
    alignment changes the bytes planned."""
    out = [{"shape": [300001], "dtype": "float32", "bytes": 1200004}]
    nodes = [{"id": 0, "name": "x", "op": "placeholder", "kind": "input",
              "phase": "fwd", "inputs": [], "outputs": out}]
    for i in range(1, 9):
        nodes.append({"id": i, "name": f"f{i}", "op": "aten.relu.default",
                      "kind": "op", "phase": "fwd", "inputs": [[i - 1, 0]],
                      "args": [{"in": 0}], "outputs": out,
                      "time_us": 40.0 + i})
    grad = 8
    for i in range(8, 0, -1):
        nodes.append({"id": len(nodes), "name": f"b{i}",
                      "op": "aten.threshold_backward.default", "kind": "op",
                      "phase": "bwd", "inputs": [[grad, 0], [i, 0]],
                      "args": [{"in": 0}, {"in": 1}, 0], "outputs": out,
                      "time_us": 60.0})
        grad = len(nodes) - 1
    nodes.append({"id": len(nodes), "name": "output", "op": "output",
                  "kind": "output", "phase": "bwd", "inputs": [[grad, 0]],
                  "outputs": []})
    return {"nodes": nodes, "saved": [[i, 0] for i in range(1, 9)]}


def graph_path(name, tmp_path):
    if name == "odd_chain":
        path = tmp_path / "odd_chain.json"
        path.write_text(json.dumps(odd_chain()))
        return str(path)
    path = os.path.join(REPO, "graphs", name)
    if not os.path.exists(path):
        pytest.skip("the shared graphs are not in this checkout")
    return path


def from_document(doc):
    """Decisions by (exported node, output), peak and step of a plan
    document (`lethe plan --json`)."""
    return ({(v["node_id"], v["output"]): v["decision"]
             for v in doc["values"]}, doc["peak_bytes"], doc["step_us"])


def by_pass(mlir, text, tmp_path):
    """lethe-opt --lethe-plan on the graph's canonical MLIR: the decisions
    on the nodes (by their lethe.node_id) and the lethe.plan summary."""
    source = tmp_path / "step.mlir"
    source.write_text(mlir)
    planned = subprocess.run(
        [os.path.join(BIN, "lethe-opt"), f"--lethe-plan={text}",
         str(source)], check=True, capture_output=True, text=True).stdout
    decisions = {}
    for line in planned.splitlines():
        listed = re.search(r"lethe\.decisions = \[([^\]]*)\]", line)
        if not listed:
            continue
        node = int(re.search(r"lethe\.node_id = (\d+)", line).group(1))
        for output, entry in enumerate(listed.group(1).split(", ")):
            kind = re.match(r"#lethe<decision (\w+)>", entry)
            if kind:
                decisions[(node, output)] = kind.group(1)
    summary = re.search(r"lethe\.plan = #lethe\.plan<([^>]*)>",
                        planned).group(1)
    peak = int(re.search(r"\bpeak_bytes = (\d+)", summary).group(1))
    step = float(re.search(r"\bstep_us = ([0-9.e+-]+)", summary).group(1))
    return decisions, peak, step


def by_driver(path, options, tmp_path):
    out = tmp_path / "plan.json"
    flags = []
    for key, value in options.items():
        name = option_name(key)
        flags.append(f"--{name}={value}")
    subprocess.run([os.path.join(BIN, "lethe"), "plan", path, *flags,
                    "--json", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return from_document(json.loads(out.read_text()))


class _PlanOptionsV1(ctypes.Structure):
    """LethePlanOptions, the C API's first options struct (its layout is
    fixed: prebuilt callers pass it)."""
    _fields_ = [("budget", ctypes.c_char_p), ("policy", ctypes.c_char_p),
                ("every_n", ctypes.c_int), ("keep_ops", ctypes.c_char_p),
                ("offload_kept", ctypes.c_int),
                ("min_offload_bytes", ctypes.c_char_p),
                ("host_budget", ctypes.c_char_p), ("solver", ctypes.c_char_p),
                ("replay_rng", ctypes.c_int), ("bound", ctypes.c_int)]


def by_struct(path, options):
    """letheGraphPlan with the first options struct."""
    lib = ctypes.CDLL(_native.library_path())
    lib.letheGraphPlan.restype = _native._Status
    lib.letheGraphPlan.argtypes = [ctypes.c_void_p,
                                   ctypes.POINTER(_PlanOptionsV1),
                                   ctypes.POINTER(ctypes.c_void_p)]
    struct = _PlanOptionsV1(**{
        k: (str(v).encode() if isinstance(v, str) else v)
        for k, v in options.items()})
    graph = _native.Graph.load(path, "h200")
    handle = ctypes.c_void_p()
    _native._check(lib.letheGraphPlan(graph._handle, ctypes.byref(struct),
                                      ctypes.byref(handle)))
    plan = _native.Plan(handle, graph)
    return from_document(json.loads(plan.json()))


CASES = [
    # The defaults: alignment 256 (the arena's).
    ("odd_chain", {"budget": "60%"}),
    # Tensor bytes as they are.
    ("odd_chain", {"budget": "60%", "alignment": 1}),
    ("odd_chain", {"budget": "80%", "policy": "offload-all",
                   "alignment": 4096, "host_budget": "1GiB"}),
    ("graph_mobilenet_v3.json", {"budget": "60%"}),
    ("graph_mobilenet_v3.json", {"budget": "55%", "alignment": 1,
                                 "min_offload_bytes": "64KiB",
                                 "solver": "fast"}),
]


@pytest.mark.parametrize("name,options", CASES)
def test_every_route_gives_one_plan(name, options, tmp_path):
    path = graph_path(name, tmp_path)
    text = lethe._pass_options(options)
    python = from_document(json.loads(
        lethe.plan(path, **options).to_json()))
    routes = {
        "lethe-opt --lethe-plan": by_pass(lethe.load(path).mlir, text,
                                          tmp_path),
        "lethe plan --json": by_driver(path, options, tmp_path),
        "letheGraphPlanWithOptions": from_document(json.loads(
            _native.Graph.load(path, "h200").plan(text).json())),
    }
    if "alignment" not in options:
        routes["letheGraphPlan"] = by_struct(path, options)
    decisions, peak, step = python
    assert decisions and any(d != "retain" for d in decisions.values())
    for route, (d, p, s) in routes.items():
        assert d == decisions, route
        assert p == peak, route
        # The pass records the step time to the nanosecond.
        assert s == pytest.approx(step, abs=1e-3), route


def test_alignment_changes_the_bytes_planned(tmp_path):
    """The cases above differ: the alignment is applied on every route."""
    path = graph_path("odd_chain", tmp_path)
    aligned = lethe.plan(path, budget=None)
    plain = lethe.plan(path, budget=None, alignment=1)
    assert aligned.baseline_peak_bytes > plain.baseline_peak_bytes
    assert aligned.baseline_peak_bytes % 256 == 0


def pass_options():
    """The lethe-plan options (Passes.td) with their defaults, as lethe-opt
    prints the pass (keep-ops given: an empty list is not printed)."""
    pipeline = subprocess.run(
        [os.path.join(BIN, "lethe-opt"), "--lethe-plan=keep-ops=mm",
         "--dump-pass-pipeline", "-"], input="", check=True,
        capture_output=True, text=True).stderr
    body = re.search(r"lethe-plan\{(.*)\}", pipeline).group(1)
    options = dict(re.findall(r"([\w-]+)=(\{[^}]*\}|\S*)", body))
    assert len(options) >= 13 and "alignment" in options
    return options


def test_driver_has_every_pass_option():
    """Every lethe-plan option is a flag of `lethe plan`, the pass's own
    option: its name and its help are Passes.td's."""
    usage = subprocess.run([os.path.join(BIN, "lethe"), "plan", "--help"],
                           check=True, capture_output=True,
                           text=True).stdout
    help_of = dict(re.findall(r"(?m)^\s+--?([\w-]+)(?:=<\w+>| <\w+>)?\s+- (.*)$",
                              usage))
    printed = subprocess.run(
        [os.path.join(BIN, "lethe-opt"), "--help"], check=True,
        capture_output=True, text=True).stdout
    for name in pass_options():
        # (-n: LLVM lists a one-letter flag with one dash.)
        assert name in help_of, name
        # The pass's description, as lethe-opt lists the pass's options.
        assert help_of[name] in printed, name


def test_defaults_are_the_pass_options():
    """The library's defaults (lethePlanOptionDefaults) are the pass's, as
    lethe-opt prints it, and lethe.plan's keywords all default to None:
    the pass's default, one place (`device` too)."""
    assert _native.plan_option_defaults() == {
        k: v.strip("{}") for k, v in pass_options().items()
        if k != "keep-ops"}
    parameters = inspect.signature(lethe.plan).parameters
    keywords = {option_name(k): p for k, p in parameters.items()}
    for name in pass_options():
        assert name in keywords, name
        assert keywords[name].default in (None, ()), name
    assert lethe.load(odd_chain()).device == \
        _native.plan_option_defaults()["device"]


def test_option_text_errors():
    graph = lethe.load(odd_chain())
    with pytest.raises(lethe.LetheError, match="polcy"):
        graph._native.plan("polcy=full")
    # The graph's op times were filled in for its own device.
    with pytest.raises(lethe.LetheError, match="device 'h100'"):
        graph._native.plan("device=h100")


def test_threads_do_not_change_the_plan():
    # `auto` forks searches to other threads where asked; its plans are the
    # serial ones (docs/Planner.md, "Threads").
    graph = lethe.load(odd_chain())
    one = lethe.plan(graph, budget="60%", threads=1)
    two = lethe.plan(graph, budget="60%", threads=2)
    assert [d["decision"] for d in one.decisions] == \
        [d["decision"] for d in two.decisions]
    assert one.step_us == two.step_us and one.peak_bytes == two.peak_bytes
    with pytest.raises(ValueError, match="threads"):
        lethe.plan(graph, budget="60%", threads=-1)

"""Checks a training-step graph against Lethe's JSON schema (graphs/SCHEMA.md).

    python3 -m lethe.schema graph.json [...]   # exit 1 and one line per error

`validate(graph)` returns the list of problems found (empty when the graph
is valid); each names the node by id and name. Beyond field types it checks
what an importer relies on: references point to earlier nodes and existing
results, `{"in": k}` and `alias: k` name existing operands, tensor bytes
match shape and dtype, every forward node comes before every backward node,
`saved` holds forward values, a workspace is an op's last output that no node
reads or saves, and `totals` agrees with the nodes.
"""

import json
import math
import sys

_ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1, "complex64": 8, "complex128": 16, "complex32": 4,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2,
    "uint32": 4, "uint64": 8, "bool": 1, "qint8": 1, "quint8": 1,
    "qint32": 4,
}
# Non-tensor results (shape null): an int/float/bool value, or nothing.
_SCALAR_KINDS = {"none", "int", "float", "bool", "SymInt", "SymFloat"}
_KINDS = {"param", "input", "tangent", "op", "output"}
_PHASES = {"fwd", "bwd", "opt"}
_TOTALS = ("param_bytes", "n_nodes", "n_fwd_ops", "n_bwd_ops", "n_saved")


def itemsize(dtype):
    """Bytes per element of a schema dtype name, or None if unknown."""
    return _ITEMSIZE.get(dtype)


def workspace_output(nbytes):
    """The output entry that says an op allocates `nbytes` of scratch while
    it runs (a library's workspace): the last of its outputs, read by no
    node, so a planner counts it at that op alone."""
    return {"shape": [int(nbytes)], "dtype": "uint8", "bytes": int(nbytes),
            "workspace": True}


def is_workspace(out):
    """Whether an output entry is a workspace (workspace_output)."""
    return isinstance(out, dict) and out.get("workspace") is True


def tensor_outputs(node):
    """A node's outputs without its workspace: the results it returns."""
    return [o for o in node["outputs"] if not is_workspace(o)]


def validate(graph):
    """Returns a list of error strings; empty when `graph` is valid."""
    errors = []
    if not isinstance(graph, dict):
        return ["top level: expected an object"]
    nodes = graph.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        return ["top level: 'nodes' must be a non-empty list"]
    for i, node in enumerate(nodes):
        _check_node(i, node, nodes, errors)
    if errors:
        return errors
    _check_order(nodes, errors)
    _check_outputs(nodes, errors)
    _check_saved(graph.get("saved"), nodes, errors)
    _check_totals(graph, nodes, errors)
    return errors


def _where(i, node):
    name = node.get("name") if isinstance(node, dict) else None
    return f"node {i}" + (f" '{name}'" if name else "")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _check_node(i, node, nodes, errors):
    where = _where(i, node)
    if not isinstance(node, dict):
        errors.append(f"{where}: expected an object")
        return
    for key, kind in (("id", int), ("name", str), ("op", str), ("kind", str),
                      ("phase", str), ("inputs", list), ("outputs", list)):
        if key not in node:
            errors.append(f"{where}: missing '{key}'")
            return
        if not isinstance(node[key], kind) or isinstance(node[key], bool):
            errors.append(f"{where}: '{key}' must be {kind.__name__}")
            return
    if node["id"] != i:
        errors.append(f"{where}: id {node['id']} is not its index {i}")
    if node["kind"] not in _KINDS:
        errors.append(f"{where}: unknown kind '{node['kind']}'")
    if node["phase"] not in _PHASES:
        errors.append(f"{where}: unknown phase '{node['phase']}'")
    kind = node["kind"]
    if kind in ("param", "input", "tangent"):
        if node["op"] != "placeholder" or node["inputs"]:
            errors.append(f"{where}: a {kind} is a placeholder with no inputs")
        if len(node["outputs"]) != 1:
            errors.append(f"{where}: a placeholder has exactly one output")
    if kind == "output" and node["op"] != "output":
        errors.append(f"{where}: kind output needs op 'output'")
    if kind == "op" and node["op"] in ("placeholder", "output"):
        errors.append(f"{where}: op '{node['op']}' needs kind '{node['op']}'")
    if "buffer" in node and (not isinstance(node["buffer"], bool)
                             or kind != "input"):
        errors.append(f"{where}: 'buffer' is a bool on inputs only")
    time_us = node.get("time_us")
    if time_us is not None and (not isinstance(time_us, (int, float))
                                or isinstance(time_us, bool)
                                or not math.isfinite(time_us) or time_us < 0):
        errors.append(f"{where}: time_us must be null or a number >= 0")
    if "scope" in node and not isinstance(node["scope"], str):
        errors.append(f"{where}: scope must be a string")
    if "seq_nr" in node and not _is_int(node["seq_nr"]):
        errors.append(f"{where}: seq_nr must be an integer")

    for j, ref in enumerate(node["inputs"]):
        if (not isinstance(ref, list) or len(ref) != 2
                or not all(_is_int(x) for x in ref)):
            errors.append(f"{where}: inputs[{j}] must be [node_id, index]")
            continue
        src, index = ref
        if not 0 <= src < i:
            errors.append(f"{where}: inputs[{j}] refers to node {src}, "
                          "not an earlier node")
            continue
        outs = nodes[src].get("outputs") if isinstance(nodes[src], dict) else None
        if not isinstance(outs, list) or not 0 <= index < len(outs):
            errors.append(f"{where}: inputs[{j}] refers to result {index} of "
                          f"{_where(src, nodes[src])}, which has "
                          f"{len(outs) if isinstance(outs, list) else 0}")
        elif is_workspace(outs[index]):
            errors.append(f"{where}: inputs[{j}] reads the workspace of "
                          f"{_where(src, nodes[src])}, which no node reads")

    n_inputs = len(node["inputs"])
    used = set()
    for key in ("args", "kwargs"):
        if key in node:
            _check_refs(node[key], n_inputs, used, f"{where}: {key}", errors)
    if kind == "op" and used != set(range(n_inputs)):
        missing = sorted(set(range(n_inputs)) - used)
        errors.append(f"{where}: inputs {missing} appear in no argument")

    for j, out in enumerate(node["outputs"]):
        _check_output(f"{where}: outputs[{j}]", out, n_inputs, errors)
        if isinstance(out, dict) and "workspace" in out and not (
                is_workspace(out) and kind == "op" and "alias" not in out
                and j == len(node["outputs"]) - 1):
            errors.append(f"{where}: outputs[{j}]: 'workspace' is true on an "
                          "op's last output only, which aliases nothing")


def _check_refs(value, n_inputs, used, where, errors):
    if isinstance(value, dict):
        if set(value) == {"in"}:
            k = value["in"]
            if not _is_int(k) or not 0 <= k < n_inputs:
                errors.append(f"{where}: {{\"in\": {k}}} is not an operand "
                              f"index below {n_inputs}")
            else:
                used.add(k)
            return
        for v in value.values():
            _check_refs(v, n_inputs, used, where, errors)
    elif isinstance(value, list):
        for v in value:
            _check_refs(v, n_inputs, used, where, errors)
    elif isinstance(value, float) and not math.isfinite(value):
        errors.append(f"{where}: non-finite number")


def _check_output(where, out, n_inputs, errors):
    if not isinstance(out, dict):
        errors.append(f"{where}: expected an object")
        return
    shape, dtype, size = out.get("shape"), out.get("dtype"), out.get("bytes")
    if not isinstance(dtype, str) or not _is_int(size) or size < 0:
        errors.append(f"{where}: needs a dtype string and bytes >= 0")
        return
    if shape is None:
        if dtype not in _SCALAR_KINDS:
            errors.append(f"{where}: dtype '{dtype}' without a shape")
        if size != 0:
            errors.append(f"{where}: a non-tensor result has 0 bytes")
        if "alias" in out:
            errors.append(f"{where}: a non-tensor result cannot alias")
        return
    if (not isinstance(shape, list)
            or not all(_is_int(d) and d >= 0 for d in shape)):
        errors.append(f"{where}: shape must be a list of sizes >= 0")
        return
    width = itemsize(dtype)
    if width is None:
        errors.append(f"{where}: unknown dtype '{dtype}'")
        return
    if size != math.prod(shape) * width:
        errors.append(f"{where}: bytes {size} != {shape} x {width} "
                      f"({dtype})")
    if "alias" in out:
        k = out["alias"]
        if not _is_int(k) or not 0 <= k < n_inputs:
            errors.append(f"{where}: alias {k} is not an operand index "
                          f"below {n_inputs}")


def _check_order(nodes, errors):
    seen_bwd = None
    for i, node in enumerate(nodes):
        if node["phase"] == "bwd" and seen_bwd is None:
            seen_bwd = i
        if node["phase"] == "fwd" and seen_bwd is not None:
            errors.append(f"{_where(i, node)}: forward node after the first "
                          f"backward node {seen_bwd}")
            return


def _check_outputs(nodes, errors):
    outputs = [n for n in nodes if n["kind"] == "output"]
    if [n["phase"] for n in outputs] != ["fwd", "bwd"]:
        errors.append("top level: expected one forward output node and then "
                      "one backward output node")
        return
    bwd = outputs[1]
    args = bwd.get("args")
    if not isinstance(args, dict) or not isinstance(args.get("grads"), list) \
            or not isinstance(args.get("grad_of"), list):
        errors.append(f"{_where(bwd['id'], bwd)}: args needs 'grads' and "
                      "'grad_of' lists")
        return
    if len(args["grads"]) != len(args["grad_of"]):
        errors.append(f"{_where(bwd['id'], bwd)}: grads and grad_of differ "
                      "in length")
    for pid in args["grad_of"]:
        if (not _is_int(pid) or not 0 <= pid < len(nodes)
                or nodes[pid]["op"] != "placeholder"):
            errors.append(f"{_where(bwd['id'], bwd)}: grad_of {pid} is not a "
                          "placeholder")


def _check_saved(saved, nodes, errors):
    if not isinstance(saved, list):
        errors.append("top level: 'saved' must be a list")
        return
    seen = set()
    for ref in saved:
        if (not isinstance(ref, list) or len(ref) != 2
                or not all(_is_int(x) for x in ref)
                or not 0 <= ref[0] < len(nodes)
                or not 0 <= ref[1] < len(nodes[ref[0]]["outputs"])):
            errors.append(f"saved: {ref} is not a [node_id, index] of a result")
            continue
        node = nodes[ref[0]]
        if is_workspace(node["outputs"][ref[1]]):
            errors.append(f"saved: {ref} is a workspace, not a value")
        if node["phase"] != "fwd":
            errors.append(f"saved: {ref} is {_where(ref[0], node)}, not a "
                          "forward value")
        if tuple(ref) in seen:
            errors.append(f"saved: {ref} listed twice")
        seen.add(tuple(ref))


def _check_totals(graph, nodes, errors):
    totals = graph.get("totals")
    if not isinstance(totals, dict):
        errors.append("top level: 'totals' must be an object")
        return
    for key in _TOTALS:
        if not _is_int(totals.get(key)):
            errors.append(f"totals: '{key}' must be an integer")
    if errors:
        return
    ops = [n for n in nodes if n["kind"] == "op"]
    expected = {
        "n_nodes": len(nodes),
        "n_fwd_ops": sum(1 for n in ops if n["phase"] == "fwd"),
        "n_bwd_ops": sum(1 for n in ops if n["phase"] == "bwd"),
        "n_saved": len(graph["saved"]),
    }
    for key, value in expected.items():
        if totals[key] != value:
            errors.append(f"totals: {key} is {totals[key]}, the nodes give "
                          f"{value}")


def main(argv):
    status = 0
    for path in argv:
        try:
            with open(path) as f:
                graph = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: {e}")
            status = 1
            continue
        problems = validate(graph)
        for p in problems:
            print(f"{path}: {p}")
        if problems:
            status = 1
        else:
            print(f"{path}: valid ({len(graph['nodes'])} nodes)")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

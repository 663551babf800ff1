#!/usr/bin/env python3
"""Rewrites a JSON training-step graph (graphs/SCHEMA.md) as the generic-form
MLIR a small FX exporter prints (docs/Import.md, "Generic MLIR"): one
unregistered `aten.*` op per node with `overload`, `fx_name`, `is_view`,
`phase`, `time_us` and `scope` attributes. Importing both forms must give the
same graph, which test/Import/generic-vs-json.test checks.

    json_to_fx_mlir.py [--no-phase] GRAPH.json > GRAPH.mlir

--no-phase leaves the phases out, for the importer to infer.
"""
import json
import sys

DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32",
          "float64": "f64", "int64": "i64", "int32": "i32", "int16": "i16",
          "int8": "i8", "uint8": "ui8", "bool": "i1"}


def mlir_type(output):
    if output["dtype"] == "none":
        return "none"
    if output["dtype"] == "int":
        return "i64"
    dims = "x".join(str(d) for d in output["shape"])
    return "tensor<%s%s>" % (dims + "x" if dims else "", DTYPES[output["dtype"]])


def quote(text):
    return json.dumps(text)


def main():
    with_phase = "--no-phase" not in sys.argv
    graph = json.load(open([a for a in sys.argv[1:] if a != "--no-phase"][0]))
    nodes = graph["nodes"]
    values = {}  # (id, output index) -> (SSA name, type)
    args, body, returned = [], [], []
    for node in nodes:
        types = [mlir_type(o) for o in node["outputs"]]
        if node["kind"] in ("param", "input", "tangent"):
            name = "%%arg%d" % len(args)
            kind = "buffer" if node.get("buffer") else node["kind"]
            args.append((name, types[0], kind, node["name"]))
            values[(node["id"], 0)] = (name, types[0])
            continue
        operands = [values[tuple(ref)] for ref in node["inputs"]]
        if node["kind"] == "output":
            returned += operands
            continue
        op, _, overload = node["op"].rpartition(".")
        attrs = ["overload = %s" % quote(overload),
                 "fx_name = %s" % quote(node["name"])]
        if with_phase:
            attrs.append("phase = %s" % quote(node["phase"]))
        if node.get("time_us") is not None:
            attrs.append("time_us = %r : f64" % float(node["time_us"]))
        if node.get("scope"):
            attrs.append("scope = %s" % quote(node["scope"]))
        if any(o.get("alias") == 0 for o in node["outputs"]):
            attrs.append("is_view")
        result = "%%n%d" % node["id"]
        for index, type_ in enumerate(types):
            values[(node["id"], index)] = (
                result + ("#%d" % index if len(types) > 1 else ""), type_)
        lhs = (result + (":%d" % len(types) if len(types) > 1 else "")
               + " = ") if types else ""
        body.append('    %s"%s"(%s) {%s} : (%s) -> (%s) loc(%s)' % (
            lhs, op, ", ".join(v for v, _ in operands), ", ".join(attrs),
            ", ".join(t for _, t in operands), ", ".join(types),
            quote(node["name"])))
    arg_types = ", ".join(t for _, t, _, _ in args)
    result_types = ", ".join(t for _, t in returned)
    arg_attrs = ", ".join('{lethe.kind = %s}' % quote(k) for _, _, k, _ in args)
    print('"builtin.module"() ({')
    print('  "func.func"() <{arg_attrs = [%s], function_type = (%s) -> (%s), '
          'sym_name = "step"}> ({' % (arg_attrs, arg_types, result_types))
    print("  ^bb0(%s):" % ", ".join(
        "%s: %s loc(%s)" % (n, t, quote(name)) for n, t, _, name in args))
    print("\n".join(body))
    print('    "func.return"(%s) : (%s) -> ()' % (
        ", ".join(v for v, _ in returned), result_types))
    print("  }) : () -> ()")
    print("}) : () -> ()")


if __name__ == "__main__":
    main()

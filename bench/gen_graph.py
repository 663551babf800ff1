#!/usr/bin/env python3
"""Writes a synthetic transformer-like training step in the JSON graph schema
(graphs/SCHEMA.md), of about N nodes, for scaling benchmarks.

Each layer's forward is layernorm -> qkv matmul -> attention -> projection ->
residual add -> layernorm -> mlp up -> gelu -> mlp down -> residual add (with
views between); the backward mirrors it in reverse with the usual ATen
backward ops. Sizes scale with --hidden/--seq/--batch; times are rough
(FLOPs at 700 TFLOP/s, elementwise at 3 TB/s) and serve only to make the
step non-trivial.

    bench/gen_graph.py --nodes 2000 -o /tmp/g2000.json
"""
import argparse
import json

DT = 2  # bf16


class Builder:
    def __init__(self):
        self.nodes = []

    def node(self, op, phase, inputs, shapes, time_us=None, alias=None,
             kind="op", name=None, scope=None):
        outputs = []
        for i, shape in enumerate(shapes):
            numel = 1
            for d in shape:
                numel *= d
            out = {"shape": shape, "dtype": "bfloat16", "bytes": numel * DT}
            if alias is not None and i == 0:
                out["alias"] = alias
            outputs.append(out)
        nid = len(self.nodes)
        n = {"id": nid, "name": name or f"n{nid}", "op": op, "kind": kind,
             "phase": phase, "inputs": [[i, 0] for i in inputs],
             "outputs": outputs, "time_us": time_us}
        if scope:
            n["scope"] = scope
        self.nodes.append(n)
        return nid


def mm_us(m, n, k):
    return max(2.0, 2.0 * m * n * k / 700e12 * 1e6)


def ew_us(numel):
    return max(2.0, 3 * numel * DT / 3e12 * 1e6)


def build(layers, hidden, seq, batch):
    b = Builder()
    tok = batch * seq
    x = b.node("placeholder", "fwd", [], [[tok, hidden]], kind="input",
               name="x")
    params = []
    for l in range(layers):
        params.append({
            "qkv": b.node("placeholder", "fwd", [], [[3 * hidden, hidden]],
                          kind="param", name=f"h.{l}.qkv.weight"),
            "proj": b.node("placeholder", "fwd", [], [[hidden, hidden]],
                           kind="param", name=f"h.{l}.proj.weight"),
            "up": b.node("placeholder", "fwd", [], [[4 * hidden, hidden]],
                         kind="param", name=f"h.{l}.up.weight"),
            "down": b.node("placeholder", "fwd", [], [[hidden, 4 * hidden]],
                           kind="param", name=f"h.{l}.down.weight"),
        })
    tangent = b.node("placeholder", "bwd", [], [[]], kind="tangent",
                     name="tangents_1")
    saved = []
    h = x
    for l, p in enumerate(params):
        s = f"h.{l}"
        ln1 = b.node("aten.native_layer_norm.default", "fwd", [h],
                     [[tok, hidden]], ew_us(tok * hidden), scope=s + ".ln_1")
        wt = b.node("aten.t.default", "fwd", [p["qkv"]], [[hidden, 3 * hidden]],
                    1.3, alias=0, scope=s + ".attn")
        qkv = b.node("aten.mm.default", "fwd", [ln1, wt], [[tok, 3 * hidden]],
                     mm_us(tok, 3 * hidden, hidden), scope=s + ".attn")
        att = b.node("aten._scaled_dot_product_efficient_attention.default",
                     "fwd", [qkv], [[tok, hidden]],
                     max(5.0, 4.0 * batch * seq * seq * hidden / 500e12 * 1e6),
                     scope=s + ".attn")
        pt = b.node("aten.t.default", "fwd", [p["proj"]], [[hidden, hidden]],
                    1.3, alias=0, scope=s + ".attn")
        proj = b.node("aten.mm.default", "fwd", [att, pt], [[tok, hidden]],
                      mm_us(tok, hidden, hidden), scope=s + ".attn")
        r1 = b.node("aten.add.Tensor", "fwd", [h, proj], [[tok, hidden]],
                    ew_us(tok * hidden), scope=s)
        ln2 = b.node("aten.native_layer_norm.default", "fwd", [r1],
                     [[tok, hidden]], ew_us(tok * hidden), scope=s + ".ln_2")
        ut = b.node("aten.t.default", "fwd", [p["up"]], [[hidden, 4 * hidden]],
                    1.3, alias=0, scope=s + ".mlp")
        up = b.node("aten.mm.default", "fwd", [ln2, ut], [[tok, 4 * hidden]],
                    mm_us(tok, 4 * hidden, hidden), scope=s + ".mlp")
        act = b.node("aten.gelu.default", "fwd", [up], [[tok, 4 * hidden]],
                     ew_us(4 * tok * hidden), scope=s + ".mlp")
        dt = b.node("aten.t.default", "fwd", [p["down"]], [[4 * hidden, hidden]],
                    1.3, alias=0, scope=s + ".mlp")
        down = b.node("aten.mm.default", "fwd", [act, dt], [[tok, hidden]],
                      mm_us(tok, hidden, 4 * hidden), scope=s + ".mlp")
        h = b.node("aten.add.Tensor", "fwd", [r1, down], [[tok, hidden]],
                   ew_us(tok * hidden), scope=s)
        saved.append((ln1, qkv, att, r1, ln2, up, act))
    loss = b.node("aten.sum.default", "fwd", [h], [[]], ew_us(tok * hidden),
                  name="loss")
    fwd_out = b.node("output", "fwd", [loss], [], kind="output", name="output")
    b.nodes[fwd_out]["outputs"] = []
    g = b.node("aten.expand.default", "bwd", [tangent], [[tok, hidden]], 1.3)
    grads = []
    for l in reversed(range(layers)):
        ln1, qkv, att, r1, ln2, up, act = saved[l]
        p = params[l]
        s = f"h.{l}"
        gd = b.node("aten.mm.default", "bwd", [g, p["down"]], [[tok, 4 * hidden]],
                    mm_us(tok, 4 * hidden, hidden), scope=s + ".mlp")
        wd = b.node("aten.mm.default", "bwd", [g, act], [[hidden, 4 * hidden]],
                    mm_us(hidden, 4 * hidden, tok), scope=s + ".mlp")
        ga = b.node("aten.gelu_backward.default", "bwd", [gd, up],
                    [[tok, 4 * hidden]], ew_us(8 * tok * hidden), scope=s + ".mlp")
        gu = b.node("aten.mm.default", "bwd", [ga, p["up"]], [[tok, hidden]],
                    mm_us(tok, hidden, 4 * hidden), scope=s + ".mlp")
        wu = b.node("aten.mm.default", "bwd", [ga, ln2], [[4 * hidden, hidden]],
                    mm_us(4 * hidden, hidden, tok), scope=s + ".mlp")
        gl2 = b.node("aten.native_layer_norm_backward.default", "bwd",
                     [gu, r1], [[tok, hidden]], ew_us(3 * tok * hidden),
                     scope=s + ".ln_2")
        g2 = b.node("aten.add.Tensor", "bwd", [g, gl2], [[tok, hidden]],
                    ew_us(tok * hidden), scope=s)
        gp = b.node("aten.mm.default", "bwd", [g2, p["proj"]], [[tok, hidden]],
                    mm_us(tok, hidden, hidden), scope=s + ".attn")
        wp = b.node("aten.mm.default", "bwd", [g2, att], [[hidden, hidden]],
                    mm_us(hidden, hidden, tok), scope=s + ".attn")
        gatt = b.node("aten._scaled_dot_product_efficient_attention_backward"
                      ".default", "bwd", [gp, qkv, att], [[tok, 3 * hidden]],
                      max(10.0, 10.0 * batch * seq * seq * hidden / 500e12 * 1e6),
                      scope=s + ".attn")
        gq = b.node("aten.mm.default", "bwd", [gatt, p["qkv"]], [[tok, hidden]],
                    mm_us(tok, hidden, 3 * hidden), scope=s + ".attn")
        wq = b.node("aten.mm.default", "bwd", [gatt, ln1], [[3 * hidden, hidden]],
                    mm_us(3 * hidden, hidden, tok), scope=s + ".attn")
        gl1 = b.node("aten.native_layer_norm_backward.default", "bwd",
                     [gq, ln1], [[tok, hidden]], ew_us(3 * tok * hidden),
                     scope=s + ".ln_1")
        g = b.node("aten.add.Tensor", "bwd", [g2, gl1], [[tok, hidden]],
                   ew_us(tok * hidden), scope=s)
        grads += [wd, wu, wp, wq]
    bwd_out = b.node("output", "bwd", grads, [], kind="output", name="output_1")
    b.nodes[bwd_out]["outputs"] = []
    saved_refs = sorted({n for t in saved for n in t})
    return {"model": f"synthetic-{layers}x{hidden}", "batch": batch,
            "seq": seq, "dtype": "bf16", "nodes": b.nodes,
            "saved": [[n, 0] for n in saved_refs], "totals": {}}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2000,
                    help="approximate number of nodes (sets the layer count)")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    # 4 parameters, 14 forward and 14 backward nodes per layer, plus 6.
    layers = max(1, round((args.nodes - 6) / 32))
    graph = build(layers, args.hidden, args.seq, args.batch)
    with open(args.output, "w") as f:
        json.dump(graph, f)
    print(f"{args.output}: {len(graph['nodes'])} nodes, {layers} layers")


if __name__ == "__main__":
    main()

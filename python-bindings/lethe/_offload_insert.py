"""Where the offload ops go in the partitioned graphs (lethe._inductor's
step 5): the forward saves the host copy of each offloaded value instead of
the value, and the backward reloads it at the plan's prefetch point and
waits for it before its first use (the ops: lethe._offload_ops)."""

from __future__ import annotations

import operator
from typing import List

import torch

from lethe._fused_graph import value_names


def insert(fw, bw, num_fwd_outputs, offloaded, plan, fused,
                        device) -> List[str]:
    """Saves the host copy of every offloaded value the forward saves, and
    reloads it in the backward at the plan's prefetch point."""
    from lethe import _offload_ops
    _offload_ops.ensure_registered()
    ops = torch.ops.lethe
    fw_out = next(n for n in fw.graph.nodes if n.op == "output")
    outs = list(fw_out.args[0])
    fw_by_name = {n.name: n for n in fw.graph.nodes}
    bw_by_name = {n.name: n for n in bw.graph.nodes}
    joint_order = {e["name"]: e["id"] for e in fused.doc["nodes"]}
    moved = []
    for n, index in offloaded:
        decision = plan.owners.get((fused.root_of[n], index))
        for name in value_names(n, index):
            x = fw_by_name.get(name)
            p = bw_by_name.get(name)
            if x is None or p is None or x not in outs[num_fwd_outputs:] \
                    or p.op != "placeholder":
                continue
            val = x.meta["val"]
            with fw.graph.inserting_after(x):
                h = fw.graph.call_function(ops.offload.default, (x,))
            h.meta["val"] = _fake_like(val, torch.device("cpu"))
            readers = [u for u in x.users if u is not h and u is not fw_out]
            if readers:
                first = min(readers, key=_position(fw.graph))
                with fw.graph.inserting_before(first):
                    fenced = fw.graph.call_function(ops.fence.default, (x, h))
                fenced.meta["val"] = val
                for u in readers:
                    u.replace_input_with(x, fenced)
            outs = [h if a is x else a for a in outs]
            fw_out.args = (tuple(outs),) + tuple(fw_out.args[1:])

            # Backward: the placeholder is now the host copy.
            p.meta["val"] = _fake_like(p.meta["val"], torch.device("cpu"))
            users = list(p.users)
            if not users:
                continue
            first_use = min(users, key=_position(bw.graph))
            dep = _prefetch_anchor(bw, decision, fused, joint_order,
                                   first_use)
            where = dep if dep is not None else _last_placeholder(bw)
            with bw.graph.inserting_after(where):
                y = bw.graph.call_function(
                    ops.reload.default,
                    (p, device, dep if dep is not None else None))
            y.meta["val"] = _fake_like(val, device)
            if dep is not None:
                _pin_after(bw, y, first_use)
            with bw.graph.inserting_before(first_use):
                w = bw.graph.call_function(ops.wait.default, (y,))
            w.meta["val"] = y.meta["val"]
            for u in users:
                if u is not y:
                    u.replace_input_with(p, w)
            moved.append(name)
    for g in (fw, bw):
        g.graph.lint()
        g.recompile()
    return moved


def _position(graph):
    order = {n: i for i, n in enumerate(graph.nodes)}
    return lambda n: order[n]


def _last_placeholder(gm):
    last = None
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            last = n
    return last


def _prefetch_anchor(bw, decision, fused, joint_order, first_use):
    """The backward node after which the reload starts: the plan's prefetch
    point when the backward computes it, else the latest backward tensor
    node of the joint graph before it; never after the first use."""
    if decision is None or decision.prefetch_after is None:
        return None
    entry = fused.doc["nodes"][decision.prefetch_after]
    target = entry["id"]
    position = _position(bw.graph)
    best = None
    for n in bw.graph.nodes:
        if n.op != "call_function" or not isinstance(
                n.meta.get("val"), torch.Tensor):
            continue
        if position(n) >= position(first_use):
            break
        nid = joint_order.get(n.name)
        if nid is not None and nid <= target:
            best = n
    return best


def _pin_after(bw, y, first_use):
    """Makes the first tensor node after the reload read through a fence on
    it, so that inductor cannot sink the reload to its first use."""
    ops = torch.ops.lethe
    node = y.next
    while node is not first_use and node.op != "output":
        if node.op == "call_function" and isinstance(
                node.meta.get("val"), torch.Tensor) and node.users \
                and node.target is not operator.getitem:
            readers = list(node.users)
            with bw.graph.inserting_after(node):
                fenced = bw.graph.call_function(ops.fence.default,
                                                (node, y))
            fenced.meta["val"] = node.meta["val"]
            for u in readers:
                u.replace_input_with(node, fenced)
            return
        node = node.next


def _fake_like(val, device):
    """A fake tensor like `val` on `device`, in val's fake mode."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return torch.empty_strided(val.size(), val.stride(), dtype=val.dtype,
                                   device="meta")
    with mode:
        return torch.empty_strided(val.size(), val.stride(), dtype=val.dtype,
                                   device=device)

"""Where the offload ops go in the partitioned graphs (lethe._inductor's
step 5): the forward saves the host copy of each offloaded value instead of
the value and lets the value go at the plan's release point, and the
backward reloads it at the plan's prefetch point and waits for it before
its first use (the ops: lethe._offload_ops)."""

from __future__ import annotations

import operator
from typing import List

import torch

from lethe._fused_graph import value_names


def insert(fw, bw, num_fwd_outputs, offloaded, plan, fused,
           device) -> List[str]:
    """Saves the host copy of every offloaded value the forward saves,
    releases the value at the plan's release point, and reloads it in the
    backward at the plan's prefetch point."""
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
            if any(isinstance(d, torch.SymInt)
                   for d in tuple(val.size()) + tuple(val.stride())):
                continue  # a dynamic shape: the buffer's size is not known
            with fw.graph.inserting_after(x):
                h = fw.graph.call_function(ops.offload.default, (x,))
            h.meta["val"] = _fake_like(val, torch.device("cpu"))
            readers = [u for u in x.users if u is not h and u is not fw_out]
            if readers:
                first = min(readers, key=_position(fw.graph))
                with fw.graph.inserting_before(first):
                    fenced = fw.graph.call_function(ops.issued.default,
                                                    (x, h))
                fenced.meta["val"] = val
                for u in readers:
                    u.replace_input_with(x, fenced)
            outs = [h if a is x else a for a in outs]
            fw_out.args = (tuple(outs),) + tuple(fw_out.args[1:])
            _release_at(fw, h, _point(decision, "release_after", fused),
                        joint_order)
            outs = list(fw_out.args[0])  # the release may be an output

            # Backward: the placeholder is now the host copy.
            p.meta["val"] = _fake_like(p.meta["val"], torch.device("cpu"))
            users = list(p.users)
            if not users:
                continue
            first_use = min(users, key=_position(bw.graph))
            dep = _prefetch_anchor(
                bw, _point(decision, "prefetch_after", fused), joint_order,
                first_use)
            where = dep if dep is not None else _last_placeholder(bw)
            with bw.graph.inserting_after(where):
                b = bw.graph.call_function(
                    ops.buffer.default,
                    (dep, list(val.size()), list(val.stride()), val.dtype,
                     device))
            b.meta["val"] = _fake_like(val, device)
            with bw.graph.inserting_after(b):
                y = bw.graph.call_function(ops.reload.default, (p, b))
            y.meta["val"] = b.meta["val"]
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


def _point(decision, field, fused):
    """The joint-graph id of a decision's point (`release_after`,
    `prefetch_after`), None where the plan gives none."""
    if decision is None or getattr(decision, field) is None:
        return None
    return fused.doc["nodes"][getattr(decision, field)]["id"]


def _tensor_node(n) -> bool:
    return n.op == "call_function" and isinstance(
        n.meta.get("val"), torch.Tensor) and n.target is not operator.getitem


def _release_at(fw, h, target, joint_order):
    """Releases the offloaded value at the forward node the plan releases
    it after: the latest forward node after the offload whose joint id is
    at most `target`'s (the first one after the offload if none is, the
    forward's last where the plan gives no point). The release reads that
    node and every reader of the node reads the release, so that inductor
    schedules it there."""
    ops = torch.ops.lethe
    after = [n for n in _nodes_after(h) if _tensor_node(n) and n.users]
    if not after:  # the offload is the forward's last node: release at once
        at = h
    elif target is None:
        at = after[-1]
    else:
        fits = [n for n in after if joint_order.get(n.name, target + 1)
                <= target]
        at = fits[-1] if fits else after[0]
    readers = list(at.users)
    with fw.graph.inserting_after(at):
        r = fw.graph.call_function(ops.release.default, (at, h))
    r.meta["val"] = at.meta["val"]
    for u in readers:
        u.replace_input_with(at, r)


def _nodes_after(n):
    node = n.next
    while node.op != "output":
        yield node
        node = node.next


def _position(graph):
    order = {n: i for i, n in enumerate(graph.nodes)}
    return lambda n: order[n]


def _last_placeholder(gm):
    last = None
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            last = n
    return last


def _prefetch_anchor(bw, target, joint_order, first_use):
    """The backward node after which the reload starts: the latest backward
    tensor node of the joint graph at or before `target` (the plan's
    prefetch point), never after the first use; None where the plan gives
    no point or no such node comes before the first use."""
    if target is None:
        return None
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

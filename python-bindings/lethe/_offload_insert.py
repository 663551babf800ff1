"""Where the offload ops go in the partitioned graphs (lethe._inductor's
step 5): the forward saves the host copy of each offloaded value instead of
the value and lets the value go at the plan's release point, and the
backward reloads it at the plan's prefetch point and waits for it before
its first use (the ops: lethe._offload_ops). A saved view with gaps is
copied as the buffer it views, once for all its saved views, and viewed
again in the backward."""

from __future__ import annotations

import operator
from typing import List, Optional

import torch

from lethe._fused_graph import value_names


def insert(fw, bw, num_fwd_outputs, offloaded, plan, fused,
           device, token: bool = False, notes: Optional[List[str]] = None
           ) -> List[str]:
    """Saves the host copy of every offloaded value the forward saves,
    releases the value at the plan's release point, and reloads it in the
    backward at the plan's prefetch point. `token`: the graphs run as CUDA
    graphs with the copies captured in them; the forward saves a device
    token of each host copy instead of the copy (lethe._offload_ops).
    Where an offloaded value shares its buffer with saved values the plan
    keeps, those are offloaded too (the buffer is freed only when none is
    kept), each said in `notes`; returns the names of the values moved."""
    from lethe import _offload_ops
    _offload_ops.ensure_registered()
    fw_out = next(n for n in fw.graph.nodes if n.op == "output")
    saved = list(fw_out.args[0])[num_fwd_outputs:]
    fw_by_name = {n.name: n for n in fw.graph.nodes}
    bw_by_name = {n.name: n for n in bw.graph.nodes}
    joint_order = {e["name"]: e["id"] for e in fused.doc["nodes"]}
    # The saved values to offload, each with its plan decision: the value,
    # or where min-cut saved the buffer it views instead (a split's halves
    # are views, re-made in the backward from the saved projection), the
    # saved values of that buffer.
    by_buffer = {}
    for y in saved:
        if isinstance(y, torch.fx.Node) and y.op == "call_function":
            root = _shared_buffer(y)
            if root is not None:
                by_buffer.setdefault(root, []).append(y)
    chosen = {}  # saved node -> (backward placeholder, decision)
    for n, index in offloaded:
        decision = plan.owners.get((fused.root_of[n], index))
        for name in value_names(n, index):
            x = fw_by_name.get(name)
            if x is None:
                continue
            targets = [x] if x in saved else by_buffer.get(
                _shared_buffer(x) if x.op == "call_function" else None, [])
            for y in targets:
                p = bw_by_name.get(y.name)
                if p is not None and p.op == "placeholder":
                    chosen.setdefault(y, (p, decision))
    _widen_to_shared_buffers(chosen, by_buffer, bw_by_name, notes)
    # What each saved value's copy is taken of (its source): the value, or
    # for a view with gaps (q of a fused q/k/v projection) the buffer it
    # views, copied once for all its views, which the backward views
    # again. A view's own copy would hold the gaps: a host copy and a
    # reload buffer of the whole span (3x q's bytes).
    groups = {}  # source node -> [(saved node, backward placeholder)]
    decision_of = {}
    for x, (p, decision) in chosen.items():
        source = _source_of(x)
        if source is None:
            continue  # a dynamic shape, or a view with gaps of an input
        groups.setdefault(source, []).append((x, p))
        decision_of.setdefault(source, decision)
    moved = []
    for source, members in groups.items():
        if source is not members[0][0]:
            # A view's buffer is let go only if no saved value keeps it:
            # every saved view of it is offloaded.
            offloaded_views = {x for x, _ in members}
            if any(_buffer_of(y) is source and y not in offloaded_views
                   for y in saved if isinstance(y, torch.fx.Node)):
                continue
        h = _offload_forward(fw, fw_out, num_fwd_outputs, source,
                             [x for x, _ in members],
                             _point(decision_of[source], "release_after",
                                    fused), joint_order, token)
        _reload_backward(bw, source, members, h,
                         _point(decision_of[source], "prefetch_after", fused),
                         joint_order, device, token)
        moved.extend(x.name for x, _ in members)
    for g in (fw, bw):
        g.graph.lint()
        g.recompile()
    return moved


def _offload_forward(fw, fw_out, num_fwd_outputs, source, xs,
                     release_point, joint_order, token):
    """Copies `source` out after it is made, saves the copy (or its token)
    in place of each of `xs` (source itself or its views), and releases
    source at the plan's release point."""
    ops = torch.ops.lethe
    val = source.meta["val"]
    with fw.graph.inserting_after(source):
        h = fw.graph.call_function(ops.offload.default,
                                   (source, True) if token else (source,))
    h.meta["val"] = _host_val(val, token)
    readers = [u for u in source.users if u is not h and u is not fw_out]
    if readers:
        first = min(readers, key=_position(fw.graph))
        with fw.graph.inserting_before(first):
            fenced = fw.graph.call_function(ops.issued.default, (source, h))
        fenced.meta["val"] = val
        for u in readers:
            u.replace_input_with(source, fenced)
    # The saved slots only (the forward's own outputs stay on the device).
    # A slot may hold the release an earlier value placed on one of xs (its
    # release point was that value): the copy goes there through `issued`,
    # an ordering edge on the release, which nothing else may read.
    outs = list(fw_out.args[0])
    for i in range(num_fwd_outputs, len(outs)):
        a = outs[i]
        if _released(a) not in xs:
            continue
        outs[i] = h
        if a is not _released(a):
            with fw.graph.inserting_before(fw_out):
                outs[i] = fw.graph.call_function(ops.issued.default, (h, a))
            outs[i].meta["val"] = h.meta["val"]
    fw_out.args = (tuple(outs),) + tuple(fw_out.args[1:])
    _release_at(fw, h, release_point, joint_order)
    return h


def _reload_backward(bw, source, members, h, prefetch_point, joint_order,
                     device, token):
    """In the backward, each placeholder of `members` is now the host copy
    of `source`: one reload of it at the plan's prefetch point, waited for
    before the first use of any of them; a view is taken again from it."""
    ops = torch.ops.lethe
    val = source.meta["val"]
    users = []
    for _, p in members:
        p.meta["val"] = _host_val(val, token)
        users.extend(p.users)
    if not users:
        return
    first_use = min(users, key=_position(bw.graph))
    dep = _prefetch_anchor(bw, prefetch_point, joint_order, first_use)
    where = dep if dep is not None else _last_placeholder(bw)
    p0 = members[0][1]
    with bw.graph.inserting_after(where):
        b = bw.graph.call_function(
            ops.buffer.default,
            (dep, list(val.size()), list(val.stride()), val.dtype, device))
    b.meta["val"] = _fake_like(val, device)
    with bw.graph.inserting_after(b):
        y = bw.graph.call_function(ops.reload.default, (p0, b))
    y.meta["val"] = b.meta["val"]
    if dep is not None:
        _pin_after(bw, y, first_use)
    with bw.graph.inserting_before(first_use):
        w = bw.graph.call_function(ops.wait.default, (y,))
    w.meta["val"] = y.meta["val"]
    for x, p in members:
        value = w
        if x is not source:
            xv = x.meta["val"]
            with bw.graph.inserting_before(first_use):
                value = bw.graph.call_function(
                    torch.ops.aten.as_strided.default,
                    (w, list(xv.size()), list(xv.stride()),
                     xv.storage_offset() - val.storage_offset()))
            value.meta["val"] = _fake_view(w.meta["val"], xv,
                                           val.storage_offset())
        for u in list(p.users):
            if u is not y:
                u.replace_input_with(p, value)


# View ops whose output shares its input's buffer (the first argument),
# through which a view with gaps is traced back to that buffer.
_VIEW_OPS = tuple(
    getattr(getattr(torch.ops.aten, name), overload)
    for name, overload in (
        ("view", "default"), ("_unsafe_view", "default"),
        ("permute", "default"), ("transpose", "int"), ("t", "default"),
        ("unbind", "int"), ("split", "Tensor"),
        ("split_with_sizes", "default"), ("select", "int"),
        ("slice", "Tensor"), ("unsqueeze", "default"),
        ("squeeze", "dim"), ("alias", "default"),
        ("as_strided", "default"), ("expand", "default")))


def _widen_to_shared_buffers(chosen, by_buffer, bw_by_name, notes):
    """Offloads, beside each value in `chosen`, every saved value that
    shares its buffer (the halves of a split projection, q, k and v of a
    fused one): while one of them is kept on the device, the buffer is, and
    offloading the others frees nothing (Llama-8l's plans on an H200 peaked
    about 300 MB over their prediction, bench/results/torch-inductor.md,
    2026-11-28 t2). Where one of them cannot be offloaded (not a backward
    input, a dynamic shape), none of the buffer's values is. `by_buffer`:
    the saved values by the buffer they are or view (_shared_buffer)."""
    for root, members in by_buffer.items():
        offloaded = [y for y in members if y in chosen]
        kept = [y for y in members if y not in chosen]
        if not offloaded or not kept:
            continue
        placeholders = [bw_by_name.get(y.name) for y in kept]
        if any(p is None or p.op != "placeholder" or _dynamic(y)
               for y, p in zip(kept, placeholders)):
            for y in offloaded:
                del chosen[y]
            if notes is not None:
                notes.append(
                    f"not offloaded: {', '.join(y.name for y in offloaded)} "
                    f"(its buffer is also held by {', '.join(y.name for y in kept)}, "
                    "which cannot be offloaded)")
            continue
        decision = chosen[offloaded[0]][1]
        for y, p in zip(kept, placeholders):
            chosen[y] = (p, decision)
        if notes is not None:
            notes.append(
                f"offloaded {', '.join(y.name for y in kept)} with "
                f"{', '.join(y.name for y in offloaded)}: one buffer, freed "
                "only when none of its values is kept")


def _shared_buffer(x):
    """The forward node whose buffer `x` is or views (through view ops and
    the getitems of view ops that return several views); None where that
    is a graph input's. Unlike _buffer_of, the outputs of an op that
    returns several tensors (attention's output and its log-sum-exp) are
    buffers of their own."""
    node = x
    while node.op == "call_function":
        if node.target is operator.getitem:
            base = node.args[0]
            if not (isinstance(base, torch.fx.Node)
                    and base.op == "call_function"
                    and base.target in _VIEW_OPS):
                return node
            node = base
        elif node.target in _VIEW_OPS:
            node = node.args[0]
        else:
            return node
    return None


def _released(a):
    """The value a forward output slot holds: `a`, or the value a release
    was placed on (lethe.release and lethe.issued return their first
    argument: a release placed on an offloaded value reads its `issued`)."""
    aliases = (torch.ops.lethe.release.default,
               torch.ops.lethe.issued.default)
    while isinstance(a, torch.fx.Node) and a.target in aliases:
        a = a.args[0]
    return a


def _span(val) -> int:
    """Elements from a tensor's first to its last, gaps included."""
    if val.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride
                   for size, stride in zip(val.size(), val.stride()))


def _source_of(x):
    """What to copy out for saved value `x`: x, unless it is a view with
    gaps (its span over its elements); then the forward node whose whole
    buffer it views, traced back through view ops; None where that buffer
    is not made by the forward (an input's)."""
    if _dynamic(x):
        return None
    val = x.meta["val"]
    if _span(val) <= val.numel():
        return x
    node = _buffer_of(x)
    if node is None:
        return None
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor) or _span(v) > v.numel() \
            or v.numel() < _span(val) or _dynamic(node):
        return None
    return node


def _buffer_of(x):
    """The forward node whose buffer `x` is or views, traced back through
    view ops (None where it is a graph input's)."""
    node = x
    while node.op == "call_function":
        if node.target is operator.getitem:
            node = node.args[0]
        elif node.target in _VIEW_OPS:
            node = node.args[0]
        else:
            return node
    return None


def _dynamic(node) -> bool:
    val = node.meta.get("val")
    return not isinstance(val, torch.Tensor) or any(
        isinstance(d, torch.SymInt)
        for d in tuple(val.size()) + tuple(val.stride()))


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


def _fake_view(base, like, base_offset):
    """A fake view of fake `base` as `like` is of its buffer."""
    mode = getattr(base, "fake_mode", None)
    args = (base, like.size(), like.stride(),
            like.storage_offset() - base_offset)
    if mode is None:
        return torch.as_strided(*args)
    with mode:
        return torch.as_strided(*args)


def _host_val(val, token):
    """The fake of what the forward saves for offloaded `val`: its host
    copy, or the one-byte token of it on val's device."""
    if not token:
        return _fake_like(val, torch.device("cpu"))
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return torch.empty((1,), dtype=torch.uint8, device="meta")
    with mode:
        return torch.empty((1,), dtype=torch.uint8, device=val.device)


def _fake_like(val, device):
    """A fake tensor like `val` on `device`, in val's fake mode."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return torch.empty_strided(val.size(), val.stride(), dtype=val.dtype,
                                   device="meta")
    with mode:
        return torch.empty_strided(val.size(), val.stride(), dtype=val.dtype,
                                   device=device)

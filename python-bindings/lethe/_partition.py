"""Builds AOTAutograd's forward and backward graphs from Lethe's decisions.

Input: the joint forward+backward FX graph, the forward node names of the
default partition, the joint graph's JSON export (for storages: `alias`
links every view and in-place result to the value owning its storage) and a
decision per activation storage (retain / recompute / offload).

The partition is a choice of *saved values*, as in the min-cut partitioner:
the forward graph computes the user outputs and the saved values, the
backward graph takes the saved values and the tangents and computes
everything else it needs, re-running forward nodes that were not saved.
Starting from what the backward reads, a value is
- saved when its storage is retained (any view of a retained storage is as
  good as the storage itself), when it is a graph input, or when it cannot
  be re-run (an RNG op without replayed state, an op writing an operand in
  place, a non-tensor value);
- for an offloaded storage, the storage's owner is saved and marked for
  offload, and the views the backward reads are re-derived from it;
- otherwise (a recomputed storage, or a forward intermediate that no
  backward node reads) it is re-created by its producer, whose operands are
  resolved in turn.
The backward graph is then put in demand order: each re-run forward node is
placed just before the first node that needs it (Lethe's restore point), not
all at the start. Offloaded values get copy nodes (lethe._offload).
"""

import operator

import torch
import torch.fx as fx

from lethe import _offload
from lethe._joint_graph import (_mutated_argument_positions, is_rng_op,
                                op_name)
from lethe.schema import tensor_outputs

RETAIN, RECOMPUTE, OFFLOAD = "retain", "recompute", "offload"


class Decision:
    """Lethe's decision for one activation storage; node references are
    JSON node ids (None: not given)."""

    __slots__ = ("kind", "release_after", "prefetch_after", "restore_before")

    def __init__(self, kind, release_after=None, prefetch_after=None,
                 restore_before=None):
        if kind not in (RETAIN, RECOMPUTE, OFFLOAD):
            raise ValueError(f"unknown decision '{kind}'")
        self.kind = kind
        self.release_after = release_after
        self.prefetch_after = prefetch_after
        self.restore_before = restore_before


class PartitionInfo:
    """What the partition did (for reports and tests)."""

    def __init__(self):
        self.saved = []            # names of saved values
        self.recomputed = []       # names of forward nodes re-run in the bwd
        self.offloaded = []        # names of offloaded saved values
        self.retained_instead = []  # (name, why) decisions not followed
        self.prefetch_points = {}  # offloaded name -> bwd node it follows


def _is_getitem(n):
    return n.op == "call_function" and n.target is operator.getitem


def _producer(value):
    return value.args[0] if _is_getitem(value) else value


class _Storages:
    """FX value nodes <-> JSON values, and the storage owner of each."""

    def __init__(self, joint, graph_json):
        self.nodes = graph_json["nodes"]
        ids = {}
        for e in self.nodes:
            if e["kind"] == "op":
                ids[e["name"]] = e["id"]
            elif "graph_name" in e:
                ids[e["graph_name"]] = e["id"]
        self.ref = {}     # fx value name -> (json id, output index)
        self.value = {}   # (json id, output index) -> fx value node
        for n in joint.graph.nodes:
            if _is_getitem(n) and n.args[0].name in ids:
                key = (ids[n.args[0].name], n.args[1])
            elif n.name in ids and not self._is_tuple(n, ids[n.name]):
                key = (ids[n.name], 0)
            else:
                continue
            self.ref[n.name] = key
            self.value.setdefault(key, n)

    def _is_tuple(self, n, nid):
        return (any(_is_getitem(u) for u in n.users)
                or len(tensor_outputs(self.nodes[nid])) != 1)

    def root(self, value):
        """(json id, index) of the storage owner of an FX value, or None."""
        key = self.ref.get(value.name)
        if key is None:
            return None
        nid, index = key
        outputs = self.nodes[nid]["outputs"]
        if index >= len(outputs):
            return None
        while "alias" in self.nodes[nid]["outputs"][index]:
            nid, index = self.nodes[nid]["inputs"][
                self.nodes[nid]["outputs"][index]["alias"]]
        return nid, index

    def bytes_of(self, key):
        outputs = self.nodes[key[0]]["outputs"]
        return outputs[key[1]]["bytes"] if key[1] < len(outputs) else 0


def _is_tensor_value(n):
    val = n.meta.get("val")
    return val is None or isinstance(val, torch.Tensor)


def _reruns_safely(value, replay_rng, mutated_inputs=frozenset()):
    """Whether the producer of `value` may be re-run in the backward."""
    p = _producer(value)
    if p.op != "call_function":
        return False, "not an op"
    seeded_but_draws_nothing = _attention_without_dropout(p)
    if not replay_rng and is_rng_op(op_name(p.target)) \
            and not seeded_but_draws_nothing:
        return False, "RNG op without replayed state"
    if _mutated_argument_positions(p.target) or _updates_statistics(p):
        return False, "writes an operand in place"
    if any(x.name in mutated_inputs for x in p.all_input_nodes):
        return False, "reads a graph input the step updates"
    if p.target is not operator.getitem and \
            _impure(p, impure_random=not seeded_but_draws_nothing):
        return False, "has side effects"
    return True, ""


def _attention_without_dropout(n):
    """A fused attention op (tagged as seeded: it can draw a dropout mask)
    called with dropout_p == 0 draws nothing and re-runs exactly, as
    Lethe's importer assumes when it plans a recompute of it."""
    name = op_name(n.target)
    if "scaled_dot_product" not in name or "backward" in name:
        return False
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return False
    for i, arg in enumerate(schema.arguments):
        if arg.name == "dropout_p":
            if arg.name in n.kwargs:
                value = n.kwargs[arg.name]
            elif i < len(n.args) and not arg.kwarg_only:
                value = n.args[i]
            else:
                value = arg.default_value
            return isinstance(value, (int, float)) and value == 0
    return False


def _impure(n, impure_random=True):
    try:
        if not impure_random:
            try:
                return bool(n.is_impure(impure_random=False))
            except TypeError:  # torch < 2.6 has no impure_random
                pass
        return bool(n.is_impure())
    except (AttributeError, TypeError):
        return False


def mutated_inputs(joint):
    """Names of the joint graph's primals that the step updates in place
    (BatchNorm running statistics): a backward re-run reading one would see
    the new value, and autograd refuses to save one."""
    primals = [n for n in joint.graph.nodes if n.op == "placeholder"
               and not n.name.startswith("tangents")]
    names = set()
    try:  # torch 2.x: AOTAutograd's view of the inputs
        from torch._guards import TracingContext
        meta = getattr(TracingContext.try_get(), "fw_metadata", None)
        infos = getattr(meta, "input_info", None)
        if infos is not None and len(infos) == len(primals):
            for p, info in zip(primals, infos):
                if getattr(info, "mutates_data", False) or \
                        getattr(info, "mutates_metadata", False):
                    names.add(p.name)
    except ImportError:
        pass
    for n in joint.graph.nodes:
        if n.op != "call_function":
            continue
        written = [n.args[pos] if pos < len(n.args) else n.kwargs.get(name)
                   for pos, name in _mutated_argument_positions(n.target)]
        if _updates_statistics(n) or op_name(n.target) == \
                "aten._native_batch_norm_legit_functional.default":
            args = list(n.args) + [None] * 6
            if n.kwargs.get("training", args[5]):
                written += [args[3], args[4]]
        names.update(x.name for x in written
                     if isinstance(x, fx.Node) and x in primals)
    return names


# Batch norms whose schema does not declare that, in training, they update
# their running-statistics operands in place (torch 1.13's joint graphs).
_BATCH_NORMS = {"aten.native_batch_norm.default",
                "aten.cudnn_batch_norm.default",
                "aten.miopen_batch_norm.default"}


def _updates_statistics(n):
    if op_name(n.target) not in _BATCH_NORMS:
        return False
    args = list(n.args) + [None] * 6
    training = n.kwargs.get("training", args[5])
    stats = [n.kwargs.get("running_mean", args[3]),
             n.kwargs.get("running_var", args[4])]
    return bool(training) and any(s is not None for s in stats)


def choose_saved_values(joint, fwd_names, storages, decisions, *,
                        replay_rng=False, info=None, mutated=frozenset()):
    """The saved values (FX nodes of `joint`, in graph order) and the
    storage owners among them to offload."""
    info = info or PartitionInfo()
    nodes = list(joint.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    is_fwd = {n: n.name in fwd_names for n in nodes}
    primal = {n: n.op == "placeholder" and not n.name.startswith("tangents")
              for n in nodes}

    # Values the backward reads directly.
    direct = []
    for n in nodes:
        if is_fwd[n] or n.op == "placeholder" or n.op == "get_attr":
            continue
        for x in n.all_input_nodes:
            if is_fwd[x] or primal[x]:
                direct.append(x)
    direct_set = set(direct)

    saved, offload = set(), set()
    visited = set()
    stack = list(reversed(direct))
    while stack:
        x = stack.pop()
        if x in visited:
            continue
        visited.add(x)
        if primal[x] or x.op == "placeholder":
            saved.add(x)
            continue
        if x.op == "get_attr":
            continue
        if x.name not in storages.ref:
            # A tuple-returning node (re-run for its getitem users, which
            # checked it may be) or a value the export dropped.
            if _reruns_safely(x, replay_rng, mutated)[0]:
                stack.extend(reversed(x.all_input_nodes))
            elif _is_getitem(x) or not any(_is_getitem(u) for u in x.users):
                saved.add(x)
            else:
                raise RuntimeError(f"'{x.name}' would be re-run but may not")
            continue
        root = storages.root(x)
        decision = decisions.get(root) if root is not None else None
        kind = decision.kind if decision is not None else None
        if kind is None:
            # Not an activation: a value the backward reads directly keeps
            # eager semantics (saved); an intermediate of a recompute chain
            # is re-run.
            kind = RETAIN if x in direct_set else RECOMPUTE
        if kind == OFFLOAD:
            owner = storages.value.get(root)
            if owner is None or not is_fwd.get(owner, False):
                kind = RETAIN
                info.retained_instead.append((x.name, "no forward owner"))
            else:
                saved.add(owner)
                offload.add(owner)
                visited.add(owner)
                if owner is not x:  # a view: re-derive it from the owner
                    stack.extend(reversed(_producer(x).all_input_nodes))
                continue
        if kind == RECOMPUTE:
            ok, why = _reruns_safely(x, replay_rng, mutated)
            if not ok or not _is_tensor_value(x):
                if decision is not None:
                    info.retained_instead.append((x.name, why))
                kind = RETAIN
            else:
                stack.extend(reversed(_producer(x).all_input_nodes))
                continue
        saved.add(x)

    ordered = sorted(saved, key=position.__getitem__)
    return ordered, offload


def reorder_on_demand(gm, recompute_names):
    """Moves every re-run forward node of the backward graph `gm` to just
    before the first node that needs it (depth-first, operands first)."""
    graph = gm.graph
    nodes = list(graph.nodes)
    order, placed = [], set()

    def place(root):
        stack = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if n in placed:
                continue
            if expanded:
                placed.add(n)
                order.append(n)
                continue
            stack.append((n, True))
            for x in reversed(n.all_input_nodes):
                if x not in placed:
                    stack.append((x, False))

    for n in nodes:
        if n.op == "placeholder":
            place(n)
    for n in nodes:
        if n.op != "placeholder" and n.name not in recompute_names:
            place(n)
    for n in nodes:  # re-run nodes no backward node needs (none expected)
        place(n)
    # Relink in the new order (Graph keeps a linked list of nodes).
    cursor = None
    for n in order:
        if cursor is None:
            if nodes[0] is not n:
                nodes[0].prepend(n)
        elif cursor.next is not n:
            cursor.append(n)
        cursor = n
    graph.lint()
    gm.recompile()
    return gm


def _layer_key(scope):
    """The layer part of a module path: "blocks.3.attn" -> "blocks.3"."""
    if not scope:
        return None
    parts = scope.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[:i + 1])
    return None


def _fake_cpu_like(val):
    fake_mode = getattr(val, "fake_mode", None)
    if fake_mode is None:
        return None
    with fake_mode:
        return torch.empty_strided(val.size(), val.stride(), dtype=val.dtype,
                                   device="cpu")


def insert_offload(fw, bw, offloaded, storages, decisions, names_by_id,
                   device, info, num_fwd_outputs):
    """Adds the copy nodes for each offloaded saved value (by name)."""
    fw_graph, bw_graph = fw.graph, bw.graph
    fw_nodes = list(fw_graph.nodes)
    fw_pos = {n: i for i, n in enumerate(fw_nodes)}
    fw_by_name = {n.name: n for n in fw_nodes}
    fw_output = next(n for n in fw_nodes if n.op == "output")
    bw_nodes = list(bw_graph.nodes)
    bw_pos = {n: i for i, n in enumerate(bw_nodes)}
    bw_by_name = {n.name: n for n in bw_nodes}
    scope_of = {e["name"]: e.get("scope") for e in storages.nodes
                if e["kind"] == "op"}

    for name in offloaded:
        x = fw_by_name[name]
        root = storages.root(x)
        decision = decisions[root]
        # Every forward node touching the storage: its last writer is where
        # the copy may start; its last reader bounds the release.
        same = [n for n in fw_nodes if n.op != "output"
                and n.name in storages.ref and storages.root(n) == root]
        readers = [u for n in same for u in n.users if u.op != "output"]
        writers = [n for n in fw_nodes if n.op == "call_function"
                   and _writes_storage(n, root, storages)]
        start_after = max([x] + writers, key=fw_pos.__getitem__)
        last_read = max([start_after] + readers, key=fw_pos.__getitem__)
        release_after = last_read
        if decision.release_after is not None:
            planned = fw_by_name.get(names_by_id.get(decision.release_after))
            if planned is not None and fw_pos[planned] > fw_pos[last_read]:
                release_after = planned
        with fw_graph.inserting_after(start_after):
            handle = fw_graph.call_function(_offload.d2h_start, (x,))
        with fw_graph.inserting_after(handle):
            host = fw_graph.call_function(_offload.host_of, (handle,))
        host.name = f"{name}_host"
        val = _fake_cpu_like(x.meta.get("val"))
        if val is not None:
            host.meta["val"] = val
        anchor = handle if release_after is start_after else release_after
        if anchor is host or anchor is handle:
            anchor = host
        with fw_graph.inserting_after(anchor):
            fw_graph.call_function(_offload.release, (handle,))
        outputs = list(fw_output.args[0])  # user outputs, then saved
        outputs[num_fwd_outputs:] = [host if a is x else a
                                     for a in outputs[num_fwd_outputs:]]
        fw_output.args = (type(fw_output.args[0])(outputs),) + \
            tuple(fw_output.args[1:])

        # Backward: prefetch, then wait before the first use.
        ph = bw_by_name[name]
        users = sorted(ph.users, key=bw_pos.__getitem__)
        if not users:
            continue
        first = users[0]
        prefetch_before = _prefetch_point(
            bw_nodes, bw_pos, first, decision, names_by_id, bw_by_name,
            scope_of)
        info.prefetch_points[name] = prefetch_before.name
        with bw_graph.inserting_before(prefetch_before):
            pending = bw_graph.call_function(_offload.h2d_start,
                                             (ph, str(device)))
        with bw_graph.inserting_before(first):
            ready = bw_graph.call_function(_offload.h2d_wait, (pending,))
        for u in users:
            u.replace_input_with(ph, ready)
        if val is not None:
            ph.meta["val"] = val
        info.offloaded.append(name)
    fw_graph.lint()
    bw_graph.lint()
    fw.recompile()
    bw.recompile()


def _writes_storage(n, root, storages):
    for pos, name in _mutated_argument_positions(n.target):
        arg = n.args[pos] if pos < len(n.args) else n.kwargs.get(name)
        if isinstance(arg, fx.Node) and storages.root(arg) == root:
            return True
    return False


def _prefetch_point(bw_nodes, bw_pos, first, decision, names_by_id,
                    bw_by_name, scope_of):
    """The backward node before which the H2D copy is issued: just after
    Lethe's `prefetch_after` when that is a backward node before the first
    use; else one layer ahead of the first use; else the backward's start."""
    body = [n for n in bw_nodes if n.op != "placeholder"]
    start = body[0] if body else first
    if decision.prefetch_after is not None:
        name = names_by_id.get(decision.prefetch_after)
        planned = bw_by_name.get(name)
        if planned is None:  # a forward node: issue at the backward's start
            return start
        if bw_pos[planned] < bw_pos[first]:
            return planned.next
    # One layer ahead: the start of the run of nodes of the layer whose
    # backward precedes the first use's layer.
    index = body.index(first) if first in body else 0
    key = _layer_key(scope_of.get(first.name))
    if key is None:
        return start
    i = index
    while i > 0 and _layer_key(scope_of.get(body[i - 1].name)) in (key, None):
        i -= 1
    if i == 0:
        return start
    prev = _layer_key(scope_of.get(body[i - 1].name))
    while i > 0 and _layer_key(scope_of.get(body[i - 1].name)) in (prev, None):
        i -= 1
    return body[i]

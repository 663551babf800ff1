"""Lethe's graph of a joint forward+backward graph *as inductor runs it*.

Inductor fuses chains of pointwise and view ops into one kernel: the values
inside a chain never reach device memory, and re-running a chain in the
backward costs only the bytes it reads. Planning the unfused ATen graph
therefore counts memory that never exists and prices recomputation at
eager cost. This module builds the graph Lethe plans from the decomposed
joint graph that inductor's partitioner receives (graphs/SCHEMA.md layout):

- a pointwise or view result that every reader fuses is *virtual*: it
  never reaches memory, and its readers read its operands instead (so the
  bandwidth cost model charges the fusing kernel for the bytes it reads).
  Readers in the other phase do not make it real: the backward re-runs such
  chains inside its own kernels, as min-cut arranges. Two readers in its
  own phase do (inductor writes a value two kernels read: the residual
  stream), except for casts and views;
- inductor's seeded random numbers (`prims.inductor_random` / `_randint`,
  which its `replace_random` pass makes of dropout and `rand*`, and the
  `inductor_lookup_seed` they read) are pointwise too: a pure function of
  a seed and the element's offset that inductor generates inside the
  kernels reading it, so the backward regenerates a dropout mask from its
  seed instead of reading a float32 tensor of random numbers. The seeds
  themselves (`inductor_seeds`, drawn once a step) are never re-run;
- every other node is *materialized*: outputs of matmuls, convolutions,
  attention, reductions, gathers, other random ops, values read by a
  kernel that cannot fuse them. Only these carry memory and decisions.

Fusibility is inductor's own (`torch._functorch.partitioners.
get_default_op_list`, the op lists min-cut uses), so the fold follows the
installed torch. Node names are the FX node names: they survive into the
partitioned forward and backward graphs, and the plan refers to them.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
import torch.fx as fx

from lethe import LetheError

from lethe._joint_graph import (_dtype_name, _output_aliases, add_provenance,
                                op_name)

__all__ = ["FusedGraph", "build_fused_graph", "PlanGraphError"]


class PlanGraphError(LetheError):
    """The joint graph cannot be described to Lethe (dynamic shapes, ...).
    A LetheError (and so a ValueError, as before)."""


@dataclass
class FusedGraph:
    """The Lethe graph (`doc`) and how it maps onto the FX graph."""

    doc: Dict[str, Any]
    # JSON id -> the FX node it stands for (None for the output nodes).
    fx_of: Dict[int, Optional[fx.Node]] = field(default_factory=dict)
    # FX node -> JSON id of the node it is folded into (itself if kept).
    root_of: Dict[fx.Node, int] = field(default_factory=dict)
    # FX nodes folded into another node.
    folded: Set[fx.Node] = field(default_factory=set)
    forward: Set[fx.Node] = field(default_factory=set)


def _val(n: Any) -> Any:
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def _check_static(n: fx.Node, value: Any) -> None:
    for t in value if isinstance(value, (list, tuple)) else (value,):
        if isinstance(t, torch.Tensor) and any(
                not isinstance(s, int) for s in t.shape):
            raise PlanGraphError(
                f"node '{n.name}' has a dynamic shape {tuple(t.shape)}: Lethe "
                "plans static shapes only; compile with dynamic=False "
                "(torch.compile(..., dynamic=False) or "
                "torch._dynamo.config.automatic_dynamic_shapes = False)")


def _outputs(value: Any) -> List[Dict[str, Any]]:
    values = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for t in values:
        if isinstance(t, torch.Tensor):
            out.append({"shape": list(t.shape), "dtype": _dtype_name(t.dtype),
                        "bytes": t.numel() * t.element_size()})
        else:
            out.append({"shape": None, "dtype": "none", "bytes": 0})
    return out


def _is_tensor_node(n: fx.Node) -> bool:
    v = _val(n)
    if isinstance(v, torch.Tensor):
        return True
    return isinstance(v, (list, tuple)) and any(
        isinstance(t, torch.Tensor) for t in v)


def _is_tuple_node(n: fx.Node) -> bool:
    return isinstance(_val(n), (list, tuple))


def _value_of(arg: fx.Node) -> Optional[Tuple[fx.Node, int]]:
    """(producer, output index) of a tensor argument; getitems of tuple
    nodes address the tuple node's output."""
    if arg.op == "call_function" and arg.target is operator.getitem \
            and isinstance(arg.args[0], fx.Node) \
            and _is_tuple_node(arg.args[0]):
        return arg.args[0], int(arg.args[1])
    if not isinstance(_val(arg), torch.Tensor):
        return None
    return arg, 0


def _tensor_args(n: fx.Node) -> List[fx.Node]:
    out: List[fx.Node] = []
    for a in n.all_input_nodes:
        if a not in out and _value_of(a) is not None:
            out.append(a)
    return out


def _tensor_users(n: fx.Node) -> List[fx.Node]:
    """Users of n's value, seen through the getitems of a tuple node."""
    users = []
    for u in n.users:
        if u.op == "call_function" and u.target is operator.getitem \
                and _is_tuple_node(n):
            users.extend(u.users)
        else:
            users.append(u)
    return users


def build_fused_graph(gm: fx.GraphModule, forward: Set[fx.Node],
                      num_fwd_outputs: int,
                      static_inputs: Set[fx.Node],
                      device: str = "cuda",
                      fold: bool = True) -> FusedGraph:
    """The Lethe graph of `gm`. `forward`: the joint graph's forward nodes
    (min-cut's `required_fw_nodes`); `static_inputs`: primals with a static
    lifetime (parameters and buffers: AOTAutograd's
    `static_lifetime_input_indices`); other primals are inputs, whatever
    their `requires_grad` (an activation entering after a graph break)."""
    from torch._functorch.partitioners import get_default_op_list
    op_types = get_default_op_list()
    nodes = list(gm.graph.nodes)
    for n in nodes:
        if n.op in ("placeholder", "call_function"):
            _check_static(n, _val(n))

    def phase(n: fx.Node) -> str:
        if n.op == "placeholder":
            return "bwd" if n.name.startswith("tangents") else "fwd"
        return "fwd" if n in forward else "bwd"

    seeded = seed_readers()

    def fusible(n: fx.Node) -> bool:
        return n.op == "call_function" and (
            op_types.is_fusible(n) and not op_types.is_random(n)
            or n.target in seeded)

    # A value is *virtual* (never in device memory) when it is a pointwise
    # or view result that every reader fuses: its readers read its operands
    # instead. Readers in the other phase do not make it real (the backward
    # re-runs a pointwise chain inside its own kernels, as min-cut would).
    # Several readers in its own phase make it real only where inductor's
    # lowering realizes a reused value (GraphLowering.run_node,
    # StorageBox.should_realize_on_reuse): when its inlined expression reads
    # more than `realize_reads_threshold` buffers or has more than
    # `realize_opcount_threshold` ops; otherwise each reader re-computes it
    # (the residual stream is real only every few layers). Any pointwise
    # expression that reads more than `realize_acc_reads_threshold` buffers
    # is realized whatever its readers (has_exceeded_max_reads).
    reads_limit, ops_limit, acc_limit = _realize_thresholds()
    folded: Set[fx.Node] = set()
    frontier: Dict[fx.Node, List[fx.Node]] = {}
    opcount: Dict[fx.Node, int] = {}

    def reads(n: fx.Node) -> List[fx.Node]:
        """The real values n's computation reads (through virtual ones)."""
        out: List[fx.Node] = []
        for a in _tensor_args(n):
            producer = _value_of(a)[0]
            for r in (frontier[producer] if producer in folded else [a]):
                if r not in out:
                    out.append(r)
        return out

    def inlinable(n: fx.Node) -> bool:
        if not fold or n.op != "call_function" or _is_tuple_node(n) \
                or not isinstance(_val(n), torch.Tensor) or not fusible(n) \
                or n.target is operator.getitem or _is_reduction(n) \
                or _is_gather(n):
            return False
        users = _tensor_users(n)
        if not users or any(u.op != "call_function" or not fusible(u)
                            or u.target is operator.getitem for u in users):
            return False
        if op_types.is_view(n) or _is_cast(n):
            return True  # every reader re-reads its operand for free
        n_reads, n_ops = len(frontier[n]), opcount[n]
        if n_reads > acc_limit:
            return False
        same_phase = [u for u in users if phase(u) == phase(n)]
        return len(same_phase) <= 1 or (n_reads <= reads_limit
                                          and n_ops <= ops_limit)

    # Folded nodes whose expression is views alone (no arithmetic, no
    # cast): a view they fold into views the buffer they read.
    pure_views: Dict[fx.Node, bool] = {}
    for n in nodes:
        if n.op != "call_function":
            continue
        frontier[n] = reads(n)
        opcount[n] = 1 + sum(opcount.get(_value_of(a)[0], 0)
                             for a in _tensor_args(n)
                             if _value_of(a)[0] in folded)
        if inlinable(n):
            folded.add(n)
            pure_views[n] = op_types.is_view(n) and all(
                pure_views.get(_value_of(a)[0], False)
                for a in _tensor_args(n) if _value_of(a)[0] in folded)
        else:
            frontier.pop(n)

    doc_nodes: List[Dict[str, Any]] = []
    fused = FusedGraph(doc={}, folded=folded, forward=set(forward))
    ids: Dict[fx.Node, int] = {}

    def add(entry: Dict[str, Any], fx_node: Optional[fx.Node]) -> int:
        entry["id"] = len(doc_nodes)
        doc_nodes.append(entry)
        fused.fx_of[entry["id"]] = fx_node
        if fx_node is not None:
            ids[fx_node] = entry["id"]
        return entry["id"]

    def ref(arg: fx.Node) -> Optional[List[int]]:
        v = _value_of(arg)
        if v is None:
            return None
        producer, index = v
        if producer not in ids:
            raise PlanGraphError(f"'{arg.name}' is read before it is "
                                 "defined in the joint graph")
        return [ids[producer], index]

    def op_entry(n: fx.Node, ph: str) -> Dict[str, Any]:
        inputs: List[List[int]] = []
        for a in reads(n):
            r = ref(a)
            if r is not None and r not in inputs:
                inputs.append(r)
        outputs = _outputs(_val(n))
        inlined = [a for a in _tensor_args(n) if _value_of(a)[0] in folded]
        # Views folded into a view make no buffer: it still views the
        # buffer they view (a split of a projection reshaped first).
        views_only = op_types.is_view(n) and all(
            pure_views.get(_value_of(a)[0], False) for a in inlined)
        if (not inlined or views_only) and n.target is not operator.getitem:
            # A view keeps its alias to the operand it views; once a chain
            # folds into it, it writes a buffer of its own.
            for i, k in enumerate(_output_aliases(n.target, len(outputs))):
                if k is None:
                    continue
                args = n.args
                if k < len(args) and isinstance(args[k], fx.Node):
                    viewed = args[k]
                    if _value_of(viewed)[0] in folded:
                        # Through the folded views, to the buffer they view.
                        under = frontier[_value_of(viewed)[0]]
                        if len(under) != 1:
                            continue
                        viewed = under[0]
                    r = ref(viewed)
                    if r is not None and r in inputs:
                        outputs[i]["alias"] = inputs.index(r)
        entry = {"name": n.name, "op": op_name(n.target), "kind": "op",
                 "phase": ph, "graph": 0, "inputs": inputs,
                 "outputs": outputs, "time_us": None}
        dropout = dropout_probability(n)
        if dropout is not None:
            # Lethe's planner treats a fused attention with dropout as an
            # RNG op (never re-run), one without as recomputable.
            entry["kwargs"] = {"dropout_p": dropout}
        if inlined:
            entry["inlined"] = [a.name for a in inlined]
        if inlined and not views_only:
            # Said outright: the op's name (aten.view) would otherwise make
            # Lethe price it, and its recomputation, as a free view.
            for o in outputs:
                o.setdefault("alias", -1)
        add_provenance(entry, n)
        return entry

    primals = [n for n in nodes if n.op == "placeholder"
               and not n.name.startswith("tangents")]
    tangents = [n for n in nodes if n.op == "placeholder"
                and n.name.startswith("tangents")]
    ops = [n for n in nodes if n.op == "call_function" and n not in folded
           and n.target is not operator.getitem and _is_tensor_node(n)]
    output = next(n for n in nodes if n.op == "output")
    flat_out = list(output.args[0])

    for p in primals:
        if not isinstance(_val(p), torch.Tensor):
            continue
        kind = "param" if p in static_inputs else "input"
        add({"name": p.name, "op": "placeholder", "kind": kind,
             "phase": "fwd", "graph": 0, "inputs": [],
             "outputs": _outputs(_val(p)), "time_us": None}, p)
    for n in ops:
        if phase(n) == "fwd":
            add(op_entry(n, "fwd"), n)
    fwd_refs = [r for r in (ref(a) for a in flat_out[:num_fwd_outputs]
                            if isinstance(a, fx.Node)) if r is not None]
    add({"name": "output", "op": "output", "kind": "output", "phase": "fwd",
         "graph": 0, "inputs": fwd_refs, "outputs": [], "time_us": None,
         "args": {"num_user_outputs": len(fwd_refs)}}, None)
    fwd_end = len(doc_nodes)
    for t in tangents:
        if isinstance(_val(t), torch.Tensor):
            add({"name": t.name, "op": "placeholder", "kind": "tangent",
                 "phase": "bwd", "graph": 0, "inputs": [],
                 "outputs": _outputs(_val(t)), "time_us": None}, t)
    for n in ops:
        if phase(n) == "bwd":
            add(op_entry(n, "bwd"), n)
    grads, grad_refs, grad_of = [], [], []
    for p, g in zip(primals, flat_out[num_fwd_outputs:]):
        if p not in ids:
            continue
        grad_of.append(ids[p])
        r = ref(g) if isinstance(g, fx.Node) else None
        if r is None:
            grads.append(None)
        else:
            grads.append({"in": len(grad_refs)})
            grad_refs.append(r)
    add({"name": "output", "op": "output", "kind": "output", "phase": "bwd",
         "graph": 0, "inputs": grad_refs, "outputs": [], "time_us": None,
         "args": {"grads": grads, "grad_of": grad_of}}, None)

    # Saved: every forward value a backward node reads.
    fwd_ids = {e["id"] for e in doc_nodes[:fwd_end]}
    saved = sorted({(nid, i) for e in doc_nodes[fwd_end:]
                    for nid, i in e["inputs"] if nid in fwd_ids})
    for n in nodes:
        if n in ids:
            fused.root_of[n] = ids[n]
    fused.doc = {"model": "lethe.torch.partitioner", "device": device,
                 "torch": torch.__version__, "capture": "inductor-joint",
                 "nodes": doc_nodes, "saved": [list(s) for s in saved]}
    return fused


def seed_readers() -> Set[Any]:
    """Inductor's ops that read a drawn seed (its lookup, and random
    numbers from it): deterministic given the seeds, lowered as pointwise
    code. Min-cut's allowlist omits them (they are not tagged pointwise),
    so without a tag it saves their float32 output or the mask made of
    it."""
    try:
        import torch._inductor.inductor_prims  # noqa: F401 (registers them)
    except ImportError:
        return set()
    prims = torch.ops.prims
    return {getattr(prims, name).default
            for name in ("inductor_lookup_seed", "inductor_random",
                         "inductor_randint")
            if hasattr(prims, name)}


def dropout_probability(n: fx.Node) -> Optional[float]:
    """The `dropout_p` argument of an op that has one (the fused attention
    kernels), else None; 1.0 where it is not a number here (symbolic): it
    may draw."""
    schema = getattr(n.target, "_schema", None)
    for index, arg in enumerate(getattr(schema, "arguments", ())):
        if arg.name != "dropout_p":
            continue
        if not arg.kwarg_only and index < len(n.args):
            value = n.args[index]
        else:
            value = n.kwargs.get("dropout_p", arg.default_value)
        return float(value) if isinstance(value, (int, float)) else 1.0
    return None


def draws_seeds(n: fx.Node) -> bool:
    """Whether `n` draws fresh random numbers each run (ops tagged
    nondeterministic_seeded: inductor_seeds, rand, dropout): never re-run
    in the backward, where it would draw other numbers. The fused attention
    kernels carry the tag whatever their dropout; without dropout they are
    deterministic, and Lethe's planner may recompute them (it reads the
    same probability, written into the planned graph)."""
    return n.op == "call_function" and torch.Tag.nondeterministic_seeded \
        in getattr(n.target, "tags", ()) and dropout_probability(n) != 0.0


def _realize_thresholds() -> Tuple[int, int, int]:
    """Inductor's limits on inlining a reused pointwise value (its config;
    torch 2.11's defaults where it lacks one)."""
    try:
        from torch._inductor import config
    except ImportError:
        return 4, 30, 8
    return (getattr(config, "realize_reads_threshold", 4),
            getattr(config, "realize_opcount_threshold", 30),
            getattr(config, "realize_acc_reads_threshold", 8))


_REDUCTIONS = {"sum", "mean", "amax", "amin", "var", "var_mean", "std",
               "std_mean", "argmax", "argmin", "any", "all", "prod", "max",
               "min", "logsumexp", "_log_softmax", "_softmax", "cumsum"}
_GATHERS = {"index", "gather", "embedding", "index_select", "take",
            "scatter", "scatter_add", "index_put", "_unsafe_index",
            "_unsafe_index_put"}


def _packet(n: fx.Node) -> str:
    # "aten.sum.dim_IntList" -> "sum"; prims ops likewise.
    parts = str(n.target).split(".")
    return parts[1] if len(parts) >= 3 else parts[-1]


def _is_reduction(n: fx.Node) -> bool:
    return _packet(n) in _REDUCTIONS


def _is_gather(n: fx.Node) -> bool:
    return _packet(n) in _GATHERS


def _is_cast(n: fx.Node) -> bool:
    return _packet(n) in ("convert_element_type", "_to_copy", "to")


def value_names(n: fx.Node, index: int) -> List[str]:
    """FX names carrying output `index` of node n."""
    if isinstance(n.meta.get("val"), (list, tuple)):
        return [u.name for u in n.users if u.target is operator.getitem
                and u.args[1] == index]
    return [n.name]

"""Turns a captured AOTAutograd joint graph into Lethe's graph JSON.

The input is version-neutral: the joint forward+backward FX graph, the node
names of the forward and backward graphs that the default partition made of
it, the forward's saved values, and real tensors for the joint's inputs. The
graph is replayed once on those tensors (values are freed after their last
use, so memory stays near an eager step's); the replay gives every output's
shape, dtype and storage, which is how views and in-place results are found
(a result sharing storage with an operand aliases it, as `_unsafe_view` does
although its schema does not say so). On CUDA every op is also re-run alone
and timed. The layout written is graphs/SCHEMA.md's.
"""

import contextlib
import math
import operator
import re
import statistics
import time

import torch
import torch.fx

from lethe.schema import workspace_output

# Ops that launch nothing still read this much time; a sleep kernel before
# each timed run keeps host launch overhead out of the measurement.
_SLEEP_CYCLES = 200_000
_TIMING_SAMPLES = 5

_SCOPE_MARK = re.compile(r"<lethe-scope:([^>]*)>")

# Ops whose eager result shares its first operand's storage although the
# schema does not say so; used when the replay has no real storages (fake).
_EAGER_VIEWS = {"aten._unsafe_view.default"}


class ExportError(RuntimeError):
    """The model's training step cannot be exported."""


def op_name(target):
    """The ATen overload name of an FX call_function target."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # "aten.mm.default"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or str(target)
    return f"{module}.{name}" if module else name


def is_rng_op(name):
    """Whether the ATen op named `name` draws random numbers."""
    parts = name.split(".")
    if len(parts) != 3:
        return False
    try:
        overload = getattr(getattr(getattr(torch.ops, parts[0]), parts[1]),
                           parts[2])
    except (AttributeError, RuntimeError):
        return False
    return torch.Tag.nondeterministic_seeded in getattr(overload, "tags", ())


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _storage_key(t):
    """(data pointer, bytes) of a tensor's storage, or None if it has none."""
    try:
        storage = (t.untyped_storage() if hasattr(t, "untyped_storage")
                   else t.storage())
        return storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def _json_scalar(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)  # "inf", "-inf", "nan": JSON has no such numbers
    return x


def _describe_output(value):
    """One `outputs[]` entry (without `alias`) for a result value."""
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": _dtype_name(value.dtype),
                "bytes": value.numel() * value.element_size()}
    if value is None:
        return {"shape": None, "dtype": "none", "bytes": 0}
    for kind, types in (("bool", bool), ("int", int), ("float", float)):
        if isinstance(value, types):
            return {"shape": None, "dtype": kind, "bytes": 0,
                    "value": _json_scalar(value)}
    if isinstance(value, (torch.SymInt if hasattr(torch, "SymInt") else (),)):
        return {"shape": None, "dtype": "int", "bytes": 0, "value": int(value)}
    return {"shape": None, "dtype": type(value).__name__, "bytes": 0}


def _schema_aliases(target):
    """For each schema return, the index of the argument it aliases, or None."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return []
    by_set = {}
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None:
            for name in arg.alias_info.before_set:
                by_set.setdefault(name, i)
    # `Tensor(a -> *) self ... -> Tensor(a)[]` (split, unbind): the list's
    # alias set is not visible from Python; its elements alias `self`.
    wildcard = next((i for i, arg in enumerate(schema.arguments)
                     if arg.alias_info is not None
                     and "*" in arg.alias_info.after_set), None)
    aliases = []
    for ret in schema.returns:
        info = ret.alias_info
        if info is None:
            aliases.append(None)
            continue
        aliases.append(next((by_set[s] for s in info.before_set
                             if s in by_set), wildcard))
    return aliases


def _output_aliases(target, n_outputs):
    """For each of an op's `n_outputs` tensors, the index of the argument
    it aliases, or None: a list return (split, unbind) gives every element
    the list's alias."""
    aliases = _schema_aliases(target)
    return [aliases[min(i, len(aliases) - 1)] if aliases else None
            for i in range(n_outputs)]


def _mutated_argument_positions(target):
    schema = getattr(target, "_schema", None)
    if schema is None:
        return []
    return [(i, arg.name) for i, arg in enumerate(schema.arguments)
            if arg.alias_info is not None and arg.alias_info.is_write]


def node_scope(node):
    """The module path that produced `node`, or None when unknown/top level."""
    # torch 2.x: backward nodes carry their forward node's module stack.
    stack = (node.meta.get("nn_module_stack")
             or node.meta.get("fwd_nn_module_stack"))
    if stack:
        path = list(stack.values())[-1]
        path = path[0] if isinstance(path, tuple) else path
        return normalize_module_path(str(path))
    trace = node.meta.get("stack_trace") or getattr(node, "stack_trace", None)
    if trace:
        match = _SCOPE_MARK.search(trace)
        if match:
            return match.group(1) or None
    return None


def normalize_module_path(path):
    """"L['self'].model.layers[0]._modules['attn']" -> "layers.0.attn".
    A module dynamo saw as a positional argument is rooted at
    "L['args'][0]" (transformers 5 wraps HF models' forward so: without
    the index, every scope began with "0", a layer number to the layer
    finder)."""
    path = re.sub(r"^L\[['\"]args['\"]\]\[\d+\]", "", path)
    path = re.sub(r"^[LG]\[['\"][^'\"]*['\"]\]", "", path)
    path = re.sub(r"^L__self__", "", path)
    path = path.replace("._modules", "")
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", path)
    path = path.strip(".")
    if path.startswith("model."):
        path = path[len("model."):]
    elif path == "model":
        path = ""
    return path or None


class _Replay(torch.fx.Interpreter):
    """Runs the joint graph once, recording each node's results (and, on
    CUDA, each op's time alone and its workspace). With fake tensors
    nothing is computed: shapes come from the ops' meta kernels and
    decompositions."""

    def __init__(self, gm, time_ops, fake_mode):
        super().__init__(gm)
        self.time_ops = time_ops
        self.fake_mode = fake_mode
        self.results = {}      # node -> list of output descriptions
        self.storages = {}     # node -> list of storage keys (None if none)
        self.times = {}        # node -> list of microseconds
        self.workspace = {}    # node -> bytes held beyond its outputs

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        if self.fake_mode is not None and isinstance(value, torch.Tensor):
            return self.fake_mode.from_tensor(value)
        return value

    def run_node(self, n):
        result = super().run_node(n)
        if n.op == "call_function" and n.target is operator.getitem:
            return result
        values = (list(result) if isinstance(result, (tuple, list))
                  and n.op == "call_function" else [result])
        if n.op == "output":
            return result
        self.results[n] = [_describe_output(v) for v in values]
        self.storages[n] = [_storage_key(v) if isinstance(v, torch.Tensor)
                            and v.numel() > 0 and self.fake_mode is None
                            else None
                            for v in values]
        if (self.fake_mode is None and n.op == "call_function"
                and isinstance(n.target, torch._ops.OpOverload)):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            if self.time_ops:
                self.times[n] = _time_op(n.target, args, kwargs)
            self.workspace[n] = _workspace_bytes(n.target, args, kwargs)
        return result


def _time_op(target, args, kwargs):
    """Median-of-5 CUDA-event time of `target(*args, **kwargs)` alone, in us.
    Arguments the op writes are cloned for each run so repeats do not
    compound."""
    samples = []
    for _ in range(_TIMING_SAMPLES):
        run_args, run_kwargs = _fresh_arguments(target, args, kwargs)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(_SLEEP_CYCLES)
        start.record()
        target(*run_args, **run_kwargs)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return samples


def _fresh_arguments(target, args, kwargs):
    """The arguments of one run of `target`, those it writes cloned so that
    runs do not compound."""
    run_args, run_kwargs = list(args), dict(kwargs)
    for pos, name in _mutated_argument_positions(target):
        if pos < len(run_args) and isinstance(run_args[pos], torch.Tensor):
            run_args[pos] = run_args[pos].clone()
        elif isinstance(run_kwargs.get(name), torch.Tensor):
            run_kwargs[name] = run_kwargs[name].clone()
    return run_args, run_kwargs


def _workspace_bytes(target, args, kwargs):
    """What one run of the op holds at once beyond its outputs (lethe.
    _measure's measurement; 0 off CUDA, where nothing is run): cuDNN's
    convolution workspace and eager ops' temporaries, which the step's peak
    counts."""
    from torch.utils import _pytree as pytree

    from lethe import _measure
    device = next((a.device for a in pytree.tree_flatten((args, kwargs))[0]
                   if isinstance(a, torch.Tensor)), None)
    if device is None or device.type != "cuda":
        return 0
    run_args, run_kwargs = _fresh_arguments(target, args, kwargs)
    return _measure._workspace_bytes(lambda: target(*run_args, **run_kwargs),
                                     device)


class JointCapture:
    """What a capture step hands to `build_graph_json`.

    joint: the joint forward+backward GraphModule (placeholders primals_*,
      tangents_*; output = forward outputs then one gradient per primal).
    fwd_names / bwd_names: names of the nodes in the forward / backward
      graphs of the default partition.
    saved_names: the forward graph's outputs past the user outputs.
    num_fwd_outputs: how many joint outputs are forward outputs.
    primals: per primal placeholder, a dict(name=, kind=, buffer=, value=).
    fw_module / bw_module: the partitioned graphs (for whole-graph timing).
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)


def build_graph_json(cap, time_ops, replay_mode="auto"):
    """Returns (graph dict without top-level metadata, replay facts).

    replay_mode: "real" runs the step's arithmetic once (needed for op times;
    aliases also from shared storage), "fake" only propagates shapes with
    fake tensors, "auto" is real when timing and fake otherwise, falling
    back to real when an op cannot run on fake tensors."""
    joint = cap.joint
    graph_nodes = list(joint.graph.nodes)
    placeholders = [n for n in graph_nodes if n.op == "placeholder"]
    primal_nodes = [n for n in placeholders if not n.name.startswith("tangents")]
    tangent_nodes = [n for n in placeholders if n.name.startswith("tangents")]
    if len(primal_nodes) != len(cap.primals):
        raise ExportError(
            f"joint graph has {len(primal_nodes)} primal inputs but "
            f"{len(cap.primals)} were captured")
    constants = [n for n in graph_nodes if n.op == "get_attr"]
    output_node = next(n for n in graph_nodes if n.op == "output")

    # Real inputs: primals as captured, a gradient seed of ones per tangent.
    device = next((p["value"].device for p in cap.primals
                   if isinstance(p["value"], torch.Tensor)),
                  torch.device("cpu"))
    notes = list(getattr(cap, "notes", []))
    modes = {"real": [False], "fake": [True], "auto": [False] if time_ops
             else [True, False]}[replay_mode]
    if any(_is_fake(p["value"]) for p in cap.primals):
        modes = [True]  # nothing real to fall back to
    start = time.perf_counter()
    for fake in modes:
        values = [p["value"] for p in cap.primals]
        # Inputs that are fake already (a partition function's, under
        # torch.compile) are replayed in their own mode.
        given_mode = next((v.fake_mode for v in values
                           if _is_fake(v)), None)
        fake_mode = (given_mode or _fake_mode()) if fake else None
        with fake_mode if fake else contextlib.nullcontext():
            if fake:
                values = [fake_mode.from_tensor(v)
                          if isinstance(v, torch.Tensor) and not _is_fake(v)
                          else v for v in values]
            values += [_ones_like_meta(n, device) for n in tangent_nodes]
            replay = _Replay(joint, time_ops, fake_mode)
            try:
                with torch.no_grad():
                    outputs = replay.run(*values, enable_io_processing=False)
                break
            except Exception as e:  # noqa: BLE001 - op without a fake kernel
                if not fake or replay_mode == "fake":
                    raise
                notes.append("replayed with real tensors (fake replay failed: "
                             f"{str(e).splitlines()[0][:160]})")
    replay_s = time.perf_counter() - start
    flat_outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]

    # Phases from the partition: forward graph nodes are fwd, the rest of the
    # backward graph is bwd; nodes in neither are dead and dropped.
    ops = [n for n in graph_nodes if n.op == "call_function"
           and n.target is not operator.getitem]
    fwd_ops = [n for n in ops if n.name in cap.fwd_names]
    bwd_ops = _sink_early_backward_nodes(
        [n for n in ops if n.name not in cap.fwd_names
         and n.name in cap.bwd_names], fwd_ops, graph_nodes)
    warnings = notes
    dropped = [n.name for n in ops if n.name not in cap.fwd_names
               and n.name not in cap.bwd_names]
    if dropped:
        warnings.append(f"dropped {len(dropped)} dead nodes: "
                        + ", ".join(dropped[:10]))
    for n in graph_nodes:
        if n.op in ("call_module", "call_method"):
            raise ExportError(f"node '{n.name}': {n.op} is not an ATen op; "
                              "the joint graph must be ATen-level")

    nodes = []
    ref = {}  # fx node -> (json id, output index) for values; tuple nodes map
    # to (id, None) and their getitem users to (id, index).

    def add(entry, fx_node):
        entry["id"] = len(nodes)
        nodes.append(entry)
        if fx_node is not None:
            ref[fx_node] = (entry["id"], None if _is_tuple_node(fx_node, replay)
                            else 0)

    def resolve(arg):
        """(json id, output index) of an FX node argument."""
        if arg.op == "call_function" and arg.target is operator.getitem:
            parent, index = arg.args
            pid, _ = ref[parent]
            return pid, index
        nid, index = ref[arg]
        return nid, 0 if index is None else index

    for i, n in enumerate(primal_nodes):
        info = cap.primals[i]
        entry = _placeholder(info["name"], info["kind"], "fwd", n.name,
                             replay.results[n])
        if info.get("buffer"):
            entry["buffer"] = True
        add(entry, n)
    for n in constants:
        add(_placeholder(str(n.target), "input", "fwd", n.name,
                         replay.results[n]), n)

    for n in fwd_ops:
        add(_op_entry(n, "fwd", replay, resolve), n)

    fwd_outputs = flat_outputs[:cap.num_fwd_outputs]
    fwd_out_nodes = output_node.args[0][:cap.num_fwd_outputs]
    saved = []
    for name in cap.saved_names:
        fx_node = _node_named(joint, name)
        if fx_node is None:
            raise ExportError(f"saved value '{name}' is not in the joint graph")
        saved.append(list(resolve(fx_node)))

    fwd_out_refs = [list(resolve(a)) for a in fwd_out_nodes
                    if isinstance(a, torch.fx.Node)]
    add({"name": "output", "op": "output", "kind": "output", "phase": "fwd",
         "graph": 0, "inputs": fwd_out_refs, "outputs": [], "time_us": None,
         "args": {"num_user_outputs": len(fwd_out_refs),
                  "num_saved": None}}, None)
    fwd_output_entry = nodes[-1]

    for n in tangent_nodes:
        add(_placeholder(n.name, "tangent", "bwd", n.name, replay.results[n]), n)
    for n in bwd_ops:
        add(_op_entry(n, "bwd", replay, resolve), n)

    # Everything of the forward that the backward reads is saved (primals
    # included); the partition's list comes first, in its order.
    fwd_ids = {e["id"] for e in nodes if e["phase"] == "fwd"}
    saved_set = {tuple(s) for s in saved}
    for e in nodes[fwd_output_entry["id"] + 1:]:
        for nid, index in e["inputs"]:
            if nid in fwd_ids and (nid, index) not in saved_set:
                saved_set.add((nid, index))
                saved.append([nid, index])
                warnings.append(f"'{e['name']}' reads forward value "
                                f"'{nodes[nid]['name']}' that the partition "
                                "did not save")
    saved.sort()  # the partition's order is not deterministic on torch 1.13
    fwd_output_entry["args"]["num_saved"] = len(saved)

    grad_refs, grads = [], []
    for grad in output_node.args[0][cap.num_fwd_outputs:]:
        if isinstance(grad, torch.fx.Node):
            grads.append({"in": len(grad_refs)})
            grad_refs.append(list(resolve(grad)))
        else:
            grads.append(None)
    primal_ids = [ref[n][0] for n in primal_nodes]
    if len(grads) != len(primal_ids):
        raise ExportError(f"joint graph returns {len(grads)} gradients for "
                          f"{len(primal_ids)} primals")
    add({"name": "output", "op": "output", "kind": "output", "phase": "bwd",
         "graph": 0, "inputs": grad_refs, "outputs": [], "time_us": None,
         "args": {"grads": grads, "grad_of": primal_ids}}, None)

    _rebase_seq_nr(nodes)
    loss = fwd_outputs[0] if fwd_outputs else None
    facts = {
        "replay_s": replay_s,
        "loss": float(loss) if isinstance(loss, torch.Tensor)
        and loss.numel() == 1 and replay.fake_mode is None else None,
        "replay": "real" if replay.fake_mode is None else "fake",
        "warnings": warnings,
    }
    return {"nodes": nodes, "saved": saved}, facts


def _sink_early_backward_nodes(bwd_ops, fwd_ops, graph_nodes):
    """Backward nodes in joint order, except those traced during the forward
    (torch 1.13's `detach` chains of values saved for backward): each of
    those moves to just before its first backward user, where the backward
    needs it. Left at the start of the backward they would make every saved
    value look needed there, hiding when it is really read."""
    position = {n: i for i, n in enumerate(graph_nodes)}
    last_fwd = max((position[n] for n in fwd_ops), default=-1)
    early = {n for n in bwd_ops if position[n] < last_fwd}
    if not early:
        return bwd_ops
    ordered, emitted = [], set()

    def emit(n):
        if n in emitted:
            return
        emitted.add(n)
        for dep in n.all_input_nodes:
            if dep.op == "call_function" and dep.target is operator.getitem:
                dep = dep.args[0]
            if dep in early:
                emit(dep)
        ordered.append(n)

    for n in bwd_ops:
        if n not in early:
            emit(n)
    for n in bwd_ops:  # early nodes no later node reads
        emit(n)
    return ordered


def _is_fake(v):
    return isinstance(v, torch.Tensor) and hasattr(v, "fake_mode")


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode()


def _is_tuple_node(n, replay):
    if n.op != "call_function":
        return False
    return any(u.op == "call_function" and u.target is operator.getitem
               for u in n.users) or len(replay.results.get(n, [])) != 1


def _node_named(gm, name):
    for n in gm.graph.nodes:
        if n.name == name:
            return n
    return None


def _ones_like_meta(node, device):
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return torch.ones(tuple(int(s) for s in val.shape), dtype=val.dtype,
                          device=device)
    tm = node.meta.get("tensor_meta")
    if tm is not None:
        return torch.ones(tuple(tm.shape), dtype=tm.dtype, device=device)
    raise ExportError(f"tangent '{node.name}' has no shape metadata")


def _placeholder(name, kind, phase, graph_name, outputs):
    return {"name": name, "op": "placeholder", "kind": kind, "phase": phase,
            "graph": 0, "inputs": [], "outputs": outputs, "time_us": None,
            "graph_name": graph_name}


def _op_entry(n, phase, replay, resolve):
    inputs = []
    index_of = {}
    operand_nodes = []

    def encode(x):
        if isinstance(x, torch.fx.Node):
            value_desc = _value_of(x, replay)
            if value_desc is not None:  # a non-tensor result: inline it
                return value_desc
            key = resolve(x)
            if key not in index_of:
                index_of[key] = len(inputs)
                inputs.append(list(key))
                operand_nodes.append(x)
            return {"in": index_of[key]}
        if isinstance(x, (list, tuple)):
            return [encode(y) for y in x]
        if isinstance(x, dict):
            return {str(k): encode(v) for k, v in x.items()}
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if isinstance(x, float):
            return _json_scalar(x)
        return str(x)  # dtype, device, layout, memory format

    args = encode(list(n.args))
    kwargs = encode(dict(n.kwargs))
    outputs = [dict(o) for o in replay.results[n]]

    # Aliases: the schema's annotation, else shared storage with an operand.
    schema_alias = _output_aliases(n.target, len(outputs))
    arg_input_index = _argument_input_indices(n, index_of, resolve)
    operand_storage = _storages_of_inputs(inputs, operand_nodes, replay)
    for i, out in enumerate(outputs):
        if out["dtype"] == "none" or out["shape"] is None:
            continue
        k = None
        schema_i = schema_alias[i]
        if schema_i is not None:
            k = arg_input_index.get(schema_i)
        if k is None and replay.fake_mode is not None \
                and op_name(n.target) in _EAGER_VIEWS and inputs:
            k = 0
        if k is None:
            storage = replay.storages[n][i]
            if storage is not None:
                k = next((j for j, s in enumerate(operand_storage)
                          if s is not None and s[0] == storage[0]), None)
        if k is not None:
            out["alias"] = k

    entry = {"name": n.name, "op": op_name(n.target), "kind": "op",
             "phase": phase, "graph": 0, "inputs": inputs, "args": args,
             "outputs": outputs}
    if kwargs:
        entry["kwargs"] = kwargs
    if replay.workspace.get(n):
        outputs.append(workspace_output(replay.workspace[n]))
    times = replay.times.get(n)
    entry["time_us"] = statistics.median(times) if times else None
    if times:
        entry["times_us"] = [round(t, 3) for t in times]
    add_provenance(entry, n)
    return entry


def add_provenance(entry, n):
    """Adds where an FX node came from to its JSON entry: the module path
    (`scope`) and the autograd sequence number (`seq_nr`), when known."""
    scope = node_scope(n)
    if scope:
        entry["scope"] = scope
    seq_nr = n.meta.get("seq_nr")
    if isinstance(seq_nr, int):
        entry["seq_nr"] = seq_nr


def _rebase_seq_nr(nodes):
    """Autograd sequence numbers count from process start; rebasing them to
    the graph's first keeps exports deterministic and the fwd/bwd links."""
    numbers = [n["seq_nr"] for n in nodes if "seq_nr" in n]
    if numbers:
        base = min(numbers)
        for n in nodes:
            if "seq_nr" in n:
                n["seq_nr"] -= base


def _value_of(x, replay):
    """The output description of a non-tensor FX value, to inline as a
    literal (an int result of a multi-output op, a symbolic size)."""
    if x.op == "call_function" and x.target is operator.getitem:
        parent, index = x.args
        outs = replay.results.get(parent)
        if outs is None or index >= len(outs):
            return None
        desc = outs[index]
    else:
        outs = replay.results.get(x)
        if not outs or len(outs) != 1:
            return None
        desc = outs[0]
    if desc["shape"] is not None:
        return None
    return desc.get("value")


def _argument_input_indices(n, index_of, resolve):
    """Schema argument position -> `inputs` index of the tensor passed there."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return {}
    result = {}
    for pos, arg in enumerate(schema.arguments):
        value = n.args[pos] if pos < len(n.args) else n.kwargs.get(arg.name)
        if isinstance(value, torch.fx.Node):
            key = resolve(value)
            if key in index_of:
                result[pos] = index_of[key]
    return result


def _storages_of_inputs(inputs, operand_nodes, replay):
    result = []
    for (nid, index), x in zip(inputs, operand_nodes):
        if x.op == "call_function" and x.target is operator.getitem:
            parent, index = x.args
            result.append(replay.storages.get(parent, [None] * (index + 1))[index])
        else:
            result.append((replay.storages.get(x) or [None])[0])
    return result

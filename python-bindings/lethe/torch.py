"""Export a PyTorch training step as Lethe's graph JSON (graphs/SCHEMA.md).

    import lethe.torch
    lethe.torch.export_training_step(model, (x,), lambda out: out.sum(),
                                     "step.json")

The step `loss_fn(model(*example_inputs))` is traced by AOTAutograd into one
joint forward+backward graph of ATen ops and split by the default partition,
which gives eager semantics: the forward saves exactly what the backward
reads. Two capture routes give the same JSON:

- "dynamo" (torch >= 2.0): `torch.compile(fullgraph=True)` with an
  `aot_autograd` backend whose partition function records the joint graph.
  Module scopes and autograd sequence numbers come from node metadata.
- "aot_function" (torch 1.13, e.g. Debian's python3-torch, or on request):
  `functorch.compile.aot_function` over a functional call of the model.
  Module scopes come from forward hooks that tag the traced nodes' stack
  traces (autograd anomaly mode carries them over to the backward nodes).

Neither the model's parameters, its buffers (BatchNorm running statistics)
nor the global RNG state are changed by an export.
"""

import contextlib
import json
import os
import tempfile
import time
import warnings

import torch

from lethe._joint_graph import (ExportError, JointCapture, build_graph_json,
                                is_rng_op, normalize_module_path)

from lethe._backend import (Backend, GraphPlan, InfeasibleBudgetError,
                            PlanError, backend)
from lethe._fused_graph import PlanGraphError


def partitioner(budget="40%", policy=None, device=None, **options):
    """Lethe as inductor's partitioner, for users who compile with their own
    options: `p = lethe.torch.partitioner(budget="50%")`, then
    `torch.compile(model, dynamic=False, options={**p.inductor_options(),
    ...})` (`{"custom_partitioner_fn": p}` and the config patches its plans
    assume: no horizontal fusion under a budget, no buffer reuse where it
    offloads). Arguments as `backend` takes them (torch >= 2.9). Its `records` list
    what was planned for each compiled graph (newest last): the plan, the
    values saved, the offloaded ones and every difference between the plan
    and the partition (`mismatches`)."""
    from lethe._inductor import LethePartitioner
    return LethePartitioner(budget, policy, device, **options)


__all__ = ["export_training_step", "ExportError", "is_rng_op", "backend",
           "partitioner", "PlanGraphError",
           "Backend", "GraphPlan", "InfeasibleBudgetError", "PlanError"]


def export_training_step(model, example_inputs, loss_fn, path=None, *,
                         targets=(), format="json", method=None,
                         time_ops=None, replay="auto", meta=None):
    """Exports one training step of `model` and returns the graph as a dict.

    model: a torch.nn.Module. example_inputs: a tensor or a tuple of model
    arguments (non-tensor arguments are baked into the graph). loss_fn: maps
    the model's output (and `targets`) to a scalar loss tensor. path: where
    to write the JSON (written atomically; None writes nothing). targets:
    tensors passed to `loss_fn` after the output; they become graph inputs
    (tensors the loss closes over become constants instead, and make torch
    1.13 trace with real tensors, i.e. run the model while tracing). method: "dynamo" or
    "aot_function" (default: dynamo when available). time_ops: re-time every
    op alone on the GPU (default: when the model is on a CUDA device).
    replay: how the joint graph is replayed for shapes and aliases: "real"
    (computes one step; required for time_ops), "fake" (shapes only with
    fake tensors, no arithmetic), "auto" (real when timing, else fake with
    a real fallback).
    meta:
    extra top-level fields (model name, config, batch, seq) to record.
    """
    if format != "json":
        raise ValueError(f"unsupported export format '{format}' "
                         "(only 'json' is implemented)")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got "
                        f"{type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError("loss_fn must be callable (model output -> scalar loss)")
    inputs = (tuple(example_inputs) if isinstance(example_inputs, (tuple, list))
              else (example_inputs,))
    targets = (tuple(targets) if isinstance(targets, (tuple, list))
               else (targets,))
    num_model_inputs = len(inputs)

    def step_loss(run_model, args):
        """The step's loss given a model call and the (rebuilt) arguments."""
        out = run_model(*args[:num_model_inputs])
        return _check_loss(loss_fn(out, *args[num_model_inputs:]))

    method = method or ("dynamo" if _has_dynamo() else "aot_function")
    if method not in ("dynamo", "aot_function"):
        raise ValueError(f"unknown capture method '{method}' "
                         "(expected 'dynamo' or 'aot_function')")
    if method == "dynamo" and not _has_dynamo():
        raise ExportError(f"torch {torch.__version__} has no torch._dynamo; "
                          "use method='aot_function'")
    device = _device_of(model, inputs)
    if time_ops is None:
        time_ops = device.type == "cuda"
    if time_ops and device.type != "cuda":
        raise ValueError("time_ops needs the model and inputs on a CUDA device")
    if replay not in ("auto", "real", "fake"):
        raise ValueError(f"unknown replay mode '{replay}' "
                         "(expected 'auto', 'real' or 'fake')")
    if replay == "fake" and time_ops:
        raise ValueError("time_ops needs replay='real' or 'auto'")

    start = time.perf_counter()
    with _preserved_state(model, device):
        capture = (_capture_dynamo if method == "dynamo"
                   else _capture_aot_function)(model, inputs + targets,
                                               step_loss)
        capture_s = time.perf_counter() - start
        graph, facts = build_graph_json(capture, time_ops, replay)
        eager = _measure_eager(capture) if device.type == "cuda" else {}

    result = _top_level(model, inputs, device, method, capture_s, time_ops,
                        facts, eager, meta)
    fwd_output = next(n for n in graph["nodes"]
                      if n["kind"] == "output" and n["phase"] == "fwd")
    result["graphs"] = [
        {"k": 0, "phase": "fwd", "graph_ms": eager.get("fwd_ms"),
         "num_user_outputs": fwd_output["args"]["num_user_outputs"],
         "num_saved": fwd_output["args"]["num_saved"]},
        {"k": 0, "phase": "bwd", "graph_ms": eager.get("bwd_ms")}]
    result["nodes"] = graph["nodes"]
    result["saved"] = graph["saved"]
    result["totals"] = _totals(result, facts, eager)
    result["warnings"] = facts["warnings"]
    result["n_warnings"] = len(facts["warnings"])
    if path is not None:
        write_json(result, path)
    return result


def write_json(graph, path):
    """Writes `graph` to `path` atomically: no half-written file on error."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".lethe-", suffix=".json", dir=directory)
    try:
        # mkstemp creates 0600; give the file the mode open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            f.write(graph_json_text(graph))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def graph_json_text(graph):
    """The JSON text of a graph, one node per line: an importer's error or
    remark then points at (and quotes) the line of the node concerned."""
    parts = []
    for key, value in graph.items():
        if key == "nodes" and isinstance(value, list):
            text = "[\n" + ",\n".join(json.dumps(n, allow_nan=False)
                                      for n in value) + "\n]"
        else:
            text = json.dumps(value, allow_nan=False)
        parts.append(f"{json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _has_dynamo():
    try:
        import torch._dynamo  # noqa: F401
        from torch._dynamo.backends.common import aot_autograd  # noqa: F401
    except ImportError:
        return False
    return True


def _device_of(model, inputs):
    for t in list(model.parameters()) + [i for i in inputs
                                         if isinstance(i, torch.Tensor)]:
        return t.device
    return torch.device("cpu")


@contextlib.contextmanager
def _preserved_state(model, device):
    """Restores buffers (running statistics) and RNG state after an export."""
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            with torch.no_grad():
                for b, saved in buffers:
                    b.copy_(saved)


def _named_state(model):
    """[(fqn, tensor, is_buffer)] of parameters then buffers, deduplicated."""
    params = [(n, p, False) for n, p in model.named_parameters()]
    buffers = [(n, b, True) for n, b in model.named_buffers()]
    return params + buffers


def _tied_names(model, state):
    """[(fqn, index into state)] for every name of every parameter/buffer,
    tied ones included (a weight shared by two modules has two names)."""
    index = {id(t): i for i, (_, t, _) in enumerate(state)}
    names = []
    for prefix, module in model.named_modules(remove_duplicate=False):
        for table in (module._parameters, module._buffers):
            for name, t in table.items():
                if t is not None and id(t) in index:
                    fqn = f"{prefix}.{name}" if prefix else name
                    names.append((fqn, index[id(t)]))
    return names


def _split_inputs(inputs):
    """Tensors become traced arguments; other values are baked in."""
    tensor_pos = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]

    def rebuild(tensors):
        full = list(inputs)
        for pos, t in zip(tensor_pos, tensors):
            full[pos] = t
        return full

    return [inputs[i] for i in tensor_pos], rebuild


def _check_loss(loss):
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ExportError("loss_fn must return a scalar tensor, got "
                          + (f"a tensor of shape {list(loss.shape)}"
                             if isinstance(loss, torch.Tensor)
                             else type(loss).__name__))
    if not loss.requires_grad:
        raise ExportError("the loss does not require grad: no parameter of "
                          "the model takes part in it")
    return loss


def _partition_recorder(record):
    """A partition_fn: the default partition, recording what it was given."""
    try:
        from torch._functorch.partitioners import default_partition
    except ImportError:
        from functorch.compile import default_partition

    def partition(joint_module, joint_inputs, **kwargs):
        fw_module, bw_module = default_partition(joint_module, joint_inputs,
                                                 **kwargs)
        num_fwd_outputs = kwargs.get("num_fwd_outputs")
        if num_fwd_outputs is None:  # torch 1.13 keeps it in the out spec
            num_fwd_outputs = \
                joint_module._out_spec.children_specs[0].num_leaves
        fw_output = next(n for n in fw_module.graph.nodes if n.op == "output")
        saved = [a.name for a in fw_output.args[0][num_fwd_outputs:]
                 if isinstance(a, torch.fx.Node) and _is_tensor_node(a)]
        record.update(
            joint=joint_module, num_fwd_outputs=num_fwd_outputs,
            fwd_names={n.name for n in fw_module.graph.nodes},
            bwd_names={n.name for n in bw_module.graph.nodes},
            saved_names=saved, fw_module=fw_module, bw_module=bw_module)
        # Nothing needs compiling or running: stop AOTAutograd here.
        raise _Captured()

    return partition


class _Captured(Exception):
    """Raised by the partition function once the graphs are recorded."""


def _is_tensor_node(n):
    val = n.meta.get("val")
    if val is not None:
        return isinstance(val, torch.Tensor)
    return True  # 1.13: only tensors are saved


def _boxed_compiler(gm, example_inputs):
    from functorch.compile import make_boxed_func
    return make_boxed_func(gm.forward)


# --- torch 1.13: functorch.compile.aot_function --------------------------

_ROOT_MARK = "<lethe-scope:>"


@contextlib.contextmanager
def _scope_hooks(model):
    """Tags traced nodes with `<lethe-scope:PATH>` in their stack trace."""
    import torch.fx.traceback as fx_traceback
    stack = []

    def mark():
        if not hasattr(fx_traceback, "override_stack_trace"):
            return
        fx_traceback.set_stack_trace(
            [f"<lethe-scope:{stack[-1]}>" if stack else _ROOT_MARK])

    def pre(path):
        def hook(module, args):
            stack.append(path)
            mark()
        return hook

    def post(module, args, output):
        if stack:
            stack.pop()
        mark()

    handles = []
    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_pre_hook(pre(name)))
            handles.append(module.register_forward_hook(post))
    try:
        yield mark
    finally:
        for h in handles:
            h.remove()


def _capture_aot_function(model, inputs, step_loss):
    from functorch.compile import aot_function
    import torch.fx.traceback as fx_traceback
    try:
        from torch.func import functional_call
    except ImportError:  # torch 1.13
        from torch.nn.utils.stateless import functional_call

    state = _named_state(model)
    all_names = _tied_names(model, state)
    tensors, rebuild = _split_inputs(inputs)
    record = {}

    def step(*flat):
        params = {name: flat[i] for name, i in all_names}
        # torch 1.13 only: later versions record scopes in node metadata.
        override = getattr(fx_traceback, "override_stack_trace", None)
        with (override() if override else contextlib.nullcontext()), \
                warnings.catch_warnings(), _scope_hooks(model) as mark:
            warnings.filterwarnings("ignore", "Anomaly Detection")
            # Anomaly mode stores each autograd node's (tagged) stack, which
            # AOTAutograd then sets while tracing that node's backward.
            with torch.autograd.detect_anomaly(check_nan=False):
                def run_model(*args):
                    mark()
                    out = functional_call(model, params, tuple(args))
                    mark()
                    return out

                return step_loss(run_model, rebuild(flat[len(state):]))

    # Buffers are cloned: the traced BatchNorm updates them in place.
    primal_values = [t.detach().clone() if is_buf else t
                     for _, t, is_buf in state] + list(tensors)
    from functorch.compile import config as aot_config
    notes = []
    # Fake tensors first: nothing of the model runs while tracing. Tensors
    # that the loss function closes over (targets) are real, which 1.13's
    # fake mode refuses; then trace again with real tensors. (torch 2.x
    # always traces with fake tensors and has no such switch.)
    has_switch = hasattr(aot_config, "use_fake_tensor")
    saved_flag = getattr(aot_config, "use_fake_tensor", None)
    for fake in ((True, False) if has_switch else (True,)):
        if has_switch:
            aot_config.use_fake_tensor = fake
        record.clear()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=UserWarning)
                compiled = aot_function(
                    step, fw_compiler=_boxed_compiler,
                    bw_compiler=_boxed_compiler,
                    partition_fn=_partition_recorder(record))
                compiled(*primal_values)
            break
        except _Captured:
            break
        except ExportError:
            raise
        except Exception as e:  # noqa: BLE001 - retried with real tensors
            if not fake or not has_switch:
                raise
            notes.append("traced with real tensors (fake tracing failed: "
                         f"{str(e).splitlines()[0][:160]})")
        finally:
            if has_switch:
                aot_config.use_fake_tensor = saved_flag
    if "joint" not in record:
        raise ExportError("AOTAutograd did not produce a joint graph (does "
                          "the loss depend on a parameter?)")

    primals = [{"name": n, "kind": "input" if is_buf else "param",
                "buffer": is_buf, "value": v, "source": t}
               for (n, t, is_buf), v in zip(state, primal_values)]
    primals += [{"name": None, "kind": "input", "buffer": False, "value": t,
                 "source": t} for t in tensors]
    return _finish(record, primals, "aot_function", notes)


# --- torch 2.x: torch.compile with an aot_autograd backend ---------------

class _Step(torch.nn.Module):
    def __init__(self, model, step_loss, rebuild):
        super().__init__()
        self.model = model
        self.step_loss = step_loss
        self.rebuild = rebuild

    def forward(self, *tensors):
        return self.step_loss(self.model, self.rebuild(tensors))


def _capture_dynamo(model, inputs, step_loss):
    import torch._dynamo
    from torch._dynamo.backends.common import aot_autograd

    tensors, rebuild = _split_inputs(inputs)
    record = {}
    aot_backend = aot_autograd(fw_compiler=_boxed_compiler,
                               bw_compiler=_boxed_compiler,
                               partition_fn=_partition_recorder(record))

    def backend(gm, example_inputs):
        # aot_module_simplified's primals: the graph module's parameters,
        # then its buffers, then the graph's inputs.
        lifted = ([(t, False) for _, t in gm.named_parameters(
            remove_duplicate=False)]
            + [(t, True) for _, t in gm.named_buffers(remove_duplicate=False)])
        record["lifted"] = lifted + [(t, None) for t in example_inputs]
        record["graphs"] = record.get("graphs", 0) + 1
        return aot_backend(gm, example_inputs)

    torch._dynamo.reset()
    step = _Step(model, step_loss, rebuild)
    compiled = torch.compile(step, backend=backend, fullgraph=True,
                             dynamic=False)
    try:
        compiled(*tensors)
    except Exception as e:  # dynamo wraps what the backend raises
        captured = any(isinstance(c, _Captured) for c in _causes(e))
        if not captured or "joint" not in record:
            user_error = next((c for c in _causes(e)
                               if isinstance(c, ExportError)), None)
            if user_error is not None:
                raise user_error from None
            raise ExportError(
                f"torch.compile could not capture the step: {e}") from e
    finally:
        torch._dynamo.reset()
    if record.get("graphs", 0) != 1 or "joint" not in record:
        raise ExportError(f"expected one captured graph, got "
                          f"{record.get('graphs', 0)}")

    names = {}
    for name, t, is_buf in _named_state(model):
        names.setdefault(id(t), (name, is_buf))
    primals = []
    for i, (t, is_buf) in enumerate(record["lifted"]):
        name, model_buf = names.get(id(t), (None, None))
        if name is None:
            kind = "input"
        else:
            kind = "input" if model_buf else "param"
            is_buf = model_buf
        value = t.detach().clone() if is_buf else t
        primals.append({"name": name, "kind": kind, "buffer": bool(is_buf),
                        "value": value, "source": t})
    return _finish(record, primals, "dynamo")


def _causes(e):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


def _finish(record, primals, method, notes=()):
    joint = record["joint"]
    primal_nodes = [n for n in joint.graph.nodes if n.op == "placeholder"
                    and not n.name.startswith("tangents")]
    # AOTAutograd passes a tensor given twice (an input that is also a
    # target) once: keep its first occurrence.
    seen = set()
    primals = [p for p in primals
               if id(p["source"]) not in seen and not seen.add(id(p["source"]))]
    if len(primal_nodes) != len(primals):
        raise ExportError(f"{method}: the joint graph has {len(primal_nodes)} "
                          f"primals, {len(primals)} inputs were lifted")
    for node, info in zip(primal_nodes, primals):
        if info["name"] is None:
            info["name"] = node.name
    return JointCapture(primals=primals, method=method, notes=list(notes), **{
        k: record[k] for k in ("joint", "num_fwd_outputs", "fwd_names",
                               "bwd_names", "saved_names", "fw_module",
                               "bw_module")})


# --- metadata --------------------------------------------------------------

def _measure_eager(cap, repeats=3):
    """Replays the partitioned forward and backward graphs on the GPU: step
    time and memory as the default partition runs them eagerly."""
    import statistics
    from lethe._joint_graph import _ones_like_meta

    primals = [p["value"] for p in cap.primals]
    device = next(v.device for v in primals if isinstance(v, torch.Tensor))
    fw_outputs = next(n for n in cap.fw_module.graph.nodes
                      if n.op == "output").args[0]
    bw_inputs = [n for n in cap.bw_module.graph.nodes if n.op == "placeholder"]
    tangents = {n.name: _ones_like_meta(n, device) for n in bw_inputs
                if n.name.startswith("tangents")}
    samples = []
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first run warms up
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            events[0].record()
            outs = cap.fw_module(*primals)
            events[1].record()
            fwd_end = torch.cuda.memory_allocated() - before
            by_name = {a.name: v for a, v in zip(fw_outputs, outs)
                       if isinstance(a, torch.fx.Node)}
            by_name.update(tangents)
            args = [by_name[n.name] for n in bw_inputs]
            del outs, by_name
            cap.bw_module(*args)
            events[2].record()
            del args
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            samples.append((events[0].elapsed_time(events[1]),
                            events[1].elapsed_time(events[2]),
                            events[0].elapsed_time(events[2]),
                            peak, before, fwd_end))
    samples = samples[1:]
    fwd, bwd, step = ([s[i] for s in samples] for i in range(3))
    _, _, _, peak, before, fwd_end = samples[-1]
    return {"fwd_ms": statistics.median(fwd), "bwd_ms": statistics.median(bwd),
            "step_ms_eager": statistics.median(step), "step_ms_eager_all": step,
            "peak_bytes_eager": peak, "mem_before_fwd_bytes_eager": before,
            "act_peak_bytes_eager": peak - before,
            "act_fwd_end_bytes_eager": fwd_end}


def _top_level(model, inputs, device, method, capture_s, time_ops, facts,
               eager, meta):
    dtypes = [p.dtype for p in model.parameters()]
    dtype = max(set(dtypes), key=dtypes.count) if dtypes else None
    short = {torch.float32: "fp32", torch.bfloat16: "bf16",
             torch.float16: "fp16", torch.float64: "fp64"}
    first = next((x for x in inputs if isinstance(x, torch.Tensor)), None)
    top = {
        "model": type(model).__name__,
        "config": {},
        "batch": int(first.shape[0]) if first is not None and first.dim() else None,
        "seq": (int(first.shape[1]) if first is not None and first.dim() == 2
                and not first.is_floating_point() else None),
        "dtype": short.get(dtype, str(dtype).replace("torch.", "")),
        "device": (torch.cuda.get_device_name(device) if device.type == "cuda"
                   else "cpu"),
        "torch": torch.__version__,
        "capture": {"method": method, "fullgraph": True, "n_subgraphs": 1,
                    "capture_s": capture_s, "replay": facts["replay"],
                    "replay_s": facts["replay_s"],
                    "loss": facts["loss"]},
        "timing": ({"per_op": "median of 5 CUDA-event timings per op run "
                              "alone, each preceded by a ~100us GPU sleep "
                              "kernel; the graph replayed once with real "
                              "tensors"} if time_ops else None),
    }
    if meta:
        top.update(meta)
    return top


def _storage_root(nodes, nid, index):
    """The value owning the storage of result `index` of node `nid`."""
    while "alias" in nodes[nid]["outputs"][index]:
        nid, index = nodes[nid]["inputs"][nodes[nid]["outputs"][index]["alias"]]
    return nid, index


def _totals(graph, facts, eager):
    nodes = graph["nodes"]
    ops = [n for n in nodes if n["kind"] == "op"]
    param_bytes = sum(n["outputs"][0]["bytes"] for n in nodes
                      if n["kind"] == "param")
    saved_logical, saved_unique, roots = 0, 0, set()
    for nid, index in graph["saved"]:
        saved_logical += nodes[nid]["outputs"][index]["bytes"]
        root = _storage_root(nodes, nid, index)
        if root not in roots and nodes[root[0]]["kind"] != "param":
            roots.add(root)
            saved_unique += nodes[root[0]]["outputs"][root[1]]["bytes"]
    totals = {
        "saved_bytes_unique_storage": saved_unique,
        "saved_bytes_logical": saved_logical,
        "param_bytes": param_bytes,
        "n_nodes": len(nodes),
        "n_fwd_ops": sum(1 for n in ops if n["phase"] == "fwd"),
        "n_bwd_ops": sum(1 for n in ops if n["phase"] == "bwd"),
        "n_saved": len(graph["saved"]),
    }
    for phase in ("fwd", "bwd"):
        times = [n["time_us"] for n in ops if n["phase"] == phase
                 and n["time_us"] is not None]
        if times:
            totals[f"{phase}_ms_sum_ops"] = sum(times) / 1000.0
    totals.update(eager)
    return totals

"""`lethe.torch.backend`: a torch.compile backend that plans activation
memory with Lethe.

With `compiler="inductor"` (the default where torch has the hooks, torch
>= 2.9) the backend is inductor itself with Lethe as its partitioner
(lethe._inductor): the forward and backward are compiled with fusion, and
Lethe decides what the forward saves, what the backward re-runs and what
travels to host memory.

With `compiler="eager"` (torch 1.13, and bitwise checks against eager
PyTorch) AOTAutograd's joint graph is exported to Lethe's JSON, planned, and
split by lethe._partition so that the forward saves what Lethe retains, the
backward re-runs what Lethe recomputes, and offloaded values travel to
pinned host memory and back on side streams (lethe._offload); the two
graphs then run eagerly, op by op.
"""

import time

import torch

from lethe import (_budget, _calibrate, _inductor, _kernel_times, _partition,
                   _step_meter)
from lethe._joint_graph import JointCapture, build_graph_json
from lethe._partition import OFFLOAD, RETAIN, Decision, PartitionInfo
from lethe._planclient import (InfeasibleBudgetError, PlanError, PlanRecord,
                               default_policy, parse_plan, plan_json)

__all__ = ["Backend", "backend", "InfeasibleBudgetError", "PlanError",
           "GraphPlan"]


def backend(budget="40%", policy=None, device=None, **options):
    """A Lethe backend: `torch.compile(model, backend=lethe.torch.backend(
    budget="40%"), dynamic=False)` on torch 2.x, or
    `lethe.torch.backend(...)(model)`, which calls torch.compile (with
    `dynamic=False`) or, on torch 1.13, wraps the module with functorch's
    `aot_module`.

    budget: device bytes the step may allocate besides its inputs: bytes
      (an int of at least 1 MiB), "12GiB", a percentage of the unplanned
      peak ("40%"), a float share in (0, 1], or "least" (the least budget
      the policy can meet, each compiled graph's own); None: no limit. The
      budget applies to each compiled graph: after a graph break, give a
      share.
    policy: none, full, every-n, selective-op, offload-all or auto; None:
      the lethe-plan pass's default (auto), read from the library.
    device: the device profile Lethe plans for (h200, h100, a100, or a JSON
      file); None: the profile of this process's GPU.
    compiler: "inductor" (compile with fusion, Lethe as the partitioner;
      the default on a torch that has the hooks) or "eager".
    inductor_options: further inductor config patches (inductor only),
      e.g. {"triton.cudagraphs": True}: mode="reduce-overhead" (a custom
      backend takes no mode=). A calibrating module runs without CUDA
      graphs until the calibration is done (a replay's allocations and
      launches cannot be measured), then is compiled once more with them.
    costs: how ops are priced (inductor only): "auto" (default: measured on
      the GPU the step runs on, the cost model elsewhere; see
      lethe._measure), "measured", "model", or a table of op times in µs
      by joint-graph node name.
    peak_correction: bytes by which Lethe's predicted peak of the compiled
      step exceeds the measured one (inductor only): plans at budget +
      correction. A measured peak above the budget is a negative
      correction. Takes a byte budget.
    calibrate: "auto" (default; inductor on CUDA), True or False: measure
      3 steps of the module `backend(...)(model)` returns, after the
      compile and a second of warm steps (peak and median time,
      lethe._calibrate) and, if the peak is over a byte budget, a
      byte budget that constrained the plan is under-used by more than 5%,
      or the step is more than 5% off its prediction, re-plan once with the
      error corrected and recompile. In one warm step the kernels
      inductor generated are timed (on CUDA by events around their
      launches, elsewhere under torch.profiler) and attributed to the
      values they compute (lethe._kernel_times), and the re-plan prices
      those values by these times instead of scaling the model.
      `Backend.calibration` says what was measured and done. Needs the
      module route (not options=).
    Keyword options: `offload` (True / False / "auto": on CUDA only;
    default False with inductor, whose fused steps leave copies no time to
    hide, and "auto" eager),
    `prefetch` ("plan": where Lethe scheduled the H2D copy, or "layer": one
    layer ahead of the first use), `replay_rng` (let Lethe recompute RNG ops;
    only sound with saved RNG state, off by default), `dump_dir` (write each
    graph's JSON and plan there), `planner` (a callable graph -> plan
    document, replacing the call to Lethe), `fusion_guards` (inductor
    only: which of lethe._fusion's holds on inductor's fusion and order a
    binding plan compiles under, of "horizontal", "vertical" and "order";
    all by default, fewer to measure what one is worth), and planner
    options passed through (`n`, `keep_ops`, `min_offload_bytes`,
    `host_budget`, `solver`).
    """
    return Backend(budget=budget, policy=policy, device=device, **options)


class GraphPlan(PlanRecord):
    """What the eager route decided for one compiled graph."""

    def __init__(self, plan, info, graph, plan_s):
        super().__init__(plan, plan_s)
        self.info = info
        self.graph = graph

    def summary(self):
        return dict(self.plan.figures(),
                    saved=len(self.info.saved),
                    recomputed_nodes=len(self.info.recomputed),
                    offloaded=len(self.info.offloaded),
                    retained_instead=self.info.retained_instead,
                    plan_s=self.plan_s)


def _cudagraphs(inductor_options) -> bool:
    """Whether inductor will run the compiled step as CUDA graphs: asked
    in the backend's inductor options or set in inductor's config."""
    if "triton.cudagraphs" in inductor_options:
        return bool(inductor_options["triton.cudagraphs"])
    try:
        from torch._inductor import config
    except ImportError:  # torch 1.13: no inductor
        return False
    return bool(config.triton.cudagraphs)


class Backend:
    """See `backend`. `plans` lists a GraphPlan per compiled graph."""

    def __init__(self, budget="40%", policy=None, device=None, *,
                 offload=None, prefetch="plan", replay_rng=False,
                 dump_dir=None, planner=None, compiler=None,
                 inductor_options=None, costs="auto", peak_correction=0,
                 calibrate="auto", **plan_options):
        if prefetch not in ("plan", "layer"):
            raise ValueError(f"prefetch must be 'plan' or 'layer', got "
                             f"'{prefetch}'")
        if compiler is None:
            compiler = "inductor" if _has_inductor_hooks() else "eager"
        if offload is None:
            # Under inductor, offloading plans measured slower than
            # recompute-only ones at every budget (bench/results/
            # torch-inductor.md: GPT-2-medium 96.8 vs 47.8 ms at compile's
            # peak): the copies are not hidden behind fused kernels. Opt in.
            offload = False if compiler == "inductor" else "auto"
        if offload not in (True, False, "auto"):
            raise ValueError("offload must be True, False or 'auto'")
        if compiler not in ("inductor", "eager"):
            raise ValueError(f"compiler must be 'inductor' or 'eager', got "
                             f"{compiler!r}")
        self.compiler = compiler
        self.inductor_options = dict(inductor_options or {})
        self.budget = _budget.normalize_budget(budget)
        self.policy = policy if policy is not None else default_policy()
        self.device = device or _budget.default_device_profile()
        if compiler == "inductor":
            if prefetch != "plan":
                raise ValueError("prefetch='layer' is for compiler='eager'")
            if offload == "auto" and _cudagraphs(self.inductor_options):
                # Decided here, not per compile: the calibration compiles
                # without CUDA graphs, and the plan it measures must be the
                # one the graphs will run.
                offload = False
            self.partitioner = _inductor.LethePartitioner(
                budget, self.policy, self.device, offload=offload,
                replay_rng=replay_rng, planner=planner, costs=costs,
                dump_dir=dump_dir, peak_correction=peak_correction,
                **plan_options)
        elif (costs and costs != "auto") or peak_correction \
                or calibrate is True:
            raise ValueError("costs=, peak_correction= and calibrate= are "
                             "for compiler='inductor'")
        if calibrate not in ("auto", True, False):
            raise ValueError(f"calibrate must be 'auto', True or False, got "
                             f"{calibrate!r}")
        self._calibrate = compiler == "inductor" and (
            calibrate is True or (calibrate == "auto"
                                  and torch.cuda.is_available()))
        # What the automatic calibration measured and did (see calibrate=),
        # and the PartitionRecord of the plan the module runs after it.
        self.calibration = {}
        # A replayed CUDA graph allocates nothing and launches nothing one
        # could time: the calibration would read a replay's peak as the plan
        # under-using its budget. Under CUDA graphs the module calibrates
        # without them and is compiled with them once it is done
        # (Calibrator.on_step).
        self.cudagraphs_deferred = self._calibrate \
            and _cudagraphs(self.inductor_options)
        self.calibrated_plan = None
        self.offload = offload
        self.prefetch = prefetch
        self.replay_rng = replay_rng
        self.dump_dir = dump_dir
        self.planner = planner
        self.plan_options = plan_options
        self._plans = []

    def calibrate(self, measured_peak_bytes, measured_step_ms=None):
        """One calibration step by hand (inductor; `calibrate=` does it
        automatically for `backend(...)(model)`): given the peak the
        compiled step measured (bytes it allocated beyond what was resident
        before it), plans the next compile at budget + (predicted -
        measured), so that the measured peak meets the budget as closely as
        the model allows; given its time (forward + backward, ms), scales
        the modelled kernels' times to match. Returns the peak correction;
        call torch._dynamo.reset() (or compile again) for it to take
        effect. The peak needs a byte budget."""
        if self.compiler != "inductor":
            raise ValueError("calibrate() is for compiler='inductor'")
        records = self.partitioner.records
        if not records:
            raise ValueError("nothing compiled yet: run one step first")
        if not isinstance(measured_peak_bytes, int) or measured_peak_bytes <= 0:
            raise ValueError("measured_peak_bytes must be a positive int")
        if not self.budget or not self.budget.isdigit():
            raise ValueError("peak calibration needs a budget in bytes")
        if measured_step_ms is not None and not measured_step_ms > 0:
            raise ValueError("measured_step_ms must be a positive number")
        r = records[-1]
        p = self.partitioner
        p.set_peak_correction(p.peak_correction + r.plan.peak_bytes
                              - measured_peak_bytes)
        if measured_step_ms is not None:
            fix = _calibrate.correction(
                _step_meter.Measurement(None, float(measured_step_ms)),
                predicted_peak=r.plan.peak_bytes,
                predicted_step_us=r.plan.step_us,
                library_us=r.measured.get("library_us", 0.0),
                budget_bytes=None, byte_budget=True,
                peak_correction=p.peak_correction,
                time_scale=p.time_scale)
            p.set_time_scale(fix.time_scale)
        return p.peak_correction

    @property
    def plans(self):
        """The newest records of what was planned, one per compiled graph
        (GraphPlan for eager, lethe._inductor.PartitionRecord for
        inductor)."""
        if self.compiler == "inductor":
            return self.partitioner.records
        return self._plans

    # --- entry points -----------------------------------------------------

    def __call__(self, model, example_inputs=None):
        if example_inputs is None:
            if not isinstance(model, torch.nn.Module):
                raise TypeError("backend(...)(model) takes a torch.nn.Module")
            if hasattr(torch, "compile"):
                # Lethe plans static shapes: no automatic dynamic recompile.
                compiled = torch.compile(model, backend=self, dynamic=False)
                if self._calibrate:
                    calibrator = _calibrate.Calibrator(self, compiled)
                    calibrator.meter = _step_meter.StepMeter(
                        compiled, calibrator.on_step,
                        profile=calibrator.wants_profile,
                        on_profile=calibrator.on_profile)
                return compiled
            return self.wrap_module(model)
        # torch.compile calls backends with (GraphModule, example inputs).
        if self.compiler == "inductor":
            from torch._inductor.compile_fx import compile_fx
            # What the plan assumes of inductor (no horizontal fusion under
            # a budget, no buffer reuse where it offloads), then the
            # user's patches.
            patches = {**self.partitioner.inductor_options(),
                       **self.inductor_options}
            if self.cudagraphs_deferred:
                patches["triton.cudagraphs"] = False
            extra = {}
            if self._calibrate and _kernel_times.supported():
                # The calibration profiles a step and prices the generated
                # kernels by it: their provenance is recorded per graph.
                from torch._inductor.compile_fx import compile_fx_inner
                if self.partitioner.provenance is None:
                    self.partitioner.provenance = \
                        _kernel_times.KernelProvenance()
                patches = {**_kernel_times.COMPILE_PATCHES, **patches}
                extra["inner_compile"] = \
                    self.partitioner.provenance.wrap(compile_fx_inner)
            return compile_fx(model, example_inputs, config_patches=patches,
                              **extra)
        from torch._dynamo.backends.common import aot_autograd
        compiler = aot_autograd(fw_compiler=_boxed_eager,
                                bw_compiler=_boxed_eager,
                                partition_fn=self.partition)
        return compiler(model, example_inputs)

    def wrap_module(self, model):
        """functorch's aot_module with Lethe's partition (torch 1.13)."""
        try:
            from functorch.compile import aot_module
        except ImportError as e:
            raise RuntimeError("this torch has neither torch.compile nor "
                               "functorch.compile") from e
        return aot_module(model, fw_compiler=_boxed_eager,
                          bw_compiler=_boxed_eager,
                          partition_fn=self.partition)

    # --- the partition function -----------------------------------------

    def partition(self, joint_module, joint_inputs, **kwargs):
        """AOTAutograd partition_fn: Lethe's plan as forward/backward."""
        start = time.perf_counter()
        default_fw, default_bw = _default_partition(joint_module,
                                                    joint_inputs, **kwargs)
        num_fwd_outputs = kwargs.get("num_fwd_outputs")
        if num_fwd_outputs is None:  # torch 1.13 keeps it in the out spec
            num_fwd_outputs = \
                joint_module._out_spec.children_specs[0].num_leaves
        fwd_names = {n.name for n in default_fw.graph.nodes}
        device = _inductor._device_of(joint_inputs)
        graph = _export(joint_module, joint_inputs, default_fw, default_bw,
                        num_fwd_outputs, device,
                        kwargs.get("static_lifetime_input_indices"))

        offload_ok = (self.offload is True or
                      (self.offload == "auto" and device.type == "cuda"))
        plan = self._plan(graph, offload_ok)
        decisions = dict(plan.owners)
        if not offload_ok:  # documented: offload -> retain without CUDA
            decisions = {k: Decision(RETAIN) if d.kind == OFFLOAD else d
                         for k, d in decisions.items()}
        if self.prefetch == "layer":  # copies: plan.owners stays as planned
            decisions = {k: Decision(d.kind, d.release_after, None,
                                     d.restore_before)
                         for k, d in decisions.items()}

        info = PartitionInfo()
        storages = _partition._Storages(joint_module, graph)
        saved, offloaded = _partition.choose_saved_values(
            joint_module, fwd_names, storages, decisions,
            replay_rng=self.replay_rng, info=info,
            mutated=_partition.mutated_inputs(joint_module))
        fw, bw = _extract(joint_module, saved, num_fwd_outputs, kwargs)
        bw_names = {n.name for n in bw.graph.nodes}
        info.recomputed = sorted(n.name for n in bw.graph.nodes
                                 if n.op == "call_function"
                                 and n.name in fwd_names)
        _partition.reorder_on_demand(bw, set(info.recomputed))
        fw_out = next(n for n in fw.graph.nodes if n.op == "output")
        info.saved = [a.name for a in _flat(fw_out.args)[num_fwd_outputs:]
                      if isinstance(a, torch.fx.Node)]
        offloaded_names = [n.name for n in saved if n in offloaded
                           and n.name in bw_names and n.name in info.saved]
        if offloaded_names:
            names_by_id = {e["id"]: e["name"] for e in graph["nodes"]}
            _partition.insert_offload(fw, bw, offloaded_names, storages,
                                      decisions, names_by_id, device, info,
                                      num_fwd_outputs)
        # Records are bounded (_MAX_RECORDS): a run that recompiles must not
        # hold every graph it planned.
        record = GraphPlan(plan, info, graph, time.perf_counter() - start)
        self._plans.append(record)
        del self._plans[:-_inductor._MAX_RECORDS]
        if self.dump_dir:
            record.dump(self.dump_dir, record.graph, record.summary())
        return fw, bw

    def _plan(self, graph, offload_ok):
        options = dict(self.plan_options)
        if not offload_ok:
            options.setdefault("host_budget", 0)
        if self.replay_rng:
            options["replay_rng"] = True
        def plan_at(budget):
            if self.planner is not None:
                raw = self.planner(graph, budget=budget, policy=self.policy,
                                   device=self.device, **options)
            else:
                raw = plan_json(graph, budget, self.policy, self.device,
                                **options)
            return parse_plan(raw, graph)
        plan = plan_at(self.budget)
        if _budget.nothing_to_lower(plan, self.budget):
            least = plan.least_feasible_budget_bytes
            _budget.warn_nothing_to_lower("this graph", least, self.budget)
            plan = plan_at(str(least))
        if not plan.feasible:
            given = f" ({plan.budget_bytes} B)" if plan.budget_bytes \
                and str(plan.budget_bytes) != self.budget else ""
            raise _budget.infeasible_error(
                self.budget, given, self.policy, "this graph",
                plan.least_feasible_budget_bytes, plan.baseline_peak_bytes)
        return plan


# The last few exports, by joint graph code and input shapes: compiling one
# model again (another budget, a recompile) skips the export's replay.
_export_cache = {}
_EXPORT_CACHE_SIZE = 4


def _export(joint_module, joint_inputs, fw, bw, num_fwd_outputs, device,
            static_indices=None):
    primals, tangents = _flatten_inputs(joint_inputs)
    key = (joint_module.code, str(device), tuple(static_indices or ()), tuple(
        (tuple(t.shape), str(t.dtype)) if isinstance(t, torch.Tensor)
        else repr(t) for t in primals + tangents))
    if key in _export_cache:
        return _export_cache[key]
    capture = _joint_capture(joint_module, joint_inputs, fw, bw,
                             num_fwd_outputs, static_indices)
    graph, _ = build_graph_json(capture, time_ops=False, replay_mode="auto")
    graph = {"model": "lethe.torch.backend", "device": str(device),
             "torch": torch.__version__, "nodes": graph["nodes"],
             "saved": graph["saved"]}
    if len(_export_cache) >= _EXPORT_CACHE_SIZE:
        _export_cache.pop(next(iter(_export_cache)))
    _export_cache[key] = graph
    return graph


def _boxed_eager(gm, example_inputs):
    try:
        from torch._functorch.aot_autograd import make_boxed_func
    except ImportError:
        from functorch.compile import make_boxed_func
    return make_boxed_func(gm.forward)


def _flat(args):
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(_flat(a))
        else:
            out.append(a)
    return out


def _has_inductor_hooks():
    try:
        _inductor.require_inductor_hooks()
        return True
    except RuntimeError:
        return False


def _default_partition(joint_module, joint_inputs, **kwargs):
    """torch's default_partition with the arguments it takes (AOTAutograd
    and inductor pass others, such as `compiler`)."""
    import inspect
    try:
        from torch._functorch.partitioners import default_partition
    except ImportError:
        from functorch.compile import default_partition
    params = inspect.signature(default_partition).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    if _has_checkpoint_tags(joint_module):
        # default_partition hands tagged graphs to min-cut: the "eager"
        # forward/backward split Lethe starts from would be min-cut's.
        raise PlanError(
            "the compiled region uses torch.utils.checkpoint (or a SAC "
            "policy): with compiler='eager' Lethe plans the eager step and "
            "cannot start from checkpointed regions; remove the "
            "checkpointing or use compiler='inductor'")
    return default_partition(joint_module, joint_inputs, **kwargs)


def _has_checkpoint_tags(joint_module):
    for n in joint_module.graph.nodes:
        if n.meta.get("recompute") is not None:
            return True
    return False


def _extract(joint_module, saved, num_fwd_outputs, kwargs):
    """Forward and backward modules for the saved values, with the
    installed torch's own extraction (it copies nodes in joint order and
    lets the backward re-run what is not saved)."""
    import inspect
    try:
        from torch._functorch import partitioners
    except ImportError:
        from functorch._src import partitioners
    extract = partitioners._extract_fwd_bwd_modules
    params = inspect.signature(extract).parameters
    saved = list(saved)
    if "saved_sym_nodes" not in params:  # torch 1.13
        return extract(joint_module, saved)
    tensors = [n for n in saved if not _is_sym(n)]
    syms = [n for n in saved if _is_sym(n)]
    call = {"num_fwd_outputs": num_fwd_outputs}
    for key in ("static_lifetime_input_nodes",):
        if key in params and key in kwargs:
            call[key] = kwargs[key]
    if "static_lifetime_input_nodes" in params and \
            "static_lifetime_input_nodes" not in call:
        indices = kwargs.get("static_lifetime_input_indices")
        if indices is not None:
            from torch.utils._ordered_set import OrderedSet
            primals = [n for n in joint_module.graph.nodes
                       if n.op == "placeholder"
                       and not n.name.startswith("tangents")]
            call["static_lifetime_input_nodes"] = OrderedSet(
                p for i, p in enumerate(primals) if i in indices)
    call = {k: v for k, v in call.items() if k in params}
    return extract(joint_module, tensors, syms, **call)


def _is_sym(n):
    val = n.meta.get("val")
    return val is not None and not isinstance(val, torch.Tensor)


def _flatten_inputs(joint_inputs):
    primals, tangents = joint_inputs[0], joint_inputs[1]
    return list(primals), list(tangents) if isinstance(
        tangents, (list, tuple)) else [tangents]


def _joint_capture(joint, joint_inputs, fw, bw, num_fwd_outputs,
                   static_indices=None):
    """The exporter's JointCapture for a partition function's arguments.
    Parameters are the primals AOTAutograd calls static-lifetime inputs
    (where it says; torch 1.13 does not): an activation that enters after a
    graph break also requires grad, but it is an input, not a parameter."""
    primal_nodes = [n for n in joint.graph.nodes if n.op == "placeholder"
                    and not n.name.startswith("tangents")]
    values, _ = _flatten_inputs(joint_inputs)
    if len(values) != len(primal_nodes):
        raise PlanError(f"the joint graph has {len(primal_nodes)} primals, "
                        f"AOTAutograd passed {len(values)}")
    primals = []
    for i, (node, value) in enumerate(zip(primal_nodes, values)):
        if static_indices is not None:
            is_param = i in static_indices
        else:
            is_param = isinstance(value, torch.Tensor) and value.requires_grad
        primals.append({"name": node.name,
                        "kind": "param" if is_param else "input",
                        "buffer": False, "value": value, "source": value})
    fw_out = next(n for n in fw.graph.nodes if n.op == "output")
    saved_names = [a.name for a in _flat(fw_out.args)[num_fwd_outputs:]
                   if isinstance(a, torch.fx.Node) and not _is_sym(a)]
    return JointCapture(
        primals=primals, method="backend", notes=[], joint=joint,
        num_fwd_outputs=num_fwd_outputs,
        fwd_names={n.name for n in fw.graph.nodes},
        bwd_names={n.name for n in bw.graph.nodes},
        saved_names=saved_names, fw_module=fw, bw_module=bw)

"""Lethe as inductor's partitioner (torch 2.11's `custom_partitioner_fn`).

    torch.compile(model, options={"custom_partitioner_fn":
                                  lethe.torch.partitioner(budget="50%")})

Inductor decomposes the joint forward+backward graph, runs its joint passes
and calls the partitioner, then compiles the forward and the backward with
fusion. Ours:

1. builds Lethe's graph of the joint graph at the granularity that survives
   fusion (lethe._fused_graph: fusible chains fold into their consumers);
2. plans it under the budget (one call to the Lethe library), with the
   library kernels' times and the copy rates measured on this GPU
   (lethe._measure, `costs="auto"`);
3. writes the decisions as activation-checkpointing tags on the joint graph
   (retain and offload: MUST_SAVE; everything else of the forward:
   PREFER_RECOMPUTE, so the backward re-runs it from what is saved) and lets
   torch's min-cut partitioner build the two graphs: it keeps RNG
   functionalization, static inputs, the autograd-like backward order and
   the rest of what inductor expects;
4. compares what min-cut saved with the plan (`mismatches`);
5. replaces each offloaded saved value by its host copy (lethe._offload_insert,
   with the ops of lethe._offload_ops).
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import tempfile
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch
import torch.fx as fx

from lethe import Plan
from lethe import _offload_insert, _offload_ops
from lethe._budget import (default_device_profile, infeasible_error,
                           normalize_budget, nothing_to_lower,
                           warn_nothing_to_lower)
from lethe._fusion import GUARDS, install_fusion_guard
from lethe._fused_graph import (FusedGraph, _is_tensor_node, value_names,
                                build_fused_graph, draws_seeds)
from lethe._kernel_times import KernelProvenance, planned_roots
from lethe._measure import (CostTable, device_key, host_launch_profile,
                            inductor_profile, measured_profile,
                            runs_as_library_kernel, scaled_profile)
from lethe._partition import OFFLOAD, RETAIN
from lethe._planclient import (PlanRecord, compute_times, default_policy,
                               parse_plan, plan_json)
from lethe.schema import is_workspace, workspace_output

__all__ = ["LethePartitioner", "PartitionRecord", "require_inductor_hooks"]

# Records kept per partitioner: a long training run that recompiles keeps
# the newest few, not every graph it ever planned.
_MAX_RECORDS = 8

def require_inductor_hooks() -> None:
    """Raises a clear error on a torch without the private APIs used."""
    missing = []
    try:
        from torch._inductor import config as inductor_config
        if not hasattr(inductor_config, "custom_partitioner_fn"):
            missing.append("torch._inductor.config.custom_partitioner_fn")
        from torch._inductor.custom_graph_pass import (  # noqa: F401
            CustomPartitionerFn)
    except ImportError:
        missing.append("torch._inductor.custom_graph_pass."
                       "CustomPartitionerFn")
    try:
        from torch._functorch import partitioners
        for name in ("min_cut_rematerialization_partition", "classify_nodes",
                     "get_default_op_list"):
            if not hasattr(partitioners, name):
                missing.append(f"torch._functorch.partitioners.{name}")
    except ImportError:
        missing.append("torch._functorch.partitioners")
    try:
        from torch.utils.checkpoint import CheckpointPolicy  # noqa: F401
    except ImportError:
        missing.append("torch.utils.checkpoint.CheckpointPolicy")
    if missing:
        raise RuntimeError(
            f"Lethe's inductor partitioner needs torch >= 2.9 (found "
            f"{torch.__version__}): missing {', '.join(missing)}. Use "
            "lethe.torch.backend(..., compiler='eager') on this torch.")


def graph_digest(doc: Dict[str, Any]) -> str:
    """The planned graph's structure (its nodes, their inputs and
    outputs), not its prices: two compiles of one graph have the same
    digest whatever the calibration measured, a graph of other shapes
    another."""
    h = hashlib.sha256()
    for e in doc["nodes"]:
        h.update(json.dumps([e.get("id"), e.get("name"), e.get("kind"),
                             e.get("op"), e.get("inputs"), e.get("outputs")],
                            sort_keys=True, default=str).encode())
    return h.hexdigest()


class PartitionRecord(PlanRecord):
    """What the partitioner decided for one compiled graph."""

    def __init__(self, plan: Plan, graph: Optional[Dict[str, Any]],
                 saved: List[str], mismatches: List[Dict[str, Any]],
                 offloaded: List[str], notes: List[str], plan_s: float,
                 measured: Optional[Dict[str, Any]] = None,
                 compile_id: Optional[str] = None, ops: int = 0):
        super().__init__(plan, plan_s)
        # Planned at the model's least, above the budget, to be measured
        # and re-planned (LethePartitioner.allow_provisional).
        self.provisional = False
        # What lethe._measure timed for this graph ("library_us": the part
        # of the predicted step measured on the GPU, 0 without measuring).
        self.measured = measured or {}
        # Dynamo's id of the compiled frame ("0/0"), to name the graph.
        self.compile_id = compile_id
        # With kernel provenance on: the kernel call sites as inductor
        # compiles them, planned_roots(), and a profiled step's Attribution
        # (lethe._kernel_times).
        self.kernels = self.roots = self.attribution = None
        self.graph = graph
        # graph_digest() of the planned graph: which graph the plan's
        # decisions name (LethePartitioner.fixed_plan).
        self.graph_digest: Optional[str] = None
        # While calibrating: the plan's compute-stream time by node
        # (_planclient.compute_times), the ops whose times were given (not
        # the model's) and the time scale the model's were priced at.
        self.compute_times: Optional[Dict[str, Tuple[float, int]]] = None
        self.given: Set[str] = set()
        self.time_scale = 1.0
        # The planned graph's ops (kept when the graph itself is not): the
        # calibration's host time an op divides by them.
        self.ops = ops
        self.saved = saved
        self.mismatches = mismatches
        self.offloaded = offloaded
        self.notes = notes

    def summary(self) -> Dict[str, Any]:
        return dict(self.plan.figures(), saved=len(self.saved),
                    offloaded=len(self.offloaded),
                    mismatches=len(self.mismatches), notes=self.notes,
                    plan_s=self.plan_s,
                    measured_nodes=self.measured.get("timed_nodes", 0),
                    profiled_nodes=self.measured.get("profiled_nodes", 0))


def _partitioner_base():
    try:
        from torch._inductor.custom_graph_pass import CustomPartitionerFn
        return CustomPartitionerFn
    except ImportError:
        return object


class LethePartitioner(_partitioner_base()):
    """Inductor's partition function, planned by Lethe. See the module
    docstring; `records` holds the newest PartitionRecords."""

    def __init__(self, budget: Any = "40%", policy: Optional[str] = None,
                 device: Optional[str] = None, *, offload: Any = False,
                 replay_rng: bool = False, planner=None,
                 costs: Any = "auto",
                 dump_dir: Optional[str] = None, fold: bool = True,
                 peak_correction: int = 0, time_scale: float = 1.0,
                 fusion_guards: Any = GUARDS,
                 **plan_options: Any):
        require_inductor_hooks()
        if offload not in (True, False, "auto"):
            raise ValueError("offload must be True, False or 'auto'")
        # lethe._fusion's guards this partitioner's plans compile under
        # (all by default; fewer to measure what one is worth).
        if isinstance(fusion_guards, str):  # "horizontal,order"
            fusion_guards = [g for g in fusion_guards.split(",") if g]
        self.fusion_guards = frozenset(fusion_guards)
        if not self.fusion_guards <= set(GUARDS):
            raise ValueError(
                f"fusion_guards must be a subset of {GUARDS}, got "
                f"{sorted(self.fusion_guards - set(GUARDS))}")
        self.budget = normalize_budget(budget)
        self.peak_correction = 0
        self.set_peak_correction(peak_correction)
        self.time_scale = 1.0
        self.set_time_scale(time_scale)
        # The host's time to issue one op of the compiled step (µs), where
        # the calibration found the host bounding it; None: the profile's.
        self.host_launch_us: Optional[float] = None
        # None: the lethe-plan pass's default, stated once (Passes.td).
        self.policy = policy if policy is not None else default_policy()
        self.device = device or default_device_profile()
        self.offload = offload
        self.replay_rng = replay_rng
        self.planner = planner
        if isinstance(costs, str):
            if costs not in ("auto", "measured", "model"):
                raise ValueError("costs must be 'auto' (measured on a GPU, "
                                 "the cost model elsewhere), 'measured', "
                                 "'model' or a table {node name: us}")
            self.costs: Dict[str, float] = {}
            self.cost_source = costs
        else:
            self.costs = dict(costs or {})
            self.cost_source = "table" if self.costs else "model"
        self._cost_tables: Dict[str, Any] = {}
        # Generated kernels' times (µs) by planned node, from a profiled
        # step (the backend's calibration), and the provenance capture that
        # attributes them (the backend owns inductor's inner compile).
        self.profiled: Dict[str, float] = {}
        self.provenance: Optional[KernelProvenance] = None
        # The last plan's compute-stream time by node (compute_times), kept
        # while calibrating.
        self.compute_times: Optional[Dict[str, Tuple[float, int]]] = None
        self.dump_dir = dump_dir
        self.fold = fold
        self.plan_options = plan_options
        self.records: List[PartitionRecord] = []
        # Whether the graph last partitioned runs under a plan that binds
        # (recomputes or offloads): lethe._fusion's guards read it.
        self.plan_binds = False
        self.compiles = 0  # graphs partitioned (records keep the newest)
        # Calibration (lethe._calibrate): a byte budget below the model's
        # least may be planned at that least once, to be measured.
        self.allow_provisional = False
        self.provisional = False  # the newest plan is such a plan
        # Dynamo frames planned (a graph break makes a second one): a byte
        # budget applies to each graph, so several frames are said once.
        self._frames: List[str] = []
        # The calibration's revert (lethe._calibrate): (graph_digest, plan
        # document) whose decisions the graph of that digest evaluates
        # instead of being planned, priced by the partitioner's settings
        # of the moment; None: plan. Part of uuid().
        self.fixed_plan: Optional[Tuple[str, Dict[str, Any]]] = None
        # Called with each new PartitionRecord (the calibration follows the
        # plan the module runs).
        self.on_record: Optional[Any] = None

    def set_peak_correction(self, correction: int) -> None:
        """Calibration: Lethe's model of the compiled step's memory is off
        by what inductor's fusion and scheduling do; the correction measured
        on one step (predicted - measured peak) moves the budget the planner
        sees by that error. Part of uuid(): a new correction recompiles."""
        if not isinstance(correction, int) or isinstance(correction, bool):
            raise TypeError("peak_correction must be bytes (an int)")
        if correction and (self.budget is None or not self.budget.isdigit()):
            raise ValueError("peak_correction needs a budget in bytes")
        self.peak_correction = correction

    def set_time_scale(self, scale: float) -> None:
        """Calibration: the kernels Lethe prices by its cost model (not
        measured ones) take `scale` times the modelled time in the compiled
        step (lethe._calibrate). Part of uuid()."""
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
                or not 0 < scale < float("inf"):
            raise ValueError(f"time_scale must be a positive number, got "
                             f"{scale!r}")
        self.time_scale = float(scale)

    def set_host_launch(self, host_us: Optional[float]) -> None:
        """Calibration: the host issues the compiled step's ops at
        `host_us` each (None: the device profile's `host_launch_us`), so
        the simulator bounds the step by the host where it is slower than
        the device. Part of uuid()."""
        if host_us is not None and (
                isinstance(host_us, bool)
                or not isinstance(host_us, (int, float))
                or not 0 < host_us < float("inf")):
            raise ValueError(f"host_us must be a positive number or None, "
                             f"got {host_us!r}")
        self.host_launch_us = None if host_us is None else float(host_us)

    def inductor_options(self) -> Dict[str, Any]:
        """The inductor config patches this partitioner's plans assume:
        torch.compile's `options=` (lethe.torch.backend sets them). Where
        the plan may offload, no buffer reuse in inductor's generated code
        (a D2H copy may still read a dead buffer). Fusion and order under a
        plan are held by lethe._fusion's guards, which read this
        partitioner from the config (`plan_binds`)."""
        options: Dict[str, Any] = {"custom_partitioner_fn": self}
        if self.offload is not False:
            options["allow_buffer_reuse"] = False
        return options

    # --- CustomPartitionerFn ---------------------------------------------

    def uuid(self) -> str:
        """Keys inductor's FX-graph and AOT caches: a cached graph is
        replayed only for the same Lethe, budget, policy, profile,
        options and measured costs."""
        import lethe
        here = os.path.dirname(os.path.abspath(__file__))
        digest = hashlib.sha256()
        # Every module that shapes the partition (the offload insertion
        # was split out of this one; the schema writes the workspaces).
        for name in ("_inductor.py", "_fused_graph.py", "_fusion.py",
                     "_offload_ops.py", "_offload_insert.py", "_planclient.py",
                     "_measure.py", "_kernel_times.py", "schema.py"):
            with open(os.path.join(here, name), "rb") as f:
                digest.update(f.read())
        key = json.dumps(
            [getattr(lethe, "__version__", "?"), self.budget,
             self.peak_correction, self.time_scale, self.host_launch_us,
             self.policy,
             self.device, self.offload, self.replay_rng, self.fold,
             sorted(self.fusion_guards),
             sorted((k, repr(v)) for k, v in self.plan_options.items()),
             sorted(self.costs.items()), self.cost_source,
             self._measure_key(),
             hashlib.sha256(json.dumps(sorted(self.profiled.items()))
                            .encode()).hexdigest(),
             None if self.fixed_plan is None else hashlib.sha256(
                 json.dumps(self.fixed_plan, sort_keys=True, default=str)
                 .encode()).hexdigest(),
             None if self.planner is None else repr(self.planner)],
            sort_keys=True)
        digest.update(key.encode())
        return digest.hexdigest()

    def __call__(self, gm: fx.GraphModule, joint_inputs: Sequence[Any],
                 **kwargs: Any) -> Tuple[fx.GraphModule, fx.GraphModule]:
        from torch._functorch import config as functorch_config
        from torch._functorch import partitioners
        start = time.perf_counter()
        compiler = kwargs.pop("compiler", "inductor")
        num_fwd_outputs = kwargs.pop("num_fwd_outputs")
        static_indices = list(kwargs.pop("static_lifetime_input_indices",
                                         None) or [])
        notes: List[str] = []
        if kwargs:
            notes.append(f"ignored partition arguments: {sorted(kwargs)}")
        from torch._inductor import config as inductor_config
        # Until this graph's plan is known: inductor's own fusion and order.
        self.plan_binds = False
        if self.budget is not None and not install_fusion_guard():
            notes.append(
                "inductor's heuristics could not be wrapped: it may fuse "
                "kernels the plan puts far apart, and the measured peak "
                "exceed the predicted one")

        gm.graph.eliminate_dead_code()
        if functorch_config.cse:
            from torch._functorch.compile_utils import fx_graph_cse
            gm.graph = fx_graph_cse(gm.graph)
        gm.recompile()
        if partitioners.has_recomputable_ops(gm):
            message = ("the compiled region carries activation-checkpointing "
                       "tags (torch.utils.checkpoint or a SAC policy); "
                       "Lethe's plan replaces them")
            warnings.warn(message)
            notes.append(message)
            for n in gm.graph.nodes:
                n.meta.pop("recompute", None)
                n.meta.pop("ac_graph_id", None)

        info = partitioners.classify_nodes(gm, static_indices,
                                           num_fwd_outputs)
        device = _device_of(joint_inputs)
        fused = build_fused_graph(gm, set(info.required_fw_nodes),
                                  num_fwd_outputs,
                                  set(info.static_lifetime_input_nodes),
                                  device=str(device), fold=self.fold)
        self._apply_costs(fused)
        profile, measured = self._measure(fused, device)
        self._apply_profiled(fused, measured)
        measured["library_us"] = sum(
            e["time_us"] for e in fused.doc["nodes"]
            if e["kind"] == "op" and e.get("time_us") is not None)
        profile = scaled_profile(inductor_profile(profile), self.time_scale)
        if self.host_launch_us is not None:
            profile = host_launch_profile(profile, self.host_launch_us)
        offload_ok = self.offload is True or (
            self.offload == "auto" and device.type == "cuda")
        if self.offload == "auto" and _under_cuda_graphs():
            offload_ok = False
            notes.append(OFFLOAD_UNDER_CUDA_GRAPHS)
        compile_id = _compile_id()
        self._note_frame(compile_id)
        digest = graph_digest(fused.doc)
        plan = self._plan(fused.doc, offload_ok, profile, compile_id, digest)

        # A plan that keeps every value says the budget does not bind: then
        # min-cut partitions untagged, exactly as plain torch.compile does.
        # Its cut saves no more bytes than keeping everything, and it
        # re-runs fused pointwise chains where reading a saved value would
        # cost more (measured: tagging every kept value MUST_SAVE ran 1.7%
        # (Llama-8l) and 4.2% (GPT-2-medium) slower than plain compile on
        # an H200, bench/results/torch-inductor-h200.md).
        keeps_all = all(d.kind == RETAIN for d in plan.owners.values())
        offloaded = [] if keeps_all else self._tag(gm, fused, plan, info)
        # Read by lethe._fusion's guards while inductor compiles this
        # graph's forward and backward, right after this call.
        self.plan_binds = not keeps_all
        if keeps_all:
            notes.append("the plan keeps every value: min-cut's own "
                         "partition, untagged, and inductor's own fusion")
        fw, bw = partitioners.min_cut_rematerialization_partition(
            gm, joint_inputs, compiler=compiler,
            num_fwd_outputs=num_fwd_outputs,
            static_lifetime_input_indices=static_indices)
        saved = _saved_names(fw, num_fwd_outputs)
        mismatches = [] if keeps_all else _mismatches(gm, fused, plan, saved)
        moved: List[str] = []
        if offloaded:
            if inductor_config.allow_buffer_reuse:
                # Inductor's generated code hands a dead buffer's memory to
                # a later kernel itself ("buf9 = buf7  # reuse"), without
                # the caching allocator: a D2H copy still reading it on the
                # side stream would copy the later kernel's data (measured:
                # gradients off by 6-7% on an H100). Freed buffers go back
                # to the allocator, and lethe.offload holds x until its
                # release has waited for the copy.
                raise RuntimeError(
                    "Lethe's plan offloads activations: compile with "
                    "inductor's allow_buffer_reuse=False (lethe.torch.backend "
                    "sets it; with lethe.torch.partitioner pass options="
                    "partitioner.inductor_options()), or plan with "
                    "offload=False")
            moved = _offload_insert.insert(
                fw, bw, num_fwd_outputs, offloaded, plan, fused, device,
                token=_offload_ops.IN_GRAPHS and _under_cuda_graphs(),
                notes=notes)
        record = PartitionRecord(
            plan, fused.doc if self.dump_dir else None, saved, mismatches,
            moved, notes, time.perf_counter() - start, measured, compile_id,
            ops=sum(1 for e in fused.doc["nodes"] if e["kind"] == "op"))
        record.provisional = self.provisional
        record.graph_digest = digest
        record.compute_times = self.compute_times
        record.given = {e["name"] for e in fused.doc["nodes"]
                        if e["kind"] == "op" and e.get("time_us") is not None}
        record.time_scale = self.time_scale
        if self.provenance is not None:
            record.kernels = self.provenance.expect(fw, bw)
            record.roots = planned_roots(fused)
        self.records.append(record)
        self.compiles += 1
        del self.records[:-_MAX_RECORDS]
        if self.on_record is not None:
            self.on_record(record)
        if self.dump_dir:
            record.dump(self.dump_dir, fused.doc,
                        dict(record.summary(), mismatch_list=mismatches))
        return fw, bw

    # --- steps -------------------------------------------------------------

    def _apply_costs(self, fused: FusedGraph) -> None:
        """Measured times (µs) by node name override the cost model."""
        if not self.costs:
            return
        for e in fused.doc["nodes"]:
            t = self.costs.get(e["name"])
            if t is not None and e["kind"] == "op":
                e["time_us"] = float(t)

    def _apply_profiled(self, fused: FusedGraph,
                        measured: Dict[str, Any]) -> None:
        """Node times from a profiled step (lethe._kernel_times) replace the
        model's and the library kernels' times alone."""
        ops = [e for e in fused.doc["nodes"] if e["kind"] == "op"
               and e["name"] in self.profiled and e["name"] not in self.costs]
        for e in ops:
            e["time_us"] = self.profiled[e["name"]]
        measured["profiled_nodes"] = len(ops)

    def _measures(self, device: torch.device) -> bool:
        return self.cost_source == "measured" or (
            self.cost_source == "auto" and device.type == "cuda")

    def _measure_key(self) -> Optional[str]:
        """The device whose measurements plan (part of uuid(): a cached
        graph planned with another GPU's times is not replayed)."""
        if self.cost_source == "measured" or (
                self.cost_source == "auto" and torch.cuda.is_available()):
            return device_key(torch.device(
                "cuda" if torch.cuda.is_available() else "cpu"))
        return None

    def _measure(self, fused: FusedGraph,
                 device: torch.device) -> Tuple[str, Dict[str, Any]]:
        """Times the planned values inductor runs as library kernels
        (lethe._measure) and measures the device's rates. Returns
        the profile to plan with and what was measured."""
        if not self._measures(device):
            return self.device, {}
        start = time.perf_counter()
        table = self._cost_tables.get(str(device))
        if table is None:
            table = self._cost_tables[str(device)] = CostTable(device)
        before, failed = table.measured, table.failed
        timed = workspace = 0
        for e in fused.doc["nodes"]:
            n = fused.fx_of.get(e["id"])
            if e["kind"] != "op" or n is None \
                    or e.get("time_us") is not None \
                    or not runs_as_library_kernel(n):
                continue
            cost = table.op_cost(n)
            if cost is not None:
                e["time_us"] = cost[0]
                timed += 1
                if cost[1] and not any(is_workspace(o)
                                       for o in e["outputs"]):
                    # Live while the op runs, read by nothing: Lethe's
                    # memory model counts it at that op alone.
                    e["outputs"].append(workspace_output(cost[1]))
                    workspace += 1
        profile = measured_profile(self.device, table)
        table.save()
        return profile, {"timed_nodes": timed, "workspace_nodes": workspace,
                         "new_measurements": table.measured - before,
                         "failed": table.failed - failed,
                         "rates": dict(table.rates), "profile": profile,
                         "measure_s": time.perf_counter() - start}

    def _plan(self, doc: Dict[str, Any], offload_ok: bool,
              profile: Optional[str] = None,
              compile_id: Optional[str] = None,
              digest: Optional[str] = None) -> Plan:
        options = dict(self.plan_options)
        if not offload_ok:
            options["host_budget"] = 0
        if self.replay_rng:
            options["replay_rng"] = True
        fixed = self.fixed_plan
        if fixed is not None and self.planner is None and fixed[0] == digest:
            # The decisions of a plan made for this graph, evaluated (and
            # placed) with this compile's prices instead of planned.
            with tempfile.NamedTemporaryFile(
                    "w", suffix=".json", prefix="lethe-plan-",
                    delete=False) as f:
                json.dump(fixed[1], f)
            try:
                return self._plan_with(doc, profile, compile_id,
                                       dict(options, plan_file=f.name))
            finally:
                os.unlink(f.name)
        return self._plan_with(doc, profile, compile_id, options)

    def _plan_with(self, doc: Dict[str, Any], profile: Optional[str],
                   compile_id: Optional[str],
                   options: Dict[str, Any]) -> Plan:
        def plan_at(budget):
            self.compute_times = None
            if self.planner is not None:
                raw = self.planner(doc, budget=budget, policy=self.policy,
                                   device=profile or self.device, **options)
            elif self.provenance is None:
                raw = plan_json(doc, budget, self.policy,
                                profile or self.device, **options)
            else:
                # Calibrating: the step's time by node, for the share the
                # model prices (lethe._calibrate.remainder_scale).
                with tempfile.TemporaryDirectory() as d:
                    trace = os.path.join(d, "step.json")
                    raw = plan_json(doc, budget, self.policy,
                                    profile or self.device, trace=trace,
                                    **options)
                    if os.path.exists(trace):
                        self.compute_times = compute_times(trace)
            return parse_plan(raw, doc)
        plan = plan_at(self._planning_budget() if self.planner is None
                       else self.budget)
        self.provisional = False
        least = plan.least_feasible_budget_bytes
        if not plan.feasible and self.allow_provisional and least \
                and self.budget is not None and self.budget.isdigit():
            # The model's least is above the budget, but the model's peak
            # of a compiled step is an estimate (lethe._calibrate): run the
            # least plan once, measure, and re-plan at the budget with the
            # error corrected (Backend's calibration).
            planned = self._planning_budget()
            # With a correction, the budget planned is not the user's: say
            # which one is under the least (Llama-8l's warning read "budget
            # 1.83 GB is below the least 1.44 GB": it was planned at 1.83 GB
            # less its measured error, under 1.44 GB).
            at = "" if planned == self.budget else (
                f" (planned at {planned} B: corrected by "
                f"{self.peak_correction:+d} B for the error of the model's "
                "peak, measured)")
            warnings.warn(
                f"Lethe: budget {self.budget} B{at} is below the least "
                f"{least} B Lethe's model of {_graph_name(doc, compile_id)} "
                "can meet; running that plan for one step to measure its "
                "real peak, then re-planning at the budget")
            plan = plan_at(str(least))
            self.provisional = True
        least = plan.least_feasible_budget_bytes
        if nothing_to_lower(plan, self.budget):
            warn_nothing_to_lower(_graph_name(doc, compile_id), least,
                                  self.budget)
            plan = plan_at(str(least))
        if not plan.feasible:
            least = plan.least_feasible_budget_bytes
            graph = _graph_name(doc, compile_id)
            given = "" if str(plan.budget_bytes) == self.budget \
                else f" ({plan.budget_bytes} B)"
            if self.peak_correction and least:
                # The user's budget is what the measured peak must meet.
                least -= self.peak_correction
                given = (f" (planned at {self._planning_budget()} B: the "
                         f"measured peak correction is "
                         f"{self.peak_correction:+d} B)")
            raise infeasible_error(self.budget, given, self.policy, graph,
                                   least, plan.baseline_peak_bytes)
        return plan

    def _note_frame(self, compile_id: Optional[str]) -> None:
        """Warns once when graphs of a second dynamo frame are planned
        under a byte budget: each graph is planned to the whole budget
        while the earlier graph's saved activations are still live, so
        the step can peak above it."""
        frame = compile_id.lstrip("!").split("/")[0] if compile_id else None
        if frame is None or frame in self._frames:
            return
        self._frames.append(frame)
        if len(self._frames) == 2 and self.budget is not None \
                and not self.budget.endswith("%"):
            warnings.warn(
                f"Lethe: the byte budget {self.budget} applies to each "
                f"compiled graph, and this partitioner now plans graphs of "
                f"{len(self._frames)} dynamo frames (a graph break): the "
                "graphs' activations add up, so the step may peak above the "
                "budget. Remove the break (torch._dynamo.explain(model)(...) "
                "lists them) or give each graph a share of the budget")

    def _planning_budget(self) -> Optional[str]:
        if not self.peak_correction:
            return self.budget
        return str(max(1, int(self.budget) + self.peak_correction))

    def _tag(self, gm, fused, plan, info):
        """Writes the decisions as checkpoint tags. Returns the offloaded
        values (FX node, output index)."""
        from torch._functorch.partitioners import get_default_op_list
        from torch.utils.checkpoint import CheckpointPolicy
        op_types = get_default_op_list()
        kept: Dict[fx.Node, str] = {}
        offloaded: List[Tuple[fx.Node, int]] = []
        # Bytes of each node's outputs the plan keeps / recomputes.
        kept_bytes: Dict[fx.Node, int] = {}
        recomputed_bytes: Dict[fx.Node, int] = {}
        for (nid, index), d in plan.owners.items():
            n = fused.fx_of.get(nid)
            if n is None or n.op != "call_function":
                continue
            outputs = fused.doc["nodes"][nid]["outputs"]
            size = outputs[index]["bytes"] if index < len(outputs) else 0
            split = kept_bytes if d.kind in (RETAIN, OFFLOAD) \
                else recomputed_bytes
            split[n] = split.get(n, 0) + size
            if d.kind in (RETAIN, OFFLOAD):
                # One output kept keeps a tuple node (never tag a getitem:
                # min-cut would find an infinite cut).
                kept[n] = RETAIN if kept.get(n) == RETAIN else d.kind
                # A kept view keeps the buffer it views (min-cut recomputes
                # views freely): the first non-view node down its chain.
                base = _storage_root(n, op_types)
                if base is not n and base.op == "call_function" \
                        and base.target is not operator.getitem:
                    kept.setdefault(base, kept[n])
                if d.kind == OFFLOAD:
                    offloaded.append((n, index))
        # Min-cut saves or re-runs a tuple node whole. Where the plan
        # re-runs it for most of its bytes and keeps a small output (a
        # fused attention's log-sum-exp beside its output), it is re-run
        # whole: keeping it would save the large output the plan frees
        # (on an H200, DiT-B/2's twelve attention outputs, 300 MB over
        # the plan), and the re-run the plan already pays makes the small
        # one too.
        offloading = {n for n, _ in offloaded}
        for n, size in recomputed_bytes.items():
            if n in kept and n not in offloading \
                    and size > kept_bytes.get(n, 0):
                del kept[n]
        # Forward nodes and those min-cut may place on either side (they
        # need no tangent): Lethe's graph computes the latter in the
        # backward, from what the forward saves.
        backward = set(info.required_bw_nodes)
        for n in gm.graph.nodes:
            if n.op != "call_function" or n in backward \
                    or n.target is operator.getitem \
                    or not _is_tensor_node(n):
                continue
            if op_types.is_random(n) and not self.replay_rng:
                continue
            if "collective" in str(n.target) or \
                    str(n.target).startswith("_c10d_functional"):
                continue  # never recompute a collective
            # A seed drawn again in the backward would be another seed:
            # its dropout masks would differ from the forward's.
            n.meta["recompute"] = CheckpointPolicy.MUST_SAVE \
                if n in kept or draws_seeds(n) \
                else CheckpointPolicy.PREFER_RECOMPUTE
            # One region: min-cut's tag cleanup saves a region's output
            # only where a later region reads it.
            n.meta["ac_graph_id"] = 0
        return offloaded


def _compile_id() -> Optional[str]:
    """Dynamo's id of the frame being compiled ("0/0"), if known."""
    try:
        from torch._guards import CompileContext
        cid = CompileContext.current_compile_id()
    except (ImportError, AttributeError, RuntimeError):
        return None
    return None if cid is None else str(cid)


def _graph_name(doc: Dict[str, Any], compile_id: Optional[str]) -> str:
    """How an error names the compiled graph: dynamo's frame id, its size
    and the model it came from (the first module scope in it)."""
    ops = [e for e in doc["nodes"] if e["kind"] == "op"]
    scopes = [e["scope"].split(".")[0] for e in ops if e.get("scope")]
    where = "" if not scopes else f", modules {scopes[0]}" if \
        scopes[0] == scopes[-1] else f", modules {scopes[0]} .. {scopes[-1]}"
    frame = f" {compile_id}" if compile_id else ""
    return f"compiled graph{frame} ({len(ops)} ops{where})"


def _device_of(joint_inputs: Sequence[Any]) -> torch.device:
    """The device of the step: its first tensor input not on the CPU."""
    for group in joint_inputs:
        for t in group if isinstance(group, (list, tuple)) else [group]:
            if isinstance(t, torch.Tensor) and t.device.type != "cpu":
                return t.device
    return torch.device("cpu")


# Why offload="auto" plans recompute-only for a step run as CUDA graphs.
# The copies run inside the graphs (lethe._offload_ops.IN_GRAPHS; the GPU
# tests pass on an H200, 2026-11-28), but no measured step gained by them:
# at 80% of compile-0.1's peak on an H200 (bench/results/
# torch-inductor.md, t1/t2), Qwen2's least with offload is its least
# without (the LM head's working set), and its plan there offloading 54
# values ran 50.2 ms against 39.4 recompute-only; Llama-8l offloading 15
# values ran 51.5 ms (1.78 GB) against 49.0 (1.83 GB, t3) recompute-only, its
# offloading plans peaking about 300 MB over their prediction; ConvNeXt-T
# offloaded nothing. offload=True offloads there all the same.
OFFLOAD_UNDER_CUDA_GRAPHS = (
    "the step runs as CUDA graphs: offload='auto' plans recompute-only "
    "there (offload=True offloads, the copies captured in the graphs)")


def _under_cuda_graphs() -> bool:
    """Whether inductor compiles this graph for CUDA graphs (its config as
    patched for this compile: mode="reduce-overhead", triton.cudagraphs)."""
    from torch._inductor import config as inductor_config
    return bool(inductor_config.triton.cudagraphs)


def _saved_names(fw: fx.GraphModule, num_fwd_outputs: int) -> List[str]:
    out = next(n for n in fw.graph.nodes if n.op == "output")
    return [a.name for a in list(out.args[0])[num_fwd_outputs:]
            if isinstance(a, fx.Node)
            and isinstance(a.meta.get("val"), torch.Tensor)]


def _storage_root(n: fx.Node, op_types) -> fx.Node:
    """The node owning n's storage: through views, and through the getitems
    of view ops that return several views (split, chunk, unbind)."""
    while n.op == "call_function" and n.args \
            and isinstance(n.args[0], fx.Node):
        if op_types.is_view(n) or (n.target is operator.getitem
                                   and op_types.is_view(n.args[0])):
            n = n.args[0]
        else:
            break
    return n


def _mismatches(gm, fused, plan, saved):
    """Differences between the plan and what min-cut saved."""
    from torch._functorch.partitioners import get_default_op_list
    op_types = get_default_op_list()
    by_name = {n.name: n for n in gm.graph.nodes}
    planned: Dict[str, Tuple[str, int]] = {}
    for (nid, index), d in plan.owners.items():
        n = fused.fx_of.get(nid)
        if n is None:
            continue
        for name in value_names(n, index):
            planned[name] = (d.kind, _bytes(by_name.get(name)))
    # A value planned kept keeps its storage: saving any view of it (or its
    # base, as min-cut does for a split's halves) is the plan.
    planned_roots: Dict[str, str] = {}
    for name, (kind, _) in planned.items():
        node = by_name.get(name)
        if node is not None and kind in (RETAIN, OFFLOAD):
            planned_roots[_storage_root(node, op_types).name] = kind
    saved_roots = set()
    out = []
    for name in saved:
        node = by_name.get(name)
        if node is None:
            continue
        root = _storage_root(node, op_types)
        saved_roots.add(root.name)
        saved_roots.add(name)
        if node.op == "placeholder" or root.op == "placeholder":
            continue
        kind = planned.get(name, planned.get(root.name, (None, 0)))[0]
        if kind not in (RETAIN, OFFLOAD) and root.name in planned_roots:
            kind = planned_roots[root.name]
        if kind not in (RETAIN, OFFLOAD):
            out.append({"value": name, "planned": kind or "not planned",
                        "got": "saved", "bytes": _bytes(node)})
    for name, (kind, size) in sorted(planned.items()):
        node = by_name.get(name)
        root = _storage_root(node, op_types).name if node is not None \
            else name
        if kind in (RETAIN, OFFLOAD) and name not in saved_roots \
                and root not in saved_roots:
            out.append({"value": name, "planned": kind, "got": "not saved",
                        "bytes": size})
    return out


def _bytes(n: Optional[fx.Node]) -> int:
    v = n.meta.get("val") if n is not None else None
    return v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0

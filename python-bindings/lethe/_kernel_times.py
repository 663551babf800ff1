"""Per-node times from a profiled compiled step: the kernels inductor
generates, attributed to the values Lethe plans.

lethe._measure times the library kernels (matmuls, convolutions,
attention) alone; the kernels inductor generates (fused pointwise chains,
reductions, concatenations, scatters) cannot be timed alone, because their
shape is inductor's fusion, and the bandwidth model prices them. On a MoE
that model priced about 1,000 such nodes at 9.4 ms where the compiled step
spent about 3.6 ms in them (bench/results/torch-inductor.md), and every
recompute-versus-offload price followed the error. Here the compiled step
itself is the measurement:

- while the partitioned forward and backward compile, inductor's
  provenance tracking (`config.trace.provenance_tracking_level`) records,
  per kernel call site in program order, the FX nodes the kernel computes
  (`KernelProvenance`, which wraps inductor's `compile_fx_inner` to keep
  each graph's record apart);
- one step runs under torch.profiler (`StepProfile`); the generated
  kernels' launches, in order, are matched to the call sites of the
  forward and then the backward (the same names in the same order, or
  nothing is attributed);
- a kernel's time goes to the planned values its nodes fold into
  (`FusedGraph.root_of`), split by their output bytes (these kernels are
  bound by memory traffic). In the backward, the share of recomputed
  forward values is recomputation, already priced by their forward time,
  and is reported, not added.

The result is a table {FX node name: µs} that the partitioner adds to the
node's measured library time (or uses as its time) when it plans the next
compile: the nodes inductor generated kernels for are then priced by what
they cost in this step, and only the rest (views, nodes renamed by
inductor's post-grad passes) keeps the model and the calibration's scale.

Private inductor APIs, feature-detected: without them (`supported()`),
or when the compiled graph came from inductor's cache (no codegen, no
provenance), nothing is attributed and calibration scales the model as
before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

__all__ = ["KernelProvenance", "StepProfile", "Attribution", "attribute",
           "supported", "planned_roots", "COMPILE_PATCHES"]

# What inductor must do while compiling for the profile to be attributed:
# record kernel provenance; on the CPU stand-in, wrap each generated C++
# kernel in a profiler range (Triton kernels on CUDA are profiled as they
# are).
COMPILE_PATCHES = {"trace.provenance_tracking_level": 1,
                   "cpp.enable_kernel_profile": True}

# Library calls inductor records beside its own kernels; their time is
# lethe._measure's (timed alone), and their device kernels carry library
# names (cuBLAS, flash attention) that no call site names.
_EXTERN = ("extern_kernels.", "aten.", "torch.ops.")

# A backward graph compiled lazily (at the first backward) is a copy of
# the one the partitioner returned: matched by its node names.
_SAME_GRAPH = 0.9


def supported() -> bool:
    """Whether this torch records inductor's kernel provenance."""
    try:
        from torch._inductor import config
        from torch._inductor import debug
    except ImportError:
        return False
    return (hasattr(config.trace, "provenance_tracking_level")
            and hasattr(debug,
                        "_inductor_triton_kernel_to_post_grad_node_info")
            and hasattr(debug, "_inductor_kernel_provenance_debug_handle"))


@dataclass
class CallSite:
    """One kernel launch of a compiled graph: the kernel's name and the FX
    nodes it computes."""

    kernel: str
    nodes: List[str]


@dataclass
class GraphKernels:
    """The kernel call sites of one partitioned graph, once compiled."""

    forward: Optional[List[CallSite]] = None
    backward: Optional[List[CallSite]] = None


def _call_sites(mapping: Dict[str, List[str]]) -> List[CallSite]:
    """Inductor's provenance map ({"kernel:handle": [FX names]}, handles
    counting call sites in the order the wrapper runs them) as call sites,
    library calls left out."""
    sites = []
    for key, nodes in mapping.items():
        kernel, _, handle = key.rpartition(":")
        if not kernel or not handle.isdigit() or kernel.startswith(_EXTERN):
            continue
        sites.append((int(handle), CallSite(kernel, list(nodes))))
    return [s for _, s in sorted(sites, key=lambda p: p[0])]


class KernelProvenance:
    """Wraps inductor's inner compile so that each partitioned graph's
    kernel provenance is kept apart (inductor's own map is one global,
    reset per `compile_fx` but not around a lazily compiled backward)."""

    def __init__(self) -> None:
        # Graphs partitioned, waiting for their compile: (record, forward
        # GraphModule, backward node names).
        self._pending: List[Tuple[GraphKernels, Any, frozenset]] = []

    def expect(self, fw: Any, bw: Any) -> GraphKernels:
        """Registers a partition's forward and backward; the returned
        GraphKernels fills in as they compile."""
        kernels = GraphKernels()
        self._pending.append((kernels, fw, _names(bw)))
        del self._pending[:-16]  # graphs never compiled (an exception)
        return kernels

    def wrap(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        def inner_compile(gm: Any, example_inputs: Any, **kwargs: Any):
            slot = self._claim(gm, bool(kwargs.get("is_backward")))
            if slot is None:
                return inner(gm, example_inputs, **kwargs)
            from torch._inductor import debug
            saved = (debug._inductor_triton_kernel_to_post_grad_node_info,
                     debug._inductor_kernel_provenance_debug_handle)
            mapping: Dict[str, List[str]] = {}
            debug._inductor_triton_kernel_to_post_grad_node_info = mapping
            debug._inductor_kernel_provenance_debug_handle = 0
            try:
                compiled = inner(gm, example_inputs, **kwargs)
            finally:
                (debug._inductor_triton_kernel_to_post_grad_node_info,
                 debug._inductor_kernel_provenance_debug_handle) = saved
            kernels, phase = slot
            setattr(kernels, phase, _call_sites(mapping))
            return compiled
        return inner_compile

    def _claim(self, gm: Any,
               backward: bool) -> Optional[Tuple[GraphKernels, str]]:
        if not backward:
            for kernels, fw, _ in self._pending:
                if fw is gm and kernels.forward is None:
                    return kernels, "forward"
            return None
        names = _names(gm)
        best, score = None, _SAME_GRAPH
        for i, (kernels, _, bw_names) in enumerate(self._pending):
            if kernels.backward is not None or not bw_names:
                continue
            overlap = len(names & bw_names) / max(len(names | bw_names), 1)
            if overlap >= score:
                best, score = i, overlap
        if best is None:
            return None
        kernels = self._pending.pop(best)[0]
        return kernels, "backward"


def _names(gm: Any) -> frozenset:
    return frozenset(n.name for n in gm.graph.nodes
                     if n.op == "call_function")


def planned_roots(fused: Any) -> Tuple[Dict[str, str],
                                      Dict[str, List[str]], List[str],
                                      Dict[str, int]]:
    """What attributing a kernel to planned values needs of the graph
    (PartitionRecord.roots) from the FusedGraph it planned: `attribute`'s
    `root_of`, `feeds`, `forward` and `weight`."""
    names = {e["id"]: e["name"] for e in fused.doc["nodes"]
             if e["kind"] == "op"}
    root_of = {n.name: names[i] for n, i in fused.root_of.items()
               if i in names}
    # A folded node is computed where it is read: by the planned nodes its
    # chain of folded readers ends in.
    feeds: Dict[str, List[str]] = {}
    folded = list(fused.folded)
    order = {n: i for i, n in enumerate(folded[0].graph.nodes)} \
        if folded else {}
    for n in sorted(folded, key=order.__getitem__, reverse=True):
        out: List[str] = []
        for u in n.users:
            for r in ([root_of[u.name]] if u.name in root_of
                      else feeds.get(u.name, [])):
                if r not in out:
                    out.append(r)
        feeds[n.name] = out
    forward = sorted({names[i] for i, n in fused.fx_of.items()
                      if i in names and n in fused.forward})
    weight = {e["name"]: sum(o.get("bytes", 0) for o in e.get("outputs", []))
              for e in fused.doc["nodes"] if e["kind"] == "op"}
    return root_of, feeds, forward, weight


# --- the profiled step ------------------------------------------------------

# The CPU stand-in names a profiled C++ kernel "graph_<N>_<kernel>".
_CPU_KERNEL = re.compile(r"^graph_\d+_(cpp_\w+)$")


class StepProfile:
    """torch.profiler around one training step, started and stopped by the
    step meter's hooks (the step's backward ends in an autograd callback,
    where no `with` block can reach)."""

    def __init__(self, device: Optional[torch.device]) -> None:
        from torch.profiler import ProfilerActivity, profile
        self.cuda = device is not None and device.type == "cuda"
        activity = ProfilerActivity.CUDA if self.cuda else ProfilerActivity.CPU
        self._profile = profile(activities=[activity])
        self._profile.__enter__()
        self._running = True

    def stop(self) -> List[Tuple[str, float]]:
        """Ends the profile; returns the generated kernels that ran, in
        start order, as (kernel name, µs)."""
        if not self._running:
            return []
        self._running = False
        if self.cuda:
            torch.cuda.synchronize()
        self._profile.__exit__(None, None, None)
        out = []
        for e in self._profile.events():
            name = e.name
            if self.cuda:
                if getattr(e.device_type, "name", "") != "CUDA":
                    continue
            else:
                m = _CPU_KERNEL.match(name)
                if not m:
                    continue
                name = m.group(1)
            out.append((e.time_range.start, name,
                        float(e.time_range.elapsed_us())))
        out.sort(key=lambda t: t[0])
        return [(name, us) for _, name, us in out]


# --- attribution ------------------------------------------------------------

@dataclass
class Attribution:
    """What one profiled step says about one graph's planned values."""

    times_us: Dict[str, float] = field(default_factory=dict)
    kernels: int = 0            # generated kernel launches matched
    kernel_us: float = 0.0      # their time
    attributed_us: float = 0.0  # of it, given to planned values
    recompute_us: float = 0.0   # backward kernels' recomputed forward share
    unattributed_us: float = 0.0  # kernels none of whose nodes Lethe plans

    def summary(self) -> Dict[str, Any]:
        return {"profiled_nodes": len(self.times_us),
                "kernels": self.kernels,
                "kernel_ms": round(self.kernel_us / 1e3, 3),
                "attributed_ms": round(self.attributed_us / 1e3, 3),
                "recompute_ms": round(self.recompute_us / 1e3, 3),
                "unattributed_ms": round(self.unattributed_us / 1e3, 3)}


def attribute(kernels: GraphKernels, events: Sequence[Tuple[str, float]],
              root_of: Dict[str, str], feeds: Dict[str, Sequence[str]],
              forward: Sequence[str],
              weight: Dict[str, int]) -> Optional[Attribution]:
    """Attributes a profiled step's kernels to planned values.

    `kernels`: the graph's call sites; `events`: the profile's kernels in
    start order; `root_of`: FX node name -> the planned node (its name)
    it is; `feeds`: a folded FX node -> the planned nodes that read it (a
    kernel that computes only folded nodes, such as a pointwise chain
    before a matmul, is part of its readers' work); `forward`: the planned
    nodes of the forward; `weight`: a planned node's output bytes. None
    when the profile does not hold the graph's forward and backward call
    sites, in order."""
    if kernels.forward is None or kernels.backward is None:
        return None
    fw_at = _find(events, kernels.forward, 0)
    if fw_at is None:
        return None
    bw_at = _find(events, kernels.backward, fw_at[1])
    if bw_at is None:
        return None
    is_forward = set(forward)
    result = Attribution()
    for sites, (start, _), backward in ((kernels.forward, fw_at, False),
                                        (kernels.backward, bw_at, True)):
        spans = [us for name, us in events[start:] if name in
                 {s.kernel for s in sites}][:len(sites)]
        for site, us in zip(sites, spans):
            result.kernels += 1
            result.kernel_us += us
            roots = sorted({root_of[n] for n in site.nodes if n in root_of})
            if not roots:
                roots = sorted({r for n in site.nodes
                                for r in feeds.get(n, ())})
            if not roots:
                result.unattributed_us += us
                continue
            total = sum(max(weight.get(r, 0), 1) for r in roots)
            for r in roots:
                share = us * max(weight.get(r, 0), 1) / total
                if backward and r in is_forward:
                    result.recompute_us += share
                    continue
                result.times_us[r] = result.times_us.get(r, 0.0) + share
                result.attributed_us += share
    return result


def _find(events: Sequence[Tuple[str, float]], sites: List[CallSite],
          start: int) -> Optional[Tuple[int, int]]:
    """The first run of `events` from `start` whose kernels of the sites'
    names are the sites' kernels in order (other kernels, such as library
    ones, may lie between). Returns (index of its first, index past its
    last)."""
    if not sites:
        return start, start
    names = {s.kernel for s in sites}
    want = [s.kernel for s in sites]
    mine = [i for i in range(start, len(events)) if events[i][0] in names]
    for k in range(len(mine) - len(want) + 1):
        if all(events[mine[k + j]][0] == want[j] for j in range(len(want))):
            return mine[k], mine[k + len(want) - 1] + 1
    return None

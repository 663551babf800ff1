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
- one step is timed (`StepProfile`): on CUDA by a pair of CUDA events
  around every Triton kernel inductor launches, with the device held back
  at the step's start so that its kernels then run back to back
  (`LaunchTimes`; torch.profiler's CUPTI, once attached, stays attached
  and slowed every later launch of the process, see below); on the CPU
  stand-in by torch.profiler's ranges around the generated C++ kernels.
  The generated kernels, in order, are matched to the call sites of the
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
import time
import warnings
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, List, Optional, Sequence, Set,
                    Tuple)

import torch

from lethe._measure import runs_as_library_kernel
from lethe.schema import tensor_outputs

__all__ = ["KernelProvenance", "StepProfile", "LaunchTimes", "Attribution",
           "PlannedRoots", "attribute", "priced", "supported",
           "planned_roots", "timeline", "COMPILE_PATCHES"]

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
    extern: bool = False  # a library call: its device kernels are unnamed


@dataclass
class GraphKernels:
    """The kernel call sites of one partitioned graph, once compiled."""

    forward: Optional[List[CallSite]] = None
    backward: Optional[List[CallSite]] = None


def _call_sites(mapping: Dict[str, List[str]]) -> List[CallSite]:
    """Inductor's provenance map ({"kernel:handle": [FX names]}, handles
    counting call sites in the order the wrapper runs them) as call
    sites."""
    sites = []
    for key, nodes in mapping.items():
        kernel, _, handle = key.rpartition(":")
        if not kernel or not handle.isdigit():
            continue
        sites.append((int(handle), CallSite(kernel, list(nodes),
                                            kernel.startswith(_EXTERN))))
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


@dataclass
class PlannedRoots:
    """What attributing a kernel to planned values needs of a graph."""

    # FX node name -> the planned node (its name) it is.
    root_of: Dict[str, str]
    # A folded FX node -> the planned nodes that read it: a kernel that
    # computes only folded nodes (a pointwise chain before a matmul) is
    # part of its readers' work.
    feeds: Dict[str, List[str]]
    forward: Set[str]           # the forward's planned nodes
    weight: Dict[str, int]      # planned node -> output bytes
    library_us: Dict[str, float]  # library nodes -> their time alone


def planned_roots(fused: Any) -> PlannedRoots:
    """PlannedRoots of the FusedGraph the partitioner planned (its node
    times as planned: library kernels timed alone, lethe._measure)."""
    ops = [e for e in fused.doc["nodes"] if e["kind"] == "op"]
    names = {e["id"]: e["name"] for e in ops}
    root_of = {n.name: names[i] for n, i in fused.root_of.items()
               if i in names}
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
    forward = {names[i] for i, n in fused.fx_of.items()
               if i in names and n in fused.forward}
    weight = {e["name"]: sum(o.get("bytes", 0) for o in tensor_outputs(e))
              for e in ops}
    library_us = {e["name"]: float(e["time_us"]) for e in ops
                  if e.get("time_us") is not None
                  and fused.fx_of.get(e["id"]) is not None
                  and runs_as_library_kernel(fused.fx_of[e["id"]])}
    return PlannedRoots(root_of, feeds, forward, weight, library_us)


# --- the profiled step ------------------------------------------------------

# The CPU stand-in names a profiled C++ kernel "graph_<N>_<kernel>".
_CPU_KERNEL = re.compile(r"^graph_\d+_(cpp_\w+)$")


class StepProfile:
    """One training step's kernels, timed; started and stopped by the
    step meter's hooks (a step spans the module's call and the backward
    after it, which no `with` block in the module can reach). On CUDA the
    launches are timed by CUDA events (`LaunchTimes`) where this torch's
    inductor launches its kernels through the autotuner that LaunchTimes
    wraps, else by torch.profiler; on the CPU by torch.profiler."""

    def __init__(self, device: Optional[torch.device],
                 hold_ms: float = 0.0) -> None:
        self.cuda = device is not None and device.type == "cuda"
        self._timer: Optional[LaunchTimes] = None
        self._running = True
        if self.cuda and LaunchTimes.supported():
            self._timer = LaunchTimes(device, hold_ms)
            return
        from torch.profiler import ProfilerActivity, profile
        activity = ProfilerActivity.CUDA if self.cuda else ProfilerActivity.CPU
        try:
            # One cycle is all there is: keeping its events says so (torch
            # warns otherwise that a cycle's end clears them).
            self._profile = profile(activities=[activity], acc_events=True)
        except TypeError:  # a torch without acc_events
            self._profile = profile(activities=[activity])
        self._profile.__enter__()

    @property
    def attaches_cupti(self) -> bool:
        """Whether this profile runs torch.profiler on CUDA (CUPTI stays
        attached to the process after it, see lethe._calibrate)."""
        return self.cuda and self._timer is None

    def stop(self) -> List[Tuple[str, float]]:
        """Ends the profile; returns the device kernels that ran (on the
        CPU: the generated kernels' ranges), in start order, as (name,
        µs)."""
        if not self._running:
            return []
        self._running = False
        if self._timer is not None:
            return self._timer.stop()
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


# The name LaunchTimes gives the device's time between two timed launches:
# the library kernels the wrapper called between them (no call site has
# it, so attribute() gives it to those calls, _library_gap).
BETWEEN = "(between launches)"
# A mark LaunchTimes leaves where it held the device again: the span
# across it is the hold's, no library call's.
_REHOLD = "(device held again)"
# Most holds one step is given after its first (each costs the device the
# hold's time, once): a step that syncs with the host (MoE routing,
# a mask checked on the host) drains the device at each sync; held again
# there, the launches after it are timed back to back too. Without it,
# GPT-2-medium's profiled steps on an H200 had 200 and 293 of 504 launches
# issued after the hold had ended and no kernel was timed
# (bench/results/torch-inductor.md, 2026-11-27 h3).
_REHOLDS_MAX = 32
# Longest hold of the device at a timed step's start (ms): a host slower
# than this to issue the step leaves the device idle where it falls
# behind, and those launches are timed with the idle time in them.
_HOLD_MAX_MS = 2000.0
# Event pairs recorded back to back, behind a hold of this many ms, to
# measure what one timing event costs the device (LaunchTimes._event_cost):
# 3.0 us on an H200; behind a hold that ended early (priced at an idle
# clock) the host's pace was measured instead, 11.6 us (2026-11-27, e3/e4).
_EVENT_SAMPLES, _EVENT_HOLD_MS = 65, 10.0


class LaunchTimes:
    """CUDA events around every Triton kernel inductor launches in one
    step, instead of torch.profiler: on an H200 one step profiled by
    torch.profiler left CUPTI attached and every later step of the process
    3.5-3.8 ms slower to issue (T5 and U-Net under plain torch.compile,
    bench/results/torch-inductor.md, 2026-11-27), a cost the training run
    would pay for good; events leave nothing behind.

    An event pair times a kernel only while the device works through a
    queue: on an idle device the start event fires when the host gets to
    the launch. So the step starts behind a device-side sleep of `hold_ms`
    (the host's time to issue a step, measured before), during which the
    host queues the step; the device then runs it back to back. The time
    between one timed launch's end and the next one's start is the
    library kernels the wrapper called between them (`BETWEEN`)."""

    _cycles_per_ms: Dict[int, float] = {}
    _event_us: Dict[int, float] = {}

    @staticmethod
    def supported() -> bool:
        """Whether inductor launches its Triton kernels through the
        autotuner's `run`, the call this wraps."""
        try:
            from torch._inductor.runtime.triton_heuristics import \
                CachingAutotuner
        except ImportError:
            return False
        return callable(getattr(CachingAutotuner, "run", None)) \
            and hasattr(torch.cuda, "_sleep")

    def __init__(self, device: torch.device, hold_ms: float = 0.0) -> None:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
        self._cls = CachingAutotuner
        self._run = CachingAutotuner.__dict__.get("run")
        marks: List[Tuple[str, Any, Any]] = []
        self._marks = marks
        # Launches the host issued after the hold's time had passed on the
        # host's clock, or with the device done with every launch before,
        # and no hold left to give: they may have found the device idle.
        self.late = 0
        self.reholds = 0  # holds given after the first
        # Launches into a CUDA graph being captured (mode="reduce-overhead"):
        # no timing event may be recorded there, and what a capture
        # launches does not run.
        self.captured = 0
        until: List[float] = [float("inf")]
        inner = CachingAutotuner.run
        event = torch.cuda.Event
        clock = time.perf_counter
        capturing = torch.cuda.is_current_stream_capturing

        def caught_up() -> bool:
            """Whether the device may have run out of queued work: the
            hold's time has passed on the host's clock, or the last timed
            launch has already run (a sync with the host drained it)."""
            if clock() > until[0]:
                return True
            last = marks[-1] if marks else None
            return last is not None and last[2] is not None \
                and last[2].query()

        def run(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            if capturing():
                self.captured += 1
                return inner(tuner, *args, **kwargs)
            if cycles and caught_up():
                if self.reholds < _REHOLDS_MAX:
                    self.reholds += 1
                    with torch.cuda.device(device):
                        torch.cuda._sleep(cycles)
                    until[0] = clock() + hold_ms / 1e3
                    marks.append((_REHOLD, None, None))
                else:
                    self.late += 1
            start = event(enable_timing=True)
            start.record()
            out = inner(tuner, *args, **kwargs)
            end = event(enable_timing=True)
            end.record()
            marks.append((tuner.fn.__name__, start, end))
            return out

        # Measured before the launcher is wrapped (a failure here leaves
        # nothing wrapped).
        self._event = self._event_cost(device)
        hold_ms = min(hold_ms, _HOLD_MAX_MS)
        cycles = int(hold_ms * self._cycles(device)) if hold_ms > 0 else 0
        CachingAutotuner.run = run
        if cycles:
            with torch.cuda.device(device):
                torch.cuda._sleep(cycles)
            until[0] = clock() + hold_ms / 1e3

    @staticmethod
    def _index(device: torch.device) -> int:
        return device.index if device.index is not None \
            else torch.cuda.current_device()

    @classmethod
    def _cycles(cls, device: torch.device) -> float:
        """The device's sleep cycles per ms, measured once."""
        index = cls._index(device)
        if index not in cls._cycles_per_ms:
            with torch.cuda.device(index):
                # ~5-10 ms: long enough that the clock has left its idle
                # speed for most of it (a hold priced at an idle clock
                # ends early at the boosted one).
                cycles = 10_000_000
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                torch.cuda._sleep(cycles)
                end.record()
                end.synchronize()
                cls._cycles_per_ms[index] = cycles / max(
                    start.elapsed_time(end), 1e-3)
        return cls._cycles_per_ms[index]

    @classmethod
    def _event_cost(cls, device: torch.device) -> float:
        """The device's time (µs) from one timing event to the next with
        nothing between them, measured once behind a hold: each timed
        kernel and each span between two has one such event in it more
        than the untimed step (on an H200 event-timed kernels summed
        10-16% above torch.profiler's durations of the same kernels)."""
        index = cls._index(device)
        if index not in cls._event_us:
            with torch.cuda.device(index):
                events = [torch.cuda.Event(enable_timing=True)
                          for _ in range(_EVENT_SAMPLES)]
                torch.cuda._sleep(int(_EVENT_HOLD_MS * cls._cycles(device)))
                for e in events:
                    e.record()
                events[-1].synchronize()
                gaps = sorted(a.elapsed_time(b) * 1e3
                              for a, b in zip(events, events[1:]))
                cls._event_us[index] = gaps[len(gaps) // 2]
        return cls._event_us[index]

    def stop(self) -> List[Tuple[str, float]]:
        """Unwraps the launches; returns the timed kernels and the time
        between them, in launch order, as (name, µs); nothing where the
        host issued launches after the hold had ended (their times may
        hold the device's idle time: a warning says so)."""
        if self._run is not None:
            self._cls.run = self._run
        else:  # inherited: the class had none of its own
            del self._cls.run
        torch.cuda.synchronize()
        if self.captured:
            warnings.warn(
                f"Lethe: {self.captured} of the profiled step's kernel "
                "launches were captured into a CUDA graph, not run; the "
                "step's times are not used (the calibration scales the "
                "model)")
            return []
        if self.late:
            warnings.warn(
                f"Lethe: the host issued {self.late} of the profiled step's "
                f"{sum(m[0] != _REHOLD for m in self._marks)} kernel "
                f"launches after the device's hold had ended (held again "
                f"{self.reholds} times, the most a step is given); their "
                "times may include the device's idle time and are not used "
                "(the calibration scales the model)")
            return []
        return timeline(self._marks, self._event)


def timeline(marks: Sequence[Tuple[str, Any, Any]],
             event_us: float = 0.0) -> List[Tuple[str, float]]:
    """(name, µs) of timed launches (name, start event, end event; events
    have CUDA events' `elapsed_time`, in ms), in launch order, with a
    `BETWEEN` entry for the device's time from one launch's end to the
    next one's start; each less `event_us`, the device's time for the
    event that timing added to it."""
    out: List[Tuple[str, float]] = []
    prev = None
    for name, start, end in marks:
        if name == _REHOLD:  # the span across a hold is the hold's
            prev = None
            continue
        if prev is not None:
            gap = prev.elapsed_time(start) * 1e3 - event_us
            if gap > 0:
                out.append((BETWEEN, gap))
        out.append((name, max(start.elapsed_time(end) * 1e3 - event_us,
                              0.0)))
        prev = end
    return out


# --- attribution ------------------------------------------------------------

@dataclass
class Attribution:
    """What one profiled step says about one graph's planned values."""

    # Planned node -> its kernels' time in the step (µs).
    times_us: Dict[str, float] = field(default_factory=dict)
    library_nodes: Set[str] = field(default_factory=set)  # timed in-step
    kernels: int = 0            # generated kernel launches matched
    launches: int = 0           # the graph's call sites: kernels and
    #                             library calls, each a launch or more
    kernel_us: float = 0.0      # their time
    attributed_us: float = 0.0  # of it, given to planned values
    recompute_us: float = 0.0   # backward kernels' recomputed forward share
    unattributed_us: float = 0.0  # kernels none of whose nodes Lethe plans
    library_us: float = 0.0     # library kernels given to library calls
    other_us: float = 0.0       # kernels between ours that no call made
    _forward: Set[str] = field(default_factory=set, repr=False)

    def summary(self) -> Dict[str, Any]:
        return {"profiled_nodes": len(self.times_us),
                "kernels": self.kernels,
                "launches": self.launches,
                "kernel_ms": round(self.kernel_us / 1e3, 3),
                "attributed_ms": round(self.attributed_us / 1e3, 3),
                "recompute_ms": round(self.recompute_us / 1e3, 3),
                "unattributed_ms": round(self.unattributed_us / 1e3, 3),
                "library_nodes": len(self.library_nodes),
                "library_ms": round(self.library_us / 1e3, 3),
                "other_ms": round(self.other_us / 1e3, 3)}

    @property
    def device_us(self) -> float:
        """The device's time in the graph's kernels and library calls."""
        return self.kernel_us + self.library_us + self.other_us

    def give(self, roots: Sequence[str], us: float, backward: bool,
             weight: Callable[[str], float]) -> float:
        """Splits `us` over `roots` by weight; a backward kernel's share of
        a forward node is its recomputation. Returns the share given."""
        total = sum(weight(r) for r in roots)
        given = 0.0
        for r in roots:
            share = us * weight(r) / total
            if backward and r in self._forward:
                self.recompute_us += share
                continue
            self.times_us[r] = self.times_us.get(r, 0.0) + share
            given += share
        return given



# A gap between two generated kernels whose device kernels take more than
# this many times what its library calls took alone ran something else
# too (another stream's work, the caller's kernels): left unattributed.
_GAP_SLACK, _GAP_SLACK_US = 3.0, 20.0


def attribute(kernels: GraphKernels, events: Sequence[Tuple[str, float]],
              roots: PlannedRoots) -> Optional[Attribution]:
    """Attributes a profiled step's kernels (`events`: name, µs, in start
    order) to the planned values of the graph whose call sites are
    `kernels`. The generated kernels are found by name, in the order
    compiled; the unnamed device kernels between two of them (cuBLAS,
    attention) belong to the library calls the wrapper makes between
    them, split by their times alone. None when the profile does not hold
    the graph's generated kernels in order."""
    if kernels.forward is None or kernels.backward is None:
        return None
    sites = [(s, False) for s in kernels.forward] + \
        [(s, True) for s in kernels.backward]
    generated = [(s, b) for s, b in sites if not s.extern]
    fw_gen = [s for s, b in generated if not b]
    fw_at = _find(events, fw_gen, 0)
    if fw_at is None:
        return None
    bw_at = _find(events, [s for s, b in generated if b], fw_at[1])
    if bw_at is None:
        return None
    names = {s.kernel for s, _ in generated}
    at = _indices(events, fw_gen, fw_at[0]) + _indices(
        events, [s for s, b in generated if b], bw_at[0])
    result = Attribution(_forward=set(roots.forward), launches=len(sites))
    weight = lambda r: float(max(roots.weight.get(r, 0), 1))  # noqa: E731
    lib_weight = lambda r: max(roots.library_us.get(r, 0.0), 1e-3)  # noqa

    def planned(site: CallSite) -> List[str]:
        out = sorted({roots.root_of[n] for n in site.nodes
                      if n in roots.root_of})
        return out or sorted({r for n in site.nodes
                              for r in roots.feeds.get(n, ())})

    anchor = 0  # generated kernels matched so far
    last_event: Optional[int] = None
    pending: List[Tuple[CallSite, bool]] = []  # library calls since it
    for site, backward in sites:
        if site.extern:
            pending.append((site, backward))
            continue
        i = at[anchor]
        anchor += 1
        if last_event is not None:
            _library_gap(result, pending, [
                e for e in events[last_event + 1:i] if e[0] not in names
                and not e[0].startswith(_COPIES)], planned, lib_weight)
        pending, last_event = [], i
        us = events[i][1]
        result.kernels += 1
        result.kernel_us += us
        targets = planned(site)
        if not targets:
            result.unattributed_us += us
            continue
        result.attributed_us += result.give(targets, us, backward, weight)
    return result


# Device activity of the profile that is no kernel of a library call.
_COPIES = ("Memcpy", "Memset")


def _library_gap(result: Attribution, calls: List[Tuple[CallSite, bool]],
                 gap: List[Tuple[str, float]],
                 planned: Callable[[CallSite], List[str]],
                 weight: Callable[[str], float]) -> None:
    total = sum(us for _, us in gap)
    if not gap:
        return
    roots = [(planned(s), b) for s, b in calls]
    roots = [(r, b) for r, b in roots if r]
    alone = sum(weight(x) for r, _ in roots for x in r)
    if not roots or total > _GAP_SLACK * alone + _GAP_SLACK_US:
        result.other_us += total
        return
    for r, backward in roots:
        us = total * sum(weight(x) for x in r) / alone
        result.library_us += result.give(r, us, backward, weight)
        result.library_nodes.update(r)


def priced(att: Attribution, roots: PlannedRoots) -> Dict[str, float]:
    """The time (µs) each planned node takes in the profiled step, for the
    partitioner to plan with: its kernels' times; a library node whose
    kernels the profile could not place keeps its time alone (plus any
    generated kernel that prepares its operands). A node no kernel names
    keeps the model's price: it may be a view, or work that inductor's
    post-grad passes renamed, and pricing it at nothing made a re-plan
    recompute such work for free (measured on an H100: a MoE plan 41 ms
    against 27 ms, predicted 22 ms)."""
    times = dict(att.times_us)
    for name, us in roots.library_us.items():
        if name not in att.library_nodes:
            times[name] = times.get(name, 0.0) + us
    return times


def _indices(events: Sequence[Tuple[str, float]], sites: List[CallSite],
             start: int) -> List[int]:
    """The events of `sites`' kernels from `start` (a run _find found)."""
    names = {s.kernel for s in sites}
    return [i for i in range(start, len(events))
            if events[i][0] in names][:len(sites)]


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

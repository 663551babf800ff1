"""Measures training steps of a compiled module as they run
(lethe._calibrate's measurements; `StepMeter`)."""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import torch

from lethe import _kernel_times

__all__ = ["Measurement", "StepMeter"]

# Seconds of steps a plan runs after its compile before it is measured (on
# CUDA). A GPU that was idle through the compile runs its first steps
# faster than training does: measured on an H100, Llama-8l's re-plan ran
# 42.62 ms in the 3 steps after one warm step and 44.15 ms in the bench's
# 10 steps after 3 (3.5% apart; bench/results/torch-inductor.md, run40),
# and the calibration predicted from the faster steps.
_WARM_S = 1.0


@dataclass
class Measurement:
    """One measured step: `peak_bytes` beyond what was allocated when the
    module was called (None off CUDA), `step_ms` forward + backward;
    `host_ms` the host's time to issue it (from the call to the end of the
    backward on the host; close to `step_ms` when the host, not the
    device, bounds the step)."""

    peak_bytes: Optional[int]
    step_ms: float
    steps_ms: List[float] = field(default_factory=list)
    host_ms: Optional[float] = None


class StepMeter:
    """Measures calls of a module as training steps (see the module
    docstring). After a compile, `warm` calls run unmeasured (on CUDA, as
    many more as fill `warm_s`, default _WARM_S seconds), then `steps`
    calls are measured and `on_step(measurement)` gets their median time and
    highest peak, at the start of the call after the last (reading the CUDA
    events waits for that step only). It returns False to stop measuring, or
    True when it changed the plan: that call recompiles and is not
    measured, nor are the `warm` after it.

    Why warm and several: the step right after a compile follows seconds of
    an idle GPU and ran up to 10% faster than the same plan's steady steps
    on an H200 (GEMM-heavy models, bench/results/torch-inductor-h200.md:
    38.96 ms measured, 41.58 ms median in the bench), so a calibration on
    it predicted steps that training never saw."""

    def __init__(self, module: torch.nn.Module,
                 on_step: Callable[[Measurement], bool],
                 warm: int = 1, steps: int = 3,
                 warm_s: Optional[float] = None,
                 profile: Optional[Callable[[], bool]] = None,
                 on_profile: Optional[Callable[[List[Any]], None]] = None
                 ) -> None:
        self._on_step = on_step
        # The last warm step is profiled when `profile()` says so
        # (lethe._kernel_times.StepProfile); `on_profile` gets its kernels.
        self._profile = profile
        self._on_profile = on_profile
        # The profiled step's state while its StepProfile runs. It is
        # stopped at the next call, not where the backward ends: autograd
        # restores its thread-local state (profiler included) after its
        # callbacks, which re-enabled a profiler stopped in one.
        self._profiling: Optional[Dict[str, Any]] = None
        self._warm = warm
        # Warm calls go on until `warm_s` seconds have passed since the
        # first of them started (None: _WARM_S on CUDA, none elsewhere).
        self._warm_s = warm_s
        self._warm_t0 = 0.0
        self._steps = max(1, steps)
        # Calls not measured: the first compiles, then `warm` (or more),
        # from call `_warm_first` on.
        self._skip = 1 + warm
        self._warm_first = 2
        self._calls = 0
        self._window: List[Measurement] = []
        # The last measurement given to `on_step`: its host time is how
        # long a profiled step holds the device back (StepProfile).
        self._last: Optional[Measurement] = None
        self._pending: Optional[Dict[str, Any]] = None
        self._done: Optional[Dict[str, Any]] = None
        self._first_next = False  # see measure_next_first
        self._handles = [
            module.register_forward_pre_hook(self._before),
            module.register_forward_hook(self._after)]

    def measure_next_first(self) -> None:
        """After the next recompile, measure from the first call after the
        compiling one, with no warm calls."""
        self._first_next = True

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._profiling is not None:  # never left running
            self._profiling["profile"].stop()
            self._profiling = None

    def _before(self, module: torch.nn.Module, args: Any) -> None:
        if self._profiling is not None:
            state, self._profiling = self._profiling, None
            events = state["profile"].stop()
            # Without a backward (the call did not train) it is no step's.
            if state.get("ended") and self._on_profile is not None:
                self._on_profile(events)
        if self._done is not None:
            done, self._done = self._done, None
            self._window.append(_finish(done))
        if len(self._window) >= self._steps:
            window, self._window = self._window, []
            self._last = _median(window)
            if not self._on_step(self._last):
                self.remove()
                return
            # Going on means the plan changed. nn.Module looked up this
            # call's forward before its hooks ran: this call runs the old
            # plan, the next one compiles the new; measure after `warm`
            # (none where asked: CUDA graph trees record in the call after
            # the compiling one, and only a recording allocates).
            warm = 0 if self._first_next else self._warm
            self._first_next = False
            self._skip = self._calls + 2 + warm
            self._warm_first = self._calls + 3
        self._calls += 1
        self._pending = None
        self._extend_warm(module, args)
        if self._calls == self._skip and self._warm >= 1 \
                and torch.is_grad_enabled() and self._profile is not None \
                and self._profile():
            self._start_profile(_device(module, args))
        if self._calls <= self._skip or not torch.is_grad_enabled():
            return
        device = _device(module, args)
        state: Dict[str, Any] = {"device": device}
        if device is not None:
            # Measured from an idle GPU, as a step timed alone is: without
            # this the start event waits behind the previous step's kernels
            # and the host's time to launch the first ones is not counted.
            torch.cuda.synchronize(device)
            state["base"] = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            state["start"] = torch.cuda.Event(enable_timing=True)
            state["start"].record()
            state["t0"] = time.perf_counter()
        else:
            state["t0"] = time.perf_counter()
        self._pending = state

    def _extend_warm(self, module: torch.nn.Module, args: Any) -> None:
        """Makes this call a warm one, not the last, while the warm calls
        have run for less than the warm time."""
        if self._warm < 1 or not self._warm_first <= self._calls <= self._skip:
            return
        now = time.perf_counter()
        if self._calls == self._warm_first:
            self._warm_t0 = now
        warm_s = self._warm_s
        if warm_s is None:
            warm_s = _WARM_S if _device(module, args) is not None else 0.0
        if self._calls == self._skip and now - self._warm_t0 < warm_s:
            self._skip += 1

    def _start_profile(self, device: Optional[torch.device]) -> None:
        try:
            profile = _kernel_times.StepProfile(device, _hold_ms(self._last))
        except RuntimeError as e:  # e.g. the user's profiler is running
            warnings.warn(f"Lethe: the step could not be profiled ({e}); "
                          "the calibration scales the model instead")
            return
        self._pending = self._profiling = {"device": device,
                                           "profile": profile}

    def _after(self, module: torch.nn.Module, args: Any, out: Any) -> None:
        state, self._pending = self._pending, None
        if state is None:
            return
        root = next((t for t in _tensors(out) if t.requires_grad), None)
        if root is None:
            return  # no backward follows: nothing to measure

        def started(grad: torch.Tensor) -> torch.Tensor:
            # Runs when the backward reaches the module's output; the
            # callback when the whole backward has run.
            torch.autograd.Variable._execution_engine.queue_callback(
                lambda: self._end(state))
            return grad
        root.register_hook(started)

    def _end(self, state: Dict[str, Any]) -> None:
        if "profile" in state:  # a warm step: profiled, not measured
            state["ended"] = True
            return
        device = state["device"]
        if device is not None:
            state["end"] = torch.cuda.Event(enable_timing=True)
            state["end"].record()
            state["t1"] = time.perf_counter()
            state["peak"] = torch.cuda.max_memory_allocated(device)
        else:
            state["t1"] = time.perf_counter()
        self._done = state


# A profiled step holds the device back this much longer than the host
# took to issue the last measured step (a share, and ms): every launch the
# host issues after the hold has ended is timed with the device's idle
# time in it, and the host's time wanders between steps by up to 30% on
# the lent H200 hosts (T5: 16.8-29.5 ms in one process,
# bench/results/torch-inductor.md, 2026-11-27 e1/e3), and the timing
# events add to it. A hold of 1.5x (priced at an idle clock) left T5's
# kernels and the spans between them 18% and 111% above torch.profiler's
# (e3); this one, within 1-2% in sum (e4). A longer hold costs one step
# that much, once.
_HOLD_SLACK, _HOLD_SLACK_MS = 3.0, 20.0
# Without a measured step (the host's time unknown).
_HOLD_DEFAULT_MS = 100.0


def _hold_ms(last: Optional[Measurement]) -> float:
    if last is None or last.host_ms is None:
        return _HOLD_DEFAULT_MS
    return _HOLD_SLACK * last.host_ms + _HOLD_SLACK_MS


def _finish(state: Dict[str, Any]) -> Measurement:
    if state["device"] is None:
        return Measurement(None, (state["t1"] - state["t0"]) * 1e3)
    state["end"].synchronize()
    return Measurement(state["peak"] - state["base"],
                       state["start"].elapsed_time(state["end"]),
                       host_ms=(state["t1"] - state["t0"]) * 1e3)


def _median(window: List[Measurement]) -> Measurement:
    """Several steps of one plan as one: the median time (a host stall in
    one step is not the plan's) and the highest peak (the budget holds for
    every step). `steps_ms` keeps each step's time for the report."""
    peaks = [m.peak_bytes for m in window if m.peak_bytes is not None]
    hosts = [m.host_ms for m in window if m.host_ms is not None]
    return Measurement(max(peaks) if peaks else None,
                       statistics.median(m.step_ms for m in window),
                       [m.step_ms for m in window],
                       statistics.median(hosts) if hosts else None)


def _tensors(x: Any):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(y)


def _device(module: torch.nn.Module, args: Any) -> Optional[torch.device]:
    """The CUDA device of the step: of its first CUDA input or parameter
    (None: the step runs on the CPU)."""
    for t in _tensors(args):
        if t.device.type == "cuda":
            return t.device
    for t in module.parameters():
        if t.device.type == "cuda":
            return t.device
    return None

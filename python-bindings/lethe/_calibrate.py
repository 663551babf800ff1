"""Calibration of Lethe's plan against the compiled step it produced.

Under inductor, two things in Lethe's model of the step are only known once
the compiled step runs: its peak (inductor reuses buffers and keeps fused
intermediates in registers; Lethe's fused graph is a model of that, measured
0.2-1.6 GB high on an H200, bench/results/torch-inductor-h200.md) and the
time of the kernels inductor generates (priced by the bandwidth model, which
over-states fused chains; the library kernels are measured, lethe._measure).

`StepMeter` measures one training step of a compiled module without
changing it: from the module's call to the end of the backward its outputs
start (a gradient hook queues a callback that autograd runs when the
backward ends) it reads the peak bytes allocated beyond what was allocated at
the call, as `torch.cuda.max_memory_allocated` counts them, and the time
between two CUDA events (wall time on the CPU). `correction` turns a
measurement into the two numbers the partitioner plans with:

- the peak correction: predicted - measured peak, added to a byte budget
  (a measured peak over the budget is a negative correction);
- the time scale of the kernels Lethe prices by its model: the measured
  step minus the measured library kernels over the predicted step minus
  them (lethe._measure.scaled_profile applies it to the device profile).

`lethe.torch.backend` measures the second step (the first compiles) and, if
the peak is over the budget, the budget is under-used by a plan the budget
constrained, or the step is more than 5% off its prediction, re-plans once
and recompiles (`Backend.calibration` says what it measured and did).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import torch

__all__ = ["StepMeter", "Measurement", "correction", "TOLERANCE"]

# A plan is re-planned when its prediction is off by more than this share:
# the spread of one step's time between calls on the same card is 1-3%
# (bench/results/torch-inductor-h200.md), so a smaller trigger would chase
# noise; 5% is the target for prediction.
TOLERANCE = 0.05
# Time scales are kept within these bounds: a measurement outside them is
# a broken step (a recompile, a host stall), not a model error.
_SCALE_MIN, _SCALE_MAX = 0.2, 5.0


@dataclass
class Measurement:
    """One measured step: `peak_bytes` beyond what was allocated when the
    module was called (None off CUDA), `step_ms` forward + backward."""

    peak_bytes: Optional[int]
    step_ms: float


@dataclass
class Correction:
    """What one measurement says about the plan that ran."""

    peak_correction: int
    time_scale: float
    replan: bool
    reasons: List[str] = field(default_factory=list)


def correction(measured: Measurement, *, predicted_peak: int,
               predicted_step_us: float, library_us: float,
               budget_bytes: Optional[int], byte_budget: bool,
               peak_correction: int, time_scale: float,
               provisional: bool = False) -> Correction:
    """The partitioner's next peak correction and time scale after
    `measured`, and whether they call for a re-plan. `library_us`: the
    part of the prediction measured on the GPU (not scaled);
    `peak_correction`/`time_scale`: those the measured plan was made with;
    `provisional`: the plan was made at the model's least, above the
    budget, to be measured (always corrected).
    """
    reasons = []
    correction = peak_correction
    if measured.peak_bytes is not None and budget_bytes:
        error = predicted_peak - measured.peak_bytes
        over = measured.peak_bytes > budget_bytes
        # A plan whose predicted peak is near its planning budget was
        # constrained by it: a lower measured peak is room it left unused.
        planning_budget = budget_bytes + peak_correction
        constrained = predicted_peak >= (1 - TOLERANCE) * planning_budget
        unused = measured.peak_bytes < (1 - TOLERANCE) * budget_bytes
        if byte_budget and provisional:
            correction = peak_correction + error
            reasons.append(
                f"the model's least {predicted_peak} B measured "
                f"{measured.peak_bytes} B against the budget {budget_bytes} B")
        elif byte_budget and (over or (constrained and unused)):
            correction = peak_correction + error
            reasons.append(
                f"measured peak {measured.peak_bytes} B "
                + ("over" if over else "well under")
                + f" the budget {budget_bytes} B (predicted {predicted_peak}"
                " B)")
        elif over:
            reasons.append(
                f"measured peak {measured.peak_bytes} B over the budget "
                f"{budget_bytes} B; a share budget is not corrected (give "
                "the budget in bytes)")
    scale = time_scale
    predicted_ms = predicted_step_us / 1e3
    modelled_pred = predicted_step_us - library_us
    modelled_meas = measured.step_ms * 1e3 - library_us
    if predicted_ms > 0 and abs(measured.step_ms / predicted_ms - 1) \
            > TOLERANCE and modelled_pred > 0 and modelled_meas > 0:
        scale = min(_SCALE_MAX, max(
            _SCALE_MIN, time_scale * modelled_meas / modelled_pred))
        reasons.append(f"measured step {measured.step_ms:.2f} ms vs "
                       f"predicted {predicted_ms:.2f} ms")
    replan = correction != peak_correction or scale != time_scale
    return Correction(correction, scale, replan, reasons)


class StepMeter:
    """Measures calls of a module as training steps (see the module
    docstring). `on_step(measurement)` runs at the start of the call after
    a measured one (reading the CUDA events waits for that step only) and
    returns False to stop measuring, or True when it changed the plan: that
    call recompiles and is not measured; the one after it is."""

    def __init__(self, module: torch.nn.Module,
                 on_step: Callable[[Measurement], bool],
                 skip: int = 1) -> None:
        self._on_step = on_step
        self._skip = skip  # calls not measured (the first one compiles)
        self._calls = 0
        self._pending: Optional[Dict[str, Any]] = None
        self._done: Optional[Dict[str, Any]] = None
        self._handles = [
            module.register_forward_pre_hook(self._before),
            module.register_forward_hook(self._after)]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _before(self, module: torch.nn.Module, args: Any) -> None:
        if self._done is not None:
            done, self._done = self._done, None
            if not self._on_step(_finish(done)):
                self.remove()
                return
            # Going on means the plan changed: this call recompiles.
            self._skip = self._calls + 1
        self._calls += 1
        self._pending = None
        if self._calls <= self._skip or not torch.is_grad_enabled():
            return
        device = _device(module, args)
        state: Dict[str, Any] = {"device": device}
        if device is not None:
            state["base"] = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            state["start"] = torch.cuda.Event(enable_timing=True)
            state["start"].record()
        else:
            state["t0"] = time.perf_counter()
        self._pending = state

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
        device = state["device"]
        if device is not None:
            state["end"] = torch.cuda.Event(enable_timing=True)
            state["end"].record()
            state["peak"] = torch.cuda.max_memory_allocated(device)
        else:
            state["t1"] = time.perf_counter()
        self._done = state


def _finish(state: Dict[str, Any]) -> Measurement:
    if state["device"] is None:
        return Measurement(None, (state["t1"] - state["t0"]) * 1e3)
    state["end"].synchronize()
    return Measurement(state["peak"] - state["base"],
                       state["start"].elapsed_time(state["end"]))


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

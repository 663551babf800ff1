"""What one measurement of a compiled step says about the plan that ran
(lethe._calibrate's arithmetic, apart from its state machine): the peak
correction and time scale the partitioner re-plans with
(`correction`), the time scale of what a profiled step leaves to the model
(`remainder_scale`), a step measured without CUDA graphs as their replay
runs it (`replayed`), and whether a step may be profiled
(`profile_leaves_room`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional

from lethe import _kernel_times
from lethe._step_meter import Measurement

__all__ = ["Correction", "correction", "remainder_scale", "replayed",
           "profile_leaves_room", "TOLERANCE"]

# An offloading plan's copies are hidden where its simulated compute stream
# is busy for all but this share of its step (one kernel's launch gap in a
# thousand-op step is 0.1-0.5%).
_HIDDEN = 0.01
# A plan is re-planned when its prediction is off by more than this share:
# the spread of one step's time between calls on the same card is 1-3%
# (bench/results/torch-inductor-h200.md), so a smaller trigger would chase
# noise; 5% is the target for prediction.
TOLERANCE = 0.05
# Time scales are kept within these bounds: a measurement outside them is
# a broken step (a recompile, a host stall), not a model error.
_SCALE_MIN, _SCALE_MAX = 0.2, 5.0


# On CUDA, where the kernels are profiled by torch.profiler (a torch whose
# inductor LaunchTimes cannot wrap), a step is profiled only where the host
# took less than this share of it to issue it. torch.profiler leaves CUPTI
# attached to the process (Kineto tears it down only with
# TEARDOWN_CUPTI=1, with which the calibrating bench hung), and every
# later launch pays for it: one
# profiled step left the host 3.5-3.8 ms slower to issue each later step of
# T5 and U-Net (14-15% of a 25 ms step) under plain torch.compile on an
# H200 (bench/results/torch-inductor.md, 2026-11-27). A step whose host
# had more than this share could turn host-bound and train that much
# slower; there the re-plan scales the model instead.
_PROFILE_HOST_SHARE = 0.75


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
               provisional: bool = False,
               cudagraphs: bool = False) -> Correction:
    """The partitioner's next peak correction and time scale after
    `measured`, and whether they call for a re-plan. `library_us`: the
    part of the prediction measured on the GPU (not scaled);
    `peak_correction`/`time_scale`: those the measured plan was made with;
    `provisional`: the plan was made at the model's least, above the
    budget, to be measured (always corrected); `cudagraphs`: the step was
    measured without the CUDA graphs it will run as.
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
    host_bound = _host_bound(measured)
    if cudagraphs and host_bound:
        # The step's time is the host's, which a replay does not spend
        # (measured on an H200: MobileNet-V3's 25.2 ms step without CUDA
        # graphs, host-bound, scaled the model by 0.68; it replayed in
        # 12.4 ms; a host stall of 71 ms scaled BERT's by 1.54).
        reasons.append(
            f"the host bounds the step ({measured.host_ms:.2f} ms to issue "
            f"a {measured.step_ms:.2f} ms step) as it will not under CUDA "
            "graphs: its time does not scale the model")
    elif predicted_ms > 0 and abs(measured.step_ms / predicted_ms - 1) \
            > TOLERANCE and modelled_pred > 0 and modelled_meas > 0:
        scale = min(_SCALE_MAX, max(
            _SCALE_MIN, time_scale * modelled_meas / modelled_pred))
        reasons.append(f"measured step {measured.step_ms:.2f} ms vs "
                       f"predicted {predicted_ms:.2f} ms")
    if host_bound and not cudagraphs:
        # The device waited for the host: a plan's kernel time saved (or
        # spent) shows only where the host is faster (measured on an H100:
        # MoE-8l steps of 24.9 ms that took the host 17-28 ms to issue).
        reasons.append(
            f"the host bounds the step: {measured.host_ms:.2f} ms to issue "
            f"a {measured.step_ms:.2f} ms step (the model prices the "
            "device's time)")
    replan = correction != peak_correction or scale != time_scale
    return Correction(correction, scale, replan, reasons)


def profile_leaves_room(measured: Measurement) -> bool:
    """Whether a step measured so may be profiled: off CUDA (no host
    time measured apart, no CUPTI), where the profile times launches by
    CUDA events (lethe._kernel_times.LaunchTimes: no CUPTI), or where the
    host took under _PROFILE_HOST_SHARE of the step to issue it."""
    return measured.host_ms is None or not measured.step_ms \
        or _kernel_times.LaunchTimes.supported() \
        or measured.host_ms < _PROFILE_HOST_SHARE * measured.step_ms


def _host_bound(measured: Measurement) -> bool:
    """Whether the host took (nearly) the whole step to issue it: the
    device waited for the host."""
    return measured.host_ms is not None \
        and measured.host_ms >= (1 - TOLERANCE) * measured.step_ms


def remainder_scale(measured: Measurement, r: Any,
                    profiled: Dict[str, float]) -> Optional[float]:
    """The time scale of what a profiled step leaves to the model: the
    measured plan `r`'s step, re-priced with the `profiled` node times,
    meets its measured time when the nodes no kernel named (views a chain
    folds into, scatters, sums inductor fused into another node's kernel)
    take this share of their modelled time. Every kernel of the step is
    already in the profiled times, so what is left of the measured step is
    the gaps between kernels; priced at the model's full time those nodes
    put MoE-8l's prediction 4.7 ms (19%) over its step on an H200, and a
    re-plan still pays their scaled time to recompute them. None where the
    plan's time by node is unknown or the step is not one stream's: an
    offloading plan whose simulated compute stream waits on its copies
    (the rest of its measured step cannot be split between the waits and
    the nodes). One that hides them all is one stream's: Llama-8l's,
    offloading at compile-0.5's peak on an H100, was predicted 8.9% over
    its step with the nodes no kernel named at their full modelled time
    (bench/results/torch-inductor.md, 2026-11-28 n1)."""
    times = getattr(r, "compute_times", None)
    if not times or measured.step_ms <= 0:
        return None
    if getattr(r, "offloaded", None):
        busy_ms = sum(us for us, _ in times.values()) / 1e3
        if busy_ms < (1 - _HIDDEN) * r.plan.step_us / 1e3:
            return None
    given = getattr(r, "given", set())
    was = getattr(r, "time_scale", 1.0)
    fixed = modelled = 0.0
    for name, (us, runs) in times.items():
        if name in profiled:
            fixed += profiled[name] * runs
        elif name in given:
            fixed += us
        else:
            modelled += us / was
    if modelled <= 0:
        return None
    rest = measured.step_ms * 1e3 - fixed
    return min(_SCALE_MAX, max(_SCALE_MIN, rest / modelled))


def replayed(measured: Measurement, att: Any,
             floor_us: float) -> Measurement:
    """`measured` (a step run without CUDA graphs) as a CUDA-graph replay
    of it runs: its profiled kernels back to back (`att`, the step's
    attribution), each after the replay's floor (`floor_us`, the profile's
    `graph_kernel_us`), no longer than it was measured. Without graphs the
    gaps between kernels are the host's pace: on an H200 MoE-8l's step
    measured 24.71 ms with 22.51 ms of kernels (host 20.0 ms); its re-plan,
    priced from the eager step, was predicted 25.97 ms and replayed in
    24.30-24.65 (bench/results/torch-inductor.md, 2026-11-27 h2)."""
    device_us = getattr(att, "device_us", 0.0)
    if device_us <= 0:
        return measured
    replay_ms = (device_us + att.launches * floor_us) / 1e3
    return replace(measured, step_ms=min(measured.step_ms, replay_ms))


def _compute_ms(r: Any) -> Optional[float]:
    """The compute stream's busy time in plan `r`'s simulated step (ms;
    None where its trace was not kept): what the step predicts beyond it
    is the stream's idle time (host issue, waits), which the report shows
    beside each measured step."""
    times = getattr(r, "compute_times", None)
    return sum(us for us, _ in times.values()) / 1e3 if times else None


def _host_launch_us(measured: Measurement, r: Any) -> Optional[float]:
    """Where the host bounds the measured step: the host's time to issue
    it over the step's ops (the graph's ops and the ops its recomputations
    re-run), the time the simulator gives each op's launch. None where the
    device bounds it (the profile's launch time stands)."""
    ops = getattr(r, "ops", 0)
    if not ops or not _host_bound(measured):
        return None
    rerun = {o.get("node_id") for d in r.plan.decisions
             if d.get("decision") == "recompute"
             for o in d.get("recomputed_ops", [])}
    ops += len(rerun)
    return measured.host_ms * 1e3 / ops if ops else None

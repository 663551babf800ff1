"""Inductor's kernels attributed to the values Lethe plans
(lethe._kernel_times) and the step meter's profile of the warm step, on
CPU (torch >= 2.9; CI runs this file with torch 2.11 from PyPI,
scripts/test.sh). The calibration that uses them end to end is in
test_torch_inductor.py (test_calibration_prices_generated_kernels_...).
"""

import time

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch.compile is missing (torch < 2)", allow_module_level=True)
import torch.nn as nn  # noqa: E402


def test_kernels_are_attributed_only_in_the_order_compiled():
    from lethe._kernel_times import (CallSite, GraphKernels, PlannedRoots,
                                     attribute, priced)
    k = GraphKernels(
        forward=[CallSite("k_fused_0", ["gelu", "add"]),
                 CallSite("extern_kernels.mm:2", ["mm"], extern=True),
                 CallSite("k_red_1", ["var_mean"])],
        backward=[CallSite("k_fused_0", ["mul_5", "add"]),
                  CallSite("k_fused_2", ["renamed_by_inductor"]),
                  CallSite("extern_kernels.mm:5", ["mm_1"], extern=True),
                  CallSite("extern_kernels.mm:6", ["mm_2"], extern=True),
                  CallSite("k_pre_3", ["gelu_1", "view_1"])])
    # gelu is folded into add; gelu_1 is a chain before the matmul mm_2.
    roots = PlannedRoots(
        root_of={n: n for n in ("add", "var_mean", "mul_5", "mm", "mm_1",
                                "mm_2", "view_9")},
        feeds={"gelu": ["add"], "gelu_1": ["mm_2"], "view_1": ["mm_2"]},
        forward={"add", "var_mean", "mm", "view_9"},
        weight={"add": 300, "var_mean": 100, "mul_5": 100, "mm": 64,
                "mm_1": 64, "mm_2": 64, "view_9": 64},
        library_us={"mm": 40.0, "mm_1": 30.0, "mm_2": 10.0})
    # Another graph's kernel before ours; cuBLAS kernels (unnamed by any
    # call site) and a copy between ours.
    events = [("other_0", 5.0), ("k_fused_0", 10.0), ("gemm_a", 45.0),
              ("k_red_1", 4.0), ("Memcpy DtoH", 99.0), ("k_fused_0", 8.0),
              ("k_fused_2", 1.0), ("gemm_b", 24.0), ("gemm_c", 8.0),
              ("k_pre_3", 3.0)]
    a = attribute(k, events, roots)
    assert a is not None and a.kernels == 5 and a.kernel_us == 26.0
    # Forward: each kernel's time to its planned value. Backward: the
    # kernel re-running the forward's 'add' shares by bytes (300:100), the
    # recomputed share reported apart; a kernel of folded nodes only goes
    # to their reader (k_pre_3 to mm_2); a kernel of unknown nodes is
    # unattributed. The library kernels between two generated ones go to
    # the library calls made between them, by their times alone (3:1).
    assert a.times_us == pytest.approx(
        {"add": 10.0, "var_mean": 4.0, "mul_5": 2.0, "mm": 45.0,
         "mm_1": 24.0, "mm_2": 8.0 + 3.0})
    assert a.recompute_us == pytest.approx(6.0)
    assert a.unattributed_us == 1.0 and a.library_us == 77.0
    assert a.library_nodes == {"mm", "mm_1", "mm_2"}
    # What the partitioner plans with: in-step times; view_9, which no
    # kernel names, keeps the model's price.
    assert priced(a, roots) == pytest.approx(a.times_us)
    # A library call whose kernels were not placed keeps its time alone,
    # plus the generated kernel that prepares its operand.
    b = priced(attribute(k, [e for e in events if e[0] not in (
        "gemm_b", "gemm_c")], roots), roots)
    assert b["mm_1"] == 30.0 and b["mm_2"] == pytest.approx(3.0 + 10.0)
    # Timed by CUDA events (LaunchTimes), the library kernels between two
    # launches are one span: the same times.
    from lethe._kernel_times import BETWEEN
    timed = [e for e in events if not e[0].startswith(("gemm", "Memcpy"))]
    timed.insert(2, (BETWEEN, 45.0))
    timed.insert(timed.index(("k_pre_3", 3.0)), (BETWEEN, 32.0))
    c = attribute(k, timed, roots)
    assert c.times_us == pytest.approx(a.times_us)
    assert c.library_us == 77.0
    # The kernels out of order, or the backward missing: nothing.
    assert attribute(k, events[::-1], roots) is None
    assert attribute(k, events[:5], roots) is None
    assert attribute(GraphKernels(forward=k.forward), events, roots) is None


def test_step_meter_profiles_the_warm_step_and_stops_the_profiler():
    # The warm step runs under torch.profiler, stopped at the next call (not
    # in autograd's end-of-backward callback, whose thread-local state
    # autograd restores after it); a warm call without a backward gives no
    # profile, and the profiler is never left running.
    from lethe import _step_meter
    enabled = torch.autograd._profiler_enabled
    profiles = []
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    meter = _step_meter.StepMeter(lin, lambda m: False,
                                  profile=lambda: True,
                                  on_profile=profiles.append)
    lin(x).sum().backward()  # "compile"
    lin(x).sum().backward()  # warm: profiled
    assert enabled() and profiles == []
    lin(x).sum().backward()  # stops the profile, hands it over
    assert not enabled() and len(profiles) == 1
    meter.remove()
    meter = _step_meter.StepMeter(lin, lambda m: False,
                                  profile=lambda: True,
                                  on_profile=profiles.append)
    lin(x)  # "compile"
    lin(x)  # warm, profiled, but no backward follows
    assert enabled()
    lin(x)  # stops it: no step's profile
    assert not enabled() and len(profiles) == 1
    meter.remove()
    assert not enabled()


def test_a_profiled_step_holds_the_device_longer_than_the_host_took(
        monkeypatch):
    # On CUDA the profiled step starts behind a device-side hold, so that
    # its kernels run back to back: 3x the host's time to issue the last
    # measured step + 20 ms (the host's time wanders by up to 30%); 100 ms
    # before any step was measured.
    from lethe import _kernel_times, _step_meter
    from lethe._step_meter import Measurement, _hold_ms
    assert _hold_ms(None) == 100.0
    assert _hold_ms(Measurement(None, 25.0)) == 100.0
    assert _hold_ms(Measurement(None, 25.0, host_ms=22.0)) == 86.0
    holds = []

    class Profile:
        def __init__(self, device, hold_ms=0.0):
            holds.append(hold_ms)

        def stop(self):
            return []

    monkeypatch.setattr(_kernel_times, "StepProfile", Profile)
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    meter = _step_meter.StepMeter(lin, lambda m: False,
                                  profile=lambda: True)
    lin(x).sum().backward()  # "compile"
    lin(x).sum().backward()  # warm: profiled
    meter.remove()
    assert holds == [100.0]


def test_step_meter_warms_for_its_warm_time_before_measuring():
    # After the compile (the first call) the plan runs warm calls until the
    # warm time has passed since the first of them started, then measures:
    # a GPU idle through the compile runs its first steps faster than
    # training does (lethe._step_meter._WARM_S).
    from lethe import _step_meter
    measured = []

    def run(warm_s):
        lin = nn.Linear(4, 4)
        x = torch.randn(2, 4)
        calls = [0]

        def on_step(m):
            measured.append((warm_s, calls[0]))
            return False
        meter = _step_meter.StepMeter(lin, on_step, warm=1, steps=1,
                                      warm_s=warm_s)
        while not any(w == warm_s for w, _ in measured) and calls[0] < 50:
            calls[0] += 1
            lin(x).sum().backward()
            time.sleep(0.02)
        meter.remove()
    run(0.0)
    run(0.1)
    # No warm time: call 1 compiles, 2 warms, 3 is measured, and on_step
    # runs at the start of call 4.
    assert measured[0] == (0.0, 4)
    # 0.1 s of warm calls 20 ms apart: at least 5 of them before the one
    # measured.
    assert measured[1][1] >= 1 + 5 + 1 + 1

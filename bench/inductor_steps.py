"""What bench/torch_inductor_bench.py measures of one method's step
besides its time: the peak of a step CUDA graphs record (their replays
allocate nothing), the host's time to issue a step, and one step's kernels
under torch.profiler."""

import time

import torch


def recorded_peak(step, extra, steps=(1, 2)):
    """`step` that measures the peak of the calls numbered in `steps`
    (from 0) into extra["recorded_peak_bytes"]: under CUDA graph trees the
    call after the compiling one warms the graphs up and the next records
    them, in the allocator's view; replays allocate nothing."""
    calls = [0]

    def measured():
        i = calls[0]
        calls[0] += 1
        if i not in steps:
            return step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        loss = step()
        torch.cuda.synchronize()
        extra["recorded_peak_bytes"] = max(
            extra.get("recorded_peak_bytes", 0),
            torch.cuda.max_memory_allocated() - before)
        return loss
    return measured


def host_times(step, params, steps=10):
    """Per step: the host's time to issue it (the call returns before the
    device is done), the device's time to finish it, and the time Python's
    garbage collector ran during it, to tell a host-bound step from a
    device-bound one."""
    import gc
    spent = []

    def on_gc(phase, info):
        if phase == "start":
            spent.append(-time.perf_counter())
        else:
            spent[-1] += time.perf_counter()
    gc.callbacks.append(on_gc)
    out = []
    try:
        for _ in range(steps):
            for p in params:
                p.grad = None
            torch.cuda.synchronize()
            spent.clear()
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            out.append([round((t1 - t0) * 1e3, 3), round((t2 - t0) * 1e3, 3),
                        round(sum(spent) * 1e3, 3), len(spent)])
    finally:
        gc.callbacks.remove(on_gc)
    return out


def profile_kernels(step, params, top=60):
    """One more step under torch.profiler: where its device time goes.
    `busy_ms` is the union of the kernels' intervals, `gaps_ms` the rest of
    the step's span on the device (host launches, syncs); `generated_ms` is
    inductor's Triton kernels, `library_ms` the others (cuBLAS, cuDNN,
    flash attention, copies). `top`: the kernels of most total time by
    name, to compare two methods' steps kernel by kernel."""
    from torch.profiler import ProfilerActivity, profile
    for p in params:
        p.grad = None
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) \
            as prof:
        step()
        torch.cuda.synchronize()
    spans, by_name, host = [], {}, {}
    for e in prof.events():
        if str(getattr(e, "device_type", "")).split(".")[-1] != "CUDA":
            # Host ops: which ones fill the gaps (dynamo's cache lookup,
            # guard checks, the compiled regions' wrappers).
            h = host.setdefault(e.name, [0.0, 0])
            h[0] += getattr(e, "self_cpu_time_total", 0) / 1e3
            h[1] += 1
            continue
        r = e.time_range
        spans.append((r.start, r.end))
        n = by_name.setdefault(e.name, [0.0, 0])
        n[0] += (r.end - r.start) / 1e3
        n[1] += 1
    spans.sort()
    busy, end = 0.0, None
    for a, b in spans:
        if end is None or a >= end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    span = (spans[-1][1] - spans[0][0]) / 1e3 if spans else 0.0

    def generated(name):
        return name.startswith(("triton_", "triton"))
    gen = sum(t for n, (t, _) in by_name.items() if generated(n))
    total = sum(t for t, _ in by_name.values())
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    return dict(kernels=len(spans), span_ms=round(span, 3),
                busy_ms=round(busy / 1e3, 3),
                gaps_ms=round(span - busy / 1e3, 3),
                kernel_ms=round(total, 3), generated_ms=round(gen, 3),
                library_ms=round(total - gen, 3),
                top=[[n, round(t, 4), c] for n, (t, c) in ranked],
                host_top=[[n, round(t, 4), c] for n, (t, c) in sorted(
                    host.items(), key=lambda kv: -kv[1][0])[:25]])

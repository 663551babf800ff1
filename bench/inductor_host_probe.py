#!/usr/bin/env python3
"""Where a compiled step's host time goes (issue 15): one method of one
corpus model in a fresh process, on a GPU.

  python3 bench/inductor_host_probe.py MODEL METHOD [BUDGET]
      MODEL   a model of bench/export_corpus.py (t5_base, swin_t, ...)
      METHOD  compile | compile-F (activation_memory_budget F) | lethe
              (lethe.torch.backend at BUDGET bytes, no calibration, no
              offload) | lethe-dump (the same, graphs dumped under $OUT)
              | lethe-phases / compile-F-phases: the host's time a step
              before and after what Lethe's calibration does to a
              process (one profiled step, then two recompiles of the
              same plan), nothing else; then the profiled step's
              kernel times (CUDA events) against torch.profiler's

Writes to $OUT: MODEL-METHOD.json (per step the host's time to issue it and
to finish it, 10 steps unsynchronized, synchronizing calls in one step
(torch.cuda.set_sync_debug_mode), CUDA runtime calls of one profiled step,
min-cut's partitions: backward inputs, nodes), MODEL-METHOD-cprofile.txt
(Python's profile of 3 steps) and MODEL-METHOD.trace.json.gz (a Chrome
trace of one step). Results: bench/results/torch-inductor.md.
"""
import cProfile, gzip, io, json, os, pstats, sys, time, warnings
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch_inductor_bench as ib
import torch._functorch.config as fconfig
from torch.profiler import profile, ProfilerActivity

if len(sys.argv) < 3 or "OUT" not in os.environ:
    sys.exit(__doc__)
model_name, method = sys.argv[1], sys.argv[2]
phases = method.endswith("-phases")
method = method[:-len("-phases")] if phases else method
budget = sys.argv[3] if len(sys.argv) > 3 else None
out = os.environ["OUT"]
tag = f"{model_name}-{method}"
dev = torch.device("cuda")
model, a, b = ib.make_model("corpus:" + model_name, False, dev, torch.bfloat16)
params = list(model.parameters())
backend = None
import torch._functorch.partitioners as _parts
import torch._inductor.compile_fx as _cfx
_orig = _parts.min_cut_rematerialization_partition
PARTS = []


def _counting(*args, **kw):
    fw, bw = _orig(*args, **kw)
    ph = [n for n in bw.graph.nodes if n.op == "placeholder"]
    PARTS.append({"bw_inputs": len(ph),
                  "tangents": sum("tangent" in n.name for n in ph),
                  "fw_nodes": len(fw.graph.nodes),
                  "bw_nodes": len(bw.graph.nodes)})
    return fw, bw


_parts.min_cut_rematerialization_partition = _counting
if hasattr(_cfx, "min_cut_rematerialization_partition"):
    _cfx.min_cut_rematerialization_partition = _counting
if method.startswith("compile-"):
    fconfig.activation_memory_budget = float(method.split("-")[1])
    run = torch.compile(model, dynamic=False)
elif method == "compile":
    run = torch.compile(model, dynamic=False)
else:
    import lethe.torch as lt
    kw = dict(budget=budget, calibrate=False, offload=False)
    if method == "lethe-dump":
        kw["dump_dir"] = os.path.join(out, tag + "-dump")
    backend = lt.backend(**kw)
    run = backend(model)


def step():
    for p in params:
        p.grad = None
    run(a, b).backward()


def host_steps(n=10):
    """(host ms to issue, ms to finish) of `n` steps, each from an idle
    GPU, after a second of warm steps."""
    t = time.time()
    while time.time() - t < 1.0:
        step()
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter(); step(); t1 = time.perf_counter()
        torch.cuda.synchronize(); t2 = time.perf_counter()
        out.append((round((t1 - t0) * 1e3, 2), round((t2 - t0) * 1e3, 2)))
    return out


if phases:
    from lethe import _calibrate, _kernel_times
    res = {"model": model_name, "method": method + "-phases",
           "budget": budget, "phases": []}

    def phase(name):
        h = host_steps()
        med = sorted(h)[len(h) // 2]
        res["phases"].append({"phase": name, "host_issue_finish_ms": h})
        print(tag, name, "median host/finish", med, flush=True)

    step()
    phase("fresh")
    phase("fresh, again (time alone)")
    last = res["phases"][-1]["host_issue_finish_ms"]
    from lethe._step_meter import _hold_ms, Measurement
    host = sorted(h for h, _ in last)[len(last) // 2]
    hold = _hold_ms(Measurement(None, host, host_ms=host))
    prof = _kernel_times.StepProfile(dev, hold)  # CUDA events on 2.11
    res["profile"] = "torch.profiler" if prof.attaches_cupti \
        else "CUDA events"
    step()
    timed = prof.stop()
    phase(f"after one profiled step ({res['profile']})")
    if backend is not None:
        for i in (1, 2):
            _calibrate._recompile(run, backend)
            step()
            phase(f"after recompile {i} (same plan)")
        # Whether the host's growth is Python's collector walking what the
        # recompiles left alive.
        import gc
        gc.collect()
        gc.freeze()
        phase("after gc.collect + gc.freeze")
        gc.disable()
        phase("gc disabled")
        gc.enable()
    # The events' kernel times against torch.profiler's, same step, last
    # (the profiler's CUPTI stays attached).
    if not prof.attaches_cupti:
        _kernel_times.LaunchTimes.supported = staticmethod(lambda: False)
        ref_prof = _kernel_times.StepProfile(dev)
        step()
        ref = ref_prof.stop()
        names = {n for n, _ in timed if n != _kernel_times.BETWEEN}
        t_gen = sum(us for n, us in timed if n in names)
        t_between = sum(us for n, us in timed
                        if n == _kernel_times.BETWEEN)
        r_gen = sum(us for n, us in ref if n in names)
        r_other = sum(us for n, us in ref if n not in names
                      and not n.startswith(("Memcpy", "Memset")))
        per = {}
        for src, evs in (("events", timed), ("profiler", ref)):
            for n, us in evs:
                if n in names:
                    per.setdefault(n, {}).setdefault(src, []).append(us)
        errs = sorted(abs(sum(v["events"]) / sum(v["profiler"]) - 1)
                      for v in per.values()
                      if v.get("events") and v.get("profiler")
                      and sum(v["profiler"]) > 0)
        res["event_us"] = _kernel_times.LaunchTimes._event_us
        res["events_vs_profiler"] = {
            "generated_launches": sum(1 for n, _ in timed if n in names),
            "generated_ms_events": round(t_gen / 1e3, 3),
            "generated_ms_profiler": round(r_gen / 1e3, 3),
            "between_ms_events": round(t_between / 1e3, 3),
            "other_kernels_ms_profiler": round(r_other / 1e3, 3),
            "per_kernel_rel_error_median": errs[len(errs) // 2]
            if errs else None,
            "per_kernel_rel_error_p90": errs[int(len(errs) * 0.9)]
            if errs else None}
        print(tag, "events vs profiler", res["events_vs_profiler"],
              flush=True)
    json.dump(res, open(os.path.join(out, tag + "-phases.json"), "w"),
              indent=1)
    sys.exit(0)

res = {"model": model_name, "method": method, "budget": budget}
t = time.time()
step()
torch.cuda.synchronize()
res["first_step_s"] = time.time() - t
t = time.time()
while time.time() - t < 2.0:  # warm the GPU
    step()
torch.cuda.synchronize()
host = []
for _ in range(10):
    torch.cuda.synchronize()
    t0 = time.perf_counter(); step(); t1 = time.perf_counter()
    torch.cuda.synchronize(); t2 = time.perf_counter()
    host.append((round((t1 - t0) * 1e3, 2), round((t2 - t0) * 1e3, 2)))
res["host_issue_finish_ms"] = host
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(10):
    step()
torch.cuda.synchronize()
res["nosync_ms"] = (time.perf_counter() - t0) / 10 * 1e3
res["peak_bytes"] = torch.cuda.max_memory_allocated()
# Synchronizing calls in one step.
torch.cuda.set_sync_debug_mode(1)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    step()
torch.cuda.set_sync_debug_mode(0)
res["sync_warnings"] = [str(x.message)[:200] for x in w][:20]
res["sync_warning_count"] = len(w)
# Python-side: cProfile of 3 steps.
torch.cuda.synchronize()
pr = cProfile.Profile()
pr.enable()
for _ in range(3):
    step()
pr.disable()
torch.cuda.synchronize()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(45)
s.write("\n\n==== cumulative\n")
pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(45)
open(os.path.join(out, tag + "-cprofile.txt"), "w").write(s.getvalue())
# One step under the profiler, CPU + CUDA.
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    step()
    torch.cuda.synchronize()
trace = os.path.join("/tmp", tag + ".json")
prof.export_chrome_trace(trace)
with open(trace, "rb") as f, gzip.open(os.path.join(out, tag + ".trace.json.gz"), "wb") as g:
    g.write(f.read())
api = {}
for e in prof.events():
    if e.name.startswith(("cuda", "cu")) and str(e.device_type).endswith("CPU"):
        x = api.setdefault(e.name, [0, 0.0])
        x[0] += 1
        x[1] += (e.time_range.end - e.time_range.start) / 1e3
res["runtime_api_ms"] = {k: [v[0], round(v[1], 3)] for k, v in
                         sorted(api.items(), key=lambda kv: -kv[1][1])[:15]}
if backend is not None and backend.plans:
    r = backend.plans[-1]
    res["lethe"] = {k: v for k, v in r.summary().items()
                    if isinstance(v, (int, float, str, dict))}
try:
    from torch._dynamo.utils import counters
    res["dynamo"] = {k: dict(v) for k, v in counters.items()
                     if k in ("stats", "frames", "aot_autograd", "inductor")}
except Exception as e:  # noqa: BLE001
    res["dynamo"] = str(e)
res["partitions"] = PARTS
json.dump(res, open(os.path.join(out, tag + ".json"), "w"), indent=1,
          default=str)
print(tag, "first", round(res["first_step_s"], 1), "s; host/finish",
      host[-5:], "nosync", round(res["nosync_ms"], 2), "peak",
      res["peak_bytes"], "syncs", res["sync_warning_count"], flush=True)

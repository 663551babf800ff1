#!/usr/bin/env python3
"""Why a CUDA-graph replay runs slower than the kernels a profiled step
timed (issue 15/17: Lethe's calibration prices a replay as the profiled
kernels back to back, and predicted Llama-8l's replay 6% low).

For one model of bench/torch_inductor_bench.py, compiled by plain
torch.compile: the kernel time of one step under torch.profiler without
CUDA graphs and of one replay with them, then `--steps` replayed steps
timed one by one with CUDA events while nvidia-smi samples the SM clock,
power and temperature every 100 ms. Prints a table; `--out` writes JSON.

  python3 bench/replay_clock_probe.py --model llama-8l --steps 60 --out F
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import torch_inductor_bench as ib  # noqa: E402


def kernel_ms(step):
    """The summed CUDA kernel time of one call of `step` (torch.profiler),
    and how many kernels ran."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    total, count = 0.0, 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total += e.device_time
            count += 1
    return total / 1e3, count


class Sampler:
    """nvidia-smi's SM clock (MHz), power (W) and temperature (C), every
    100 ms, with the host time of each sample."""

    def __init__(self, gpu: int):
        self.rows = []
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", str(gpu), "--query-gpu=clocks.sm,power.draw,"
             "temperature.gpu", "--format=csv,noheader,nounits", "-lms",
             "100"], stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                clock, power, temp = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.rows.append((time.perf_counter(), clock, power, temp))

    def stop(self):
        self.proc.terminate()
        self.thread.join(timeout=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=ib.model_names())
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out")
    args = ap.parse_args()
    device = torch.device("cuda")
    model, a, b = ib.make_model(args.model, False, device, torch.bfloat16)
    params = list(model.parameters())
    result = {"model": args.model, "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__}

    def stepper(run, graphs):
        def step():
            if graphs:
                torch.compiler.cudagraph_mark_step_begin()
            run(a, b).backward()
            for p in params:
                p.grad = None
        return step

    eager = stepper(torch.compile(model), False)
    for _ in range(3):
        eager()
    result["kernels_no_graphs_ms"], result["kernels_no_graphs"] = \
        kernel_ms(eager)
    torch._dynamo.reset()
    replay = stepper(torch.compile(model, mode="reduce-overhead"), True)
    for _ in range(3):
        replay()
    result["kernels_replay_ms"], result["kernels_replay"] = kernel_ms(replay)
    gpu = torch.cuda.current_device()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        gpu = int(visible.split(",")[gpu])
    sampler = Sampler(gpu)
    time.sleep(0.5)
    times = []
    for _ in range(args.steps):
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        replay()
        end.record()
        end.synchronize()
        times.append((time.perf_counter(), start.elapsed_time(end)))
    time.sleep(0.3)
    sampler.stop()
    result["steps_ms"] = [t for _, t in times]
    result["samples"] = sampler.rows
    result["kernels_replay_after_ms"], _ = kernel_ms(replay)
    print(f"{args.model}: kernels of a step without graphs "
          f"{result['kernels_no_graphs_ms']:.2f} ms, of a replay "
          f"{result['kernels_replay_ms']:.2f} ms (after the run "
          f"{result['kernels_replay_after_ms']:.2f}); "
          f"{result['kernels_replay']} kernels a replay")
    first = sorted(t for _, t in times[:10])[5]
    print(f"the first ten replays' median {first:.2f} ms: "
          f"{1e3 * (first - result['kernels_replay_ms']) / result['kernels_replay']:.2f} "
          "us a kernel beyond the kernels' own time")
    print("| steps | median step ms | SM clock MHz | power W | temp C |")
    print("|---|---|---|---|---|")
    n = len(times)
    for lo in range(0, n, max(1, n // 6)):
        chunk = times[lo:lo + max(1, n // 6)]
        t0, t1 = chunk[0][0] - chunk[0][1] / 1e3, chunk[-1][0]
        s = [r for r in sampler.rows if t0 <= r[0] <= t1]
        ms = sorted(t for _, t in chunk)[len(chunk) // 2]
        avg = (lambda i: sum(r[i] for r in s) / len(s)) if s else \
            (lambda i: float("nan"))
        print(f"| {lo}-{lo + len(chunk) - 1} | {ms:.2f} | {avg(1):.0f} | "
              f"{avg(2):.0f} | {avg(3):.0f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()

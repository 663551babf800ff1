#!/usr/bin/env python3
"""Measures the figures of a device profile (devices/*.json) on the GPU at hand.

Prints a table and writes JSON (--out): dense matrix-product rate per dtype,
device-to-device copy bandwidth, pinned D2H / H2D bandwidth alone and both at
once, and the floor of per-op event timing (the method the shared graphs were
timed with: a GPU sleep, then events around the op).

lethe-calibrate (the CUDA runtime's tool, no PyTorch) measures these and more
and writes the profile itself (docs/CostModel.md); this script remains for
what needs PyTorch's kernels: the attention and convolution efficiencies.

Usage: python3 bench/measure_device.py [--out FILE]
Needs PyTorch with CUDA. Leaves the card's settings alone.
"""
import argparse
import json
import statistics

import torch


def timed(fn, warmup=3, reps=10):
    """Median milliseconds of fn() between CUDA events, after a GPU sleep."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100_000)  # keeps launch latency out of the region
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def gemm_rate(dtype_name, n):
    """Dense matrix-product FLOP/s on random data."""
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    if dtype_name == "f8":
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                      out_dtype=torch.bfloat16)
    else:
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16,
                 "f32": torch.float32, "tf32": torch.float32,
                 "f64": torch.float64}[dtype_name]
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        fn = lambda: torch.mm(a, b)
    ms = timed(fn)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2.0 * n ** 3 / (ms * 1e-3)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "torch": torch.__version__,
              "memory_bytes": props.total_memory,
              "sms": props.multi_processor_count}

    flops = {}
    for dtype_name, n in [("bf16", 8192), ("f16", 8192), ("f8", 8192),
                          ("tf32", 8192), ("f32", 8192), ("f64", 4096)]:
        try:
            flops[dtype_name] = gemm_rate(dtype_name, n)
        except Exception as exc:  # an unsupported dtype on older parts
            flops[dtype_name] = None
            print(f"{dtype_name}: {exc}")
    result["gemm_flops"] = flops

    nbytes = 2 << 30
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src))
    result["d2d_bytes_per_s_read_plus_write"] = 2 * nbytes / (ms * 1e-3)
    del src, dst

    nbytes = 1 << 30
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dev2 = torch.empty_like(dev)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    host2 = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    ms = timed(lambda: host.copy_(dev, non_blocking=True), reps=5)
    result["d2h_bytes_per_s"] = nbytes / (ms * 1e-3)
    ms = timed(lambda: dev2.copy_(host2, non_blocking=True), reps=5)
    result["h2d_bytes_per_s"] = nbytes / (ms * 1e-3)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    both = []
    for _ in range(5):
        torch.cuda.synchronize()
        e = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        with torch.cuda.stream(s1):
            e[0].record()
            host.copy_(dev, non_blocking=True)
            e[1].record()
        with torch.cuda.stream(s2):
            e[2].record()
            dev2.copy_(host2, non_blocking=True)
            e[3].record()
        torch.cuda.synchronize()
        both.append((e[0].elapsed_time(e[1]), e[2].elapsed_time(e[3])))
    d2h_ms = statistics.median(b[0] for b in both)
    h2d_ms = statistics.median(b[1] for b in both)
    result["both_d2h_bytes_per_s"] = nbytes / (d2h_ms * 1e-3)
    result["both_h2d_bytes_per_s"] = nbytes / (h2d_ms * 1e-3)
    del dev, dev2, host, host2

    # What the libraries' attention, convolution and misaligned matmul
    # kernels reach, as fractions of the bf16 matrix-product peak. Shapes are
    # generic ones (Llama-like attention, a mid-size 3x3 convolution), not
    # taken from any graph the model is judged on.
    peak = flops["bf16"]
    b, h, seq, d = 4, 16, 2048, 128
    q, k, v = (torch.randn(b, h, seq, d, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    attn_flops = 4.0 * b * h * seq * seq * d
    fwd_ms = timed(lambda: torch.nn.functional.scaled_dot_product_attention(
        q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    grad = torch.randn_like(out)
    bwd_ms = timed(lambda: torch.autograd.grad(out, (q, k, v), grad,
                                               retain_graph=True))
    result["attention_fwd_fraction"] = attn_flops / (fwd_ms * 1e-3) / peak
    result["attention_bwd_fraction"] = 2.5 * attn_flops / (bwd_ms * 1e-3) / peak
    del q, k, v, out, grad

    n, c, hw = 32, 128, 64
    x = torch.randn(n, c, hw, hw, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    w = torch.randn(c, c, 3, 3, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    conv_flops = 2.0 * n * c * hw * hw * c * 9
    fwd_ms = timed(lambda: torch.nn.functional.conv2d(x, w, padding=1))
    y = torch.nn.functional.conv2d(x, w, padding=1)
    gy = torch.randn_like(y)
    bwd_ms = timed(lambda: torch.autograd.grad(y, (x, w), gy,
                                               retain_graph=True))
    result["conv_fwd_fraction"] = conv_flops / (fwd_ms * 1e-3) / peak
    result["conv_bwd_fraction"] = 2 * conv_flops / (bwd_ms * 1e-3) / peak
    del x, w, y, gy

    fractions = []
    for m, kk, nn in [(8192, 4096, 4095), (8192, 4095, 4096)]:
        a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
        bm = torch.randn(kk, nn, device="cuda", dtype=torch.bfloat16)
        ms = timed(lambda: torch.mm(a, bm))
        fractions.append(2.0 * m * kk * nn / (ms * 1e-3) / peak)
    result["unaligned_mm_fractions_n_k"] = fractions

    # Floors of the per-op timing method: no kernel at all (a view), and the
    # smallest kernel (one-element add).
    x = torch.ones(1, device="cuda")
    result["floor_no_kernel_us"] = 1e3 * timed(lambda: x.view(1), reps=50)
    result["floor_tiny_kernel_us"] = 1e3 * timed(lambda: x + 1, reps=50)
    y = torch.ones(8 << 20, device="cuda", dtype=torch.bfloat16)
    result["add_16MiB_bf16_us"] = 1e3 * timed(lambda: y + y, reps=20)

    for key, value in result.items():
        if key == "gemm_flops":
            for d, f in value.items():
                print(f"gemm {d:5s} {f / 1e12 if f else float('nan'):9.1f} TFLOP/s")
        elif isinstance(value, float) and "fraction" in key:
            print(f"{key:34s} {value:9.3f} of bf16 peak")
        elif isinstance(value, float) and "bytes_per_s" in key:
            print(f"{key:34s} {value / 1e9:9.1f} GB/s")
        else:
            print(f"{key:34s} {value}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

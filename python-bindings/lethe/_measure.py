"""Costs measured on the device the step runs on, for planning inside
torch.compile.

Lethe's analytic cost model prices an op from its FLOPs and bytes and the
device profile; on the GPU that under-estimates some kernels by 16-28% and
trusts the profile's copy rates. When the partitioner runs in the training
process on the GPU, it can do better at little cost:

- every planned value whose kernel inductor does *not* generate (matmuls,
  convolutions, attention: library kernels, and the ops inductor falls
  back to) is timed alone on this device with the shapes, strides and
  dtypes of the compiled graph; inductor calls these kernels as they are,
  so their time alone is their time in the step. What inductor generates
  (pointwise chains, reductions, concatenations, gathers, fused into Triton
  kernels) keeps the bandwidth model, with the bandwidth measured here;
- the device profile's host-copy and memory rates are measured on this
  device and overlaid on the named profile.

Measurements are cached per device (GPU name, torch and CUDA versions) and
op signature (op, shapes, strides, dtypes, scalar arguments) in
`$LETHE_CACHE_DIR` (default `~/.cache/lethe`), so a recompile, a model with
repeated layers or the next run measure nothing twice. The cache key is
finer than a graph hash: two graphs that share an op share its time.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

__all__ = ["CostTable", "cache_dir", "device_key", "inductor_profile",
           "measured_profile", "scaled_profile"]

# Median of this many timed calls after _WARMUP untimed ones: enough for a
# stable median of a single kernel (spread under 2% on an H100 for ops over
# 20 us) while a new op costs about 10 calls.
_REPEATS = 7
_WARMUP = 3
_BURST = 5
# Copy-rate samples: 64 MiB is past the size where pinned copies reach
# their plateau (bench/results/device-h100.json), small enough to measure
# in milliseconds.
_COPY_BYTES = 64 << 20


def cache_dir() -> str:
    return os.environ.get("LETHE_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "lethe")


def device_key(device: torch.device) -> str:
    """What a measurement depends on beyond the op: the device model and
    the software that runs it."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        sw = f"torch{torch.__version__}-cuda{torch.version.cuda}"
    else:
        import platform
        name = platform.processor() or platform.machine()
        sw = f"torch{torch.__version__}-threads{torch.get_num_threads()}"
    raw = f"{name}-{sw}"
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in raw)


def _now() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


# Ops inductor calls as library kernels (cuBLAS, cuDNN, flash attention),
# by ATen name prefix: their time alone is their time in the compiled step.
# Everything else inductor generates itself (Triton kernels that fuse
# reductions, concatenations and gathers with their pointwise neighbours),
# where an eager kernel alone would price the unfused op.
_LIBRARY_OPS = ("aten.mm.", "aten.addmm.", "aten.bmm.", "aten.baddbmm.",
                "aten._scaled_mm.", "aten.convolution.",
                "aten.convolution_backward.", "aten._scaled_dot_product_",
                "aten._flash_attention_", "aten._efficient_attention_",
                "aten._cudnn_attention_")


def runs_as_library_kernel(node: fx.Node) -> bool:
    """Whether inductor runs `node`'s op as it is: a library kernel or one of
    its fallbacks (ops it has no lowering for)."""
    if node.op != "call_function" or not isinstance(
            node.target, torch._ops.OpOverload):
        return False
    name = f"aten.{node.target._opname}.{node.target._overloadname}" \
        if node.target.namespace == "aten" else str(node.target)
    if name.startswith(_LIBRARY_OPS):
        return True
    try:
        from torch._inductor.lowering import fallbacks
    except ImportError:
        return False
    return node.target in fallbacks


class CostTable:
    """Op times (µs) and device rates measured on one device, backed by a
    JSON file in the cache directory."""

    def __init__(self, device: torch.device, directory: Optional[str] = None):
        self.device = device
        self.key = device_key(device)
        self.path = os.path.join(directory or cache_dir(),
                                 f"costs-{self.key}.json")
        self.ops: Dict[str, float] = {}
        # The most an op holds at once beyond its outputs (a library's
        # workspace), measured with its time; an op timed by an older
        # Lethe has none here and is measured again.
        self.workspace: Dict[str, int] = {}
        self.rates: Dict[str, float] = {}
        self.measured = 0  # ops timed by this table (cache misses)
        self.failed = 0    # ops that could not be run alone
        self._dirty = False
        try:
            with open(self.path) as f:
                doc = json.load(f)
            if doc.get("device") == self.key:
                self.ops = {str(k): float(v) for k, v in
                            doc.get("ops", {}).items()}
                self.workspace = {str(k): int(v) for k, v in
                                  doc.get("workspace", {}).items()}
                self.rates = {str(k): float(v) for k, v in
                              doc.get("rates", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # no cache yet, or unreadable: measure again

    def save(self) -> None:
        """Writes the table atomically (a concurrent reader never sees a
        half-written file)."""
        if not self._dirty:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path),
                                   prefix=".costs-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"device": self.key, "date": _now(), "ops": self.ops,
                       "workspace": self.workspace, "rates": self.rates},
                      f, indent=0, sort_keys=True)
        os.replace(tmp, self.path)
        self._dirty = False

    # --- ops -----------------------------------------------------------

    def op_cost(self, node: fx.Node) -> Optional[Tuple[float, int]]:
        """The time (µs) of `node`'s op alone on this device and its
        workspace (bytes held at once beyond its outputs), from the cache
        or measured now; None when it cannot be run alone."""
        key = _signature(node)
        if key is None:
            return None
        if key in self.ops and key in self.workspace:
            return self.ops[key], self.workspace[key]
        try:
            t, ws = _time_op(node, self.device)
        except Exception:  # an op that needs real data: keep the model
            self.failed += 1
            return None
        self.ops[key], self.workspace[key] = t, ws
        self.measured += 1
        self._dirty = True
        return t, ws

    # --- device rates ----------------------------------------------------

    def device_rates(self) -> Dict[str, float]:
        """Host-copy and memory rates of this device (GB/s), measured once
        per cache."""
        if self.device.type != "cuda":
            return {}
        if not self.rates:
            self.rates = _measure_rates(self.device)
            self._dirty = True
        return self.rates


def _signature(node: fx.Node) -> Optional[str]:
    """The op and everything its time depends on, or None when an argument
    is not static (a symbolic size)."""
    parts: List[str] = []

    def describe(a: Any) -> None:
        if isinstance(a, fx.Node):
            v = a.meta.get("val")
            if isinstance(v, torch.Tensor):
                parts.append(f"T{tuple(v.shape)}{v.stride()}{v.dtype}")
                return
            parts.append(repr(v))
            return
        parts.append(repr(a))

    try:
        for a in pytree.tree_leaves((node.args, node.kwargs)):
            describe(a)
    except Exception:
        return None
    if any("Sym" in p for p in parts):
        return None
    return f"{node.target}|{'|'.join(parts)}"


def _materialize(a: Any, device: torch.device) -> Any:
    """A real tensor of the argument's shape, strides and dtype. Floats are
    normal (kernels whose speed depends on values, such as softmax, see
    realistic data); integers are zeros, a valid index for any gather."""
    if not isinstance(a, fx.Node):
        return a
    v = a.meta.get("val")
    if not isinstance(v, torch.Tensor):
        return v
    t = torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype,
                            device=v.device if v.device.type != "meta"
                            else device)
    if t.is_floating_point() or t.is_complex():
        t.normal_()
    else:
        t.zero_()
    return t


@contextlib.contextmanager
def real_tensors() -> Iterator[None]:
    """Runs real kernels even inside inductor's compile: the partitioner is
    called under a fake-tensor mode and the Python dispatcher, where an op
    on new tensors would only be traced (timing Python, not the GPU)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.utils._mode_utils import no_dispatch
    with unset_fake_temporarily(), no_dispatch(), \
            torch._C._DisablePythonDispatcher(), torch.no_grad():
        yield


# A workspace under this is left out: the caching allocator rounds each
# block (up to 2 MiB for large ones), so smaller differences are its
# rounding, and nothing this small moves a step's peak.
_MIN_WORKSPACE = 4 << 20


def _time_op(node: fx.Node, device: torch.device) -> Tuple[float, int]:
    """The op's median time (µs) and its workspace: the most one call
    holds at once beyond its outputs' blocks (cuDNN's convolution
    workspace, which the caching allocator serves and counts in the step's
    peak: 407 MB of U-Net's backward on an H200), 0 below _MIN_WORKSPACE
    or off CUDA."""
    # The inputs' values and the op itself (attention with dropout) draw
    # from the default generators: restore them, so that compiling with
    # Lethe leaves the user's random stream (dropout masks) where plain
    # torch.compile leaves it.
    rng_devices = [device] if device.type == "cuda" else []
    with real_tensors(), torch.random.fork_rng(devices=rng_devices):
        args, kwargs = pytree.tree_map(lambda a: _materialize(a, device),
                                       (node.args, node.kwargs))

        def call() -> Any:
            return node.target(*args, **kwargs)

        us = _median_us(call, device)
        return us, _workspace_bytes(call, device)


def _workspace_bytes(call: Callable[[], Any], device: torch.device) -> int:
    """The most one warm call has allocated at once beyond the blocks of
    what it returns: its peak over what was allocated before it, less its
    outputs. Not the bytes it allocated in all: a convolution's backward
    runs cuDNN twice (input and weight gradients), each with a workspace
    of its own, one after the other (U-Net on an H200: 810 MB allocated,
    405 MB at once, 407 MB in the compiled step). It resets the CUDA peak
    statistic, as the calibration's step meter does."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    out = call()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    storages = {}
    for t in pytree.tree_flatten(out)[0]:  # (torch 1.13 has no tree_leaves)
        if isinstance(t, torch.Tensor) and t.device.type == "cuda":
            st = t.untyped_storage()
            storages[st.data_ptr()] = st.nbytes()
    returned = sum(_block_bytes(b) for b in storages.values())
    extra = peak - returned
    return int(extra) if extra >= _MIN_WORKSPACE else 0


def _block_bytes(nbytes: int) -> int:
    """The caching allocator's block for a request (c10's round_size: 512
    B granules)."""
    return max(512, (nbytes + 511) // 512 * 512)


def _median_us(fn: Callable[[], Any], device: torch.device) -> float:
    for _ in range(_WARMUP):
        fn()
    samples = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(_REPEATS):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            # A burst of calls between the events: the host enqueues ahead
            # of the GPU, so the events see kernel time, not Python's
            # dispatch (a lone call of a 10 us kernel reads as its launch).
            start.record()
            for _ in range(_BURST):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / _BURST)
    else:
        for _ in range(_REPEATS):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def _measure_rates(device: torch.device) -> Dict[str, float]:
    """Pinned D2H and H2D alone and both at once (on two side streams), and
    device-memory bandwidth (a device copy, bytes read plus written)."""
    with real_tensors():
        return _copy_rates(device)


def _copy_rates(device: torch.device) -> Dict[str, float]:
    n = _COPY_BYTES
    dev = torch.empty(n, dtype=torch.uint8, device=device)
    dev2 = torch.empty(n, dtype=torch.uint8, device=device)
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    host2 = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    s1 = torch.cuda.Stream(device)
    s2 = torch.cuda.Stream(device)

    def gbps(fn: Callable[[], Any], nbytes: int) -> float:
        return nbytes / (_median_us(fn, device) * 1e-6) / 1e9

    d2h = gbps(lambda: host.copy_(dev, non_blocking=True), n)
    h2d = gbps(lambda: dev.copy_(host, non_blocking=True), n)

    def both() -> None:
        main = torch.cuda.current_stream(device)
        s1.wait_stream(main)
        s2.wait_stream(main)
        with torch.cuda.stream(s1):
            host.copy_(dev, non_blocking=True)
        with torch.cuda.stream(s2):
            dev2.copy_(host2, non_blocking=True)
        main.wait_stream(s1)
        main.wait_stream(s2)

    duplex = gbps(both, 2 * n)
    hbm = gbps(lambda: dev2.copy_(dev), 2 * n)
    return {"d2h_gb_per_s": round(d2h, 2), "h2d_gb_per_s": round(h2d, 2),
            "duplex_factor": round(min(1.0, duplex / (d2h + h2d)), 3),
            "hbm_gb_per_s": round(hbm, 1)}


def measured_profile(base: str, table: CostTable) -> str:
    """The named built-in profile with this device's measured rates
    overlaid, written to the cache directory; returns its path (the
    planner takes a profile file wherever it takes a name). `base` may
    already be a file."""
    rates = table.device_rates()
    profile = _load_profile(base) if rates else None
    if profile is None:
        return base  # nothing measured, or a profile this package lacks
    profile["name"] = f"{profile.get('name', base)}-measured"
    profile.update(rates)
    notes = profile.setdefault("notes", {})
    for k in rates:
        notes[k] = (f"measured in-process by lethe.torch on {table.key}, "
                    f"{_now()} ({_COPY_BYTES >> 20} MiB pinned copies, "
                    "median)")
    return _write_profile(
        profile, os.path.join(os.path.dirname(table.path),
                              f"profile-{os.path.basename(base)}-"
                              f"{table.key}.json"))


# What the cost model prices kernels with (lib/Analysis/CostModel.cpp):
# rates divide, fixed costs multiply. Copy and link rates are left alone:
# they are measured (measured_profile), not modelled kernels.
_KERNEL_RATES = ("hbm_gb_per_s",)
_KERNEL_FIXED_US = ("launch_overhead_us", "view_us")


def scaled_profile(base: str, scale: float) -> str:
    """`base` (a profile name or file) with the kernels Lethe prices by its
    cost model `scale` times as long: the step's calibration
    (lethe._calibrate). Ops with measured times are not affected."""
    if scale == 1.0:
        return base
    profile = _load_profile(base)
    if profile is None:
        return base
    notes = profile.setdefault("notes", {})
    why = (f"calibrated by lethe.torch on the compiled step, {_now()}: "
           f"modelled kernels measured {scale:.4f} times their modelled "
           "time")
    for k in _KERNEL_RATES + _KERNEL_FIXED_US + ("peak_tflops",):
        value = profile.get(k)
        if isinstance(value, dict):
            profile[k] = {d: v / scale for d, v in value.items()}
        elif isinstance(value, (int, float)):
            profile[k] = value * scale if k in _KERNEL_FIXED_US \
                else value / scale
        else:
            continue
        notes[k] = f"{why} (was {value})"
    return _write_derived(profile, base, f"x{scale:.4f}")


def inductor_profile(base: str) -> str:
    """`base` (a profile name or file) as inductor runs the step: a view
    costs the device nothing. The profile's `view_us` is what the runtime's
    programs spend on a view op (the event floor of one op); inductor's
    generated code makes a view on the host (`reinterpret_tensor`) and
    launches no kernel for it. Priced at `view_us`, the 490 views of a
    MoE-8l step added 1.4 ms (5%) to its prediction on an H200."""
    profile = _load_profile(base)
    if profile is None or not profile.get("view_us"):
        return base
    notes = profile.setdefault("notes", {})
    notes["view_us"] = ("0 under inductor, which launches no kernel for a "
                        f"view (was {profile['view_us']})")
    profile["view_us"] = 0
    return _write_derived(profile, base, "inductor")


def host_launch_profile(base: str, host_us: float) -> str:
    """`base` (a profile name or file) with the host's time to issue one op
    of the step set to `host_us` (`host_launch_us`: the simulator starts no
    op before the host has issued every op before it). The calibration
    (lethe._calibrate) measures it where the host bounds the compiled
    step."""
    profile = _load_profile(base)
    if profile is None:
        return base
    notes = profile.setdefault("notes", {})
    notes["host_launch_us"] = (
        f"measured by lethe.torch on the compiled step, {_now()}: its host "
        f"time over its ops, {host_us:.2f} us an op (was "
        f"{profile.get('host_launch_us')})")
    profile["host_launch_us"] = round(host_us, 3)
    return _write_derived(profile, base, f"host{host_us:.2f}")


def _write_derived(profile: Dict[str, Any], base: str, tag: str) -> str:
    """`profile`, made from `base` by the calibration, named and cached as
    `base` with `-tag`; returns its path."""
    profile["name"] = f"{profile.get('name', base)}-{tag}"
    stem = os.path.splitext(os.path.basename(base))[0]
    return _write_profile(profile, os.path.join(
        cache_dir(), f"profile-{stem}-{tag}.json"))


def _load_profile(base: str) -> Optional[Dict[str, Any]]:
    """A profile file, or a built-in profile by name (None: not shipped)."""
    if os.path.isfile(base):
        with open(base) as f:
            return json.load(f)
    package = os.path.dirname(os.path.abspath(__file__))
    # The wheel and build/python ship the profiles in lethe/devices; a
    # source checkout has them at the repository's root.
    for directory in (os.path.join(package, "devices"),
                      os.path.join(package, "..", "..", "devices")):
        try:
            with open(os.path.join(directory, f"{base}.json")) as f:
                return json.load(f)
        except OSError:
            continue
    return None


def _write_profile(profile: Dict[str, Any], path: str) -> str:
    """Writes `profile` to `path` atomically (processes share the cache)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".profile-")
    with os.fdopen(fd, "w") as f:
        json.dump(profile, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path

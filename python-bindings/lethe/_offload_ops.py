"""Offload as operators inductor compiles: `torch.ops.lethe.*`.

The plan's offloads run inside compiled graphs as six custom ops, which
inductor calls as extern kernels between its fused kernels:

    forward:   h = lethe.offload(x)        D2H copy of x into pinned memory,
                                           started on a side stream; h (the
                                           host tensor) is saved instead of x
               x' = lethe.issued(x, h)     x's next reader takes x': the copy
                                           is issued before that reader, and
                                           no reordering can sink it
               t' = lethe.release(t, h)    at the plan's release point t:
                                           the compute stream waits for the
                                           copy, and x's memory is let go
    backward:  b = lethe.buffer(dep, ...)  x's device buffer, allocated after
                                           `dep` (the plan's prefetch point)
               y = lethe.reload(h, b)      H2D copy into b on a side stream
               t' = lethe.fence(t, y)      pins the reload before t's readers
               y' = lethe.wait(y)          before y's first use: the compute
                                           stream waits for the copy

Memory discipline, the same with and without CUDA graphs: no tensor is
handed to the caching allocator with a use pending on a side stream (no
`record_stream`, which cudagraph trees cannot checkpoint). `offload` holds
x until `release` has made the compute stream wait for the copy; the
reload's buffer is allocated by the compute stream (`buffer`, inside the
graphs' memory pool under CUDA graphs) and read only after `wait`. Under
CUDA graphs (`mode="reduce-overhead"`) `offload`, `issued`, `release`,
`reload` and `wait` are tagged `cudagraph_unsafe`: inductor's graph
partition runs them between the captured graphs, on the host every step
(their events and pinned buffers are per step), and `buffer` and `fence`
inside them. No captured graph may read a host tensor (cudagraph trees
copy a graph's inputs into their memory pool, which has no host memory):
`issued` is `fence` for an ordering edge on the host copy. The
H2D stream waits for the compute stream (the buffer's previous users, and
the forward's releases). Pinned buffers come from PyTorch's caching host
allocator, which holds a block until the copies using it complete.

`fence`, `issued`, `release`, `reload` and `wait` return their first tensor
argument
(`reload` its buffer, which it writes and nothing else reads): they are
ordering edges for inductor's scheduler.

On a CPU tensor the copies are synchronous clones and `release` and `wait`
do nothing: the stand-in the CPU tests compile and run.
"""

from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

import torch

__all__ = ["ensure_registered", "stats", "OP_NAMES", "held"]

OP_NAMES = ("lethe::offload", "lethe::issued", "lethe::release",
            "lethe::fence", "lethe::buffer", "lethe::reload", "lethe::wait")

_lock = threading.Lock()
_registered = False
_lib: Optional[torch.library.Library] = None
_streams: Dict[int, Tuple[torch.cuda.Stream, torch.cuda.Stream]] = {}
# Offloaded device tensors held until their release, with the event of
# their D2H copy, by the data pointer of the host buffer.
_held: Dict[int, Tuple[torch.Tensor, Optional[torch.cuda.Event]]] = {}
# Events of H2D copies in flight, by the data pointer of the buffer written.
_h2d_done: Dict[int, torch.cuda.Event] = {}

# Bytes copied each way since the process started (tests, benches).
# buffer_bytes: the device memory the reload buffers take (counted where
# `buffer` runs in Python: not in a CUDA graph's replays).
stats = {"d2h_bytes": 0, "h2d_bytes": 0, "d2h_copies": 0, "h2d_copies": 0,
         "buffer_bytes": 0}


def held() -> int:
    """Offloaded tensors not released yet (0 between steps)."""
    return len(_held)


def _side_streams(device: torch.device):
    index = device.index if device.index is not None \
        else torch.cuda.current_device()
    if index not in _streams:
        _streams[index] = (torch.cuda.Stream(index), torch.cuda.Stream(index))
    return _streams[index]


def _offload(x: torch.Tensor) -> torch.Tensor:
    stats["d2h_bytes"] += x.numel() * x.element_size()
    stats["d2h_copies"] += 1
    # The host copy has x's strides, as the fake says (offload_fake): a
    # clone of a view with gaps (q of a fused q/k/v projection) comes out
    # contiguous, which inductor's stride check rejects.
    if x.device.type != "cuda":
        host = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype)
        host.copy_(x)
        _held[host.data_ptr()] = (x, None)
        return host
    d2h, _ = _side_streams(x.device)
    host = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype,
                               device="cpu", pin_memory=True)
    d2h.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(d2h):
        host.copy_(x, non_blocking=True)
        done = torch.cuda.Event()
        done.record(d2h)
    _held[host.data_ptr()] = (x, done)
    return host


def _release(t: torch.Tensor, host: torch.Tensor) -> torch.Tensor:
    x, done = _held.pop(host.data_ptr(), (None, None))
    if done is not None:
        torch.cuda.current_stream(x.device).wait_event(done)
    return t


def _buffer(dep: Optional[torch.Tensor], size, stride, dtype: torch.dtype,
            device: torch.device) -> torch.Tensor:
    del dep  # an ordering edge only
    out = torch.empty_strided(size, stride, dtype=dtype, device=device)
    stats["buffer_bytes"] += out.untyped_storage().nbytes()
    return out


def _reload(host: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    stats["h2d_bytes"] += host.numel() * host.element_size()
    stats["h2d_copies"] += 1
    # A release the forward never reached (it always has one): the copy
    # must have read x before the host buffer is read back.
    _, unreleased = _held.pop(host.data_ptr(), (None, None))
    if out.device.type != "cuda":
        return out.copy_(host)
    _, h2d = _side_streams(out.device)
    h2d.wait_stream(torch.cuda.current_stream(out.device))
    if unreleased is not None:
        h2d.wait_event(unreleased)
    with torch.cuda.stream(h2d):
        out.copy_(host, non_blocking=True)
        done = torch.cuda.Event()
        done.record(h2d)
    _h2d_done[out.data_ptr()] = done
    return out


def _wait(t: torch.Tensor) -> torch.Tensor:
    if t.device.type == "cuda":
        done = _h2d_done.pop(t.data_ptr(), None)
        if done is not None:
            torch.cuda.current_stream(t.device).wait_event(done)
    return t


def ensure_registered() -> None:
    """Defines the `lethe` op library once per process."""
    global _registered, _lib
    with _lock:
        if _registered:
            return
        # Run between CUDA graphs, every step (inductor's graph partition).
        unsafe = tuple(t for t in (getattr(torch.Tag, "cudagraph_unsafe",
                                           None),) if t is not None)
        lib = torch.library.Library("lethe", "DEF")
        lib.define("offload(Tensor x) -> Tensor", tags=unsafe)
        lib.define("issued(Tensor(a) t, Tensor host) -> Tensor(a)",
                   tags=unsafe)
        lib.define("release(Tensor(a) t, Tensor host) -> Tensor(a)",
                   tags=unsafe)
        lib.define("fence(Tensor(a) t, Tensor dep) -> Tensor(a)")
        lib.define("buffer(Tensor? dep, SymInt[] size, SymInt[] stride, "
                   "ScalarType dtype, Device device) -> Tensor")
        lib.define("reload(Tensor host, Tensor(a) out) -> Tensor(a)",
                   tags=unsafe)
        lib.define("wait(Tensor(a) t) -> Tensor(a)", tags=unsafe)

        impl = "CompositeExplicitAutograd"
        lib.impl("offload", _offload, impl)
        lib.impl("issued", lambda t, host: t, impl)
        lib.impl("release", _release, impl)
        lib.impl("fence", lambda t, dep: t, impl)
        lib.impl("buffer", _buffer, impl)
        lib.impl("reload", _reload, impl)
        lib.impl("wait", _wait, impl)

        def offload_fake(x):
            return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype,
                                       device="cpu")

        def buffer_fake(dep, size, stride, dtype, device):
            return torch.empty_strided(size, stride, dtype=dtype,
                                       device=device)

        def fake(name, fn):
            torch.library.register_fake("lethe::" + name, fn, lib=lib)
        fake("offload", offload_fake)
        fake("issued", lambda t, host: t)
        fake("release", lambda t, host: t)
        fake("fence", lambda t, dep: t)
        fake("buffer", buffer_fake)
        fake("reload", lambda host, out: out)
        fake("wait", lambda t: t)
        _lib = lib
        _registered = True

"""Offload as operators inductor compiles: `torch.ops.lethe.*`.

The plan's offloads run inside compiled graphs as four custom ops, which
inductor calls as extern kernels between its fused kernels:

    forward:   h = lethe.offload(x)        D2H copy of x into pinned memory,
                                           started on a side stream; h (the
                                           host tensor) is saved instead of x
               x' = lethe.fence(x, h)      x's next reader takes x': the copy
                                           is issued before that reader, and
                                           no reordering can sink it
    backward:  y = lethe.reload(h, dep)    H2D copy on a side stream, issued
                                           after `dep` (the plan's prefetch
                                           point) is computed
               t' = lethe.fence(t, y)      pins the reload before t's readers
               y' = lethe.wait(y)          before y's first use: the compute
                                           stream waits for the copy

Ordering uses CUDA events: the D2H stream waits for the compute stream
before it reads x, and x.record_stream(d2h) keeps the caching allocator
from handing x's block to later work until the copy has read it: x's
memory returns when the copy completes, as Lethe's plan assumes. The H2D
stream waits for the compute stream (the new buffer's previous users) and
for the D2H copy of h. Pinned buffers come from PyTorch's caching host
allocator, which holds a block until the copies using it complete.

`fence` and `wait` return their first argument (schema `Tensor(a) ->
Tensor(a)`): they move no data. They do not run under CUDA graphs
(`mode="reduce-overhead"`): there the partitioner plans recompute-only
(lethe._inductor.OFFLOAD_UNDER_CUDA_GRAPHS says why).

On a CPU tensor the copies are synchronous clones and `wait` does nothing:
the stand-in the CPU tests compile and run.
"""

from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

import torch

__all__ = ["ensure_registered", "stats", "OP_NAMES"]

OP_NAMES = ("lethe::offload", "lethe::reload", "lethe::wait", "lethe::fence")

_lock = threading.Lock()
_registered = False
_lib: Optional[torch.library.Library] = None
_streams: Dict[int, Tuple[torch.cuda.Stream, torch.cuda.Stream]] = {}
# Events of copies in flight, by the data pointer of the tensor written:
# d2h keyed by the host buffer, h2d by the device buffer.
_d2h_done: Dict[int, torch.cuda.Event] = {}
_h2d_done: Dict[int, torch.cuda.Event] = {}

# Bytes copied each way since the process started (tests, benches).
stats = {"d2h_bytes": 0, "h2d_bytes": 0, "d2h_copies": 0, "h2d_copies": 0}


def _side_streams(device: torch.device):
    index = device.index if device.index is not None \
        else torch.cuda.current_device()
    if index not in _streams:
        _streams[index] = (torch.cuda.Stream(index), torch.cuda.Stream(index))
    return _streams[index]


def _offload(x: torch.Tensor) -> torch.Tensor:
    stats["d2h_bytes"] += x.numel() * x.element_size()
    stats["d2h_copies"] += 1
    if x.device.type != "cuda":
        return x.clone()
    d2h, _ = _side_streams(x.device)
    host = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype,
                               device="cpu", pin_memory=True)
    d2h.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(d2h):
        host.copy_(x, non_blocking=True)
        done = torch.cuda.Event()
        done.record(d2h)
    x.record_stream(d2h)
    _d2h_done[host.data_ptr()] = done
    return host


def _reload(host: torch.Tensor, device: torch.device,
            dep: Optional[torch.Tensor] = None) -> torch.Tensor:
    del dep  # an ordering edge only
    stats["h2d_bytes"] += host.numel() * host.element_size()
    stats["h2d_copies"] += 1
    if device.type != "cuda":
        return host.clone()
    _, h2d = _side_streams(device)
    out = torch.empty_strided(host.size(), host.stride(), dtype=host.dtype,
                              device=device)
    h2d.wait_stream(torch.cuda.current_stream(device))
    produced = _d2h_done.pop(host.data_ptr(), None)
    if produced is not None:
        h2d.wait_event(produced)
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
            # The buffer was allocated on the compute stream; the side
            # stream wrote it: keep the block until that write is done.
            _, h2d = _side_streams(t.device)
            t.record_stream(h2d)
    return t


def ensure_registered() -> None:
    """Defines the `lethe` op library once per process."""
    global _registered, _lib
    with _lock:
        if _registered:
            return
        lib = torch.library.Library("lethe", "DEF")
        lib.define("offload(Tensor x) -> Tensor")
        lib.define("reload(Tensor host, Device device, Tensor? dep=None) "
                   "-> Tensor")
        lib.define("wait(Tensor(a) t) -> Tensor(a)")
        lib.define("fence(Tensor(a) t, Tensor dep) -> Tensor(a)")

        lib.impl("offload", _offload, "CompositeExplicitAutograd")
        lib.impl("reload", _reload, "CompositeExplicitAutograd")
        lib.impl("wait", _wait, "CompositeExplicitAutograd")
        lib.impl("fence", lambda t, dep: t, "CompositeExplicitAutograd")

        def offload_fake(x):
            return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype,
                                       device="cpu")

        def reload_fake(host, device, dep=None):
            return torch.empty_strided(host.size(), host.stride(),
                                       dtype=host.dtype, device=device)

        torch.library.register_fake("lethe::offload", offload_fake, lib=lib)
        torch.library.register_fake("lethe::reload", reload_fake, lib=lib)
        torch.library.register_fake("lethe::wait", lambda t: t, lib=lib)
        torch.library.register_fake("lethe::fence", lambda t, dep: t,
                                    lib=lib)
        _lib = lib
        _registered = True

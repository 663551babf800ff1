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
graphs' memory pool under CUDA graphs) and read only after `wait`. The
H2D stream waits for the compute stream (the buffer's previous users, and
the forward's releases).

Two ways to hold the host copy, chosen per compile (`token`):
- without CUDA graphs, `offload` returns the host tensor, pinned by
  PyTorch's caching host allocator (which holds a block until the copies
  using it complete), and the backward reads it;
- under CUDA graphs (`mode="reduce-overhead"`), no captured graph may
  output or read a host tensor (cudagraph trees copy a graph's inputs into
  their memory pool, which has no host memory), so `offload` returns a
  one-byte device token and keeps the host buffer itself, by the token's
  address, until `reload` reads it. The copies, their events and the side
  streams' forks and joins are captured with the graphs (each copy joins
  the compute stream within its graph: `release` in the forward, `wait` in
  the backward), and each replay copies to and from the same host buffers:
  those a graph captured belong to it for the process's life. Host buffers
  are page-locked with cudaHostRegister, outside PyTorch's caching host
  allocator, whose event bookkeeping a capture must not reach; they are
  made in the eager warm-up runs that cudagraph trees make before they
  record (none can be made during a capture) and handed on to the capture.
  `LETHE_OFFLOAD_IN_GRAPHS=0` restores the old way: the ops tagged
  `cudagraph_unsafe` run between the captured graphs (inductor's graph
  partition), on the host every step, the host tensor saved.

`fence`, `issued`, `release`, `reload` and `wait` return their first tensor
argument
(`reload` its buffer, which it writes and nothing else reads): they are
ordering edges for inductor's scheduler.

On a CPU tensor the copies are synchronous clones and `release` and `wait`
do nothing: the stand-in the CPU tests compile and run.
"""

from __future__ import annotations

import os
import threading
from typing import Dict, List, Optional, Tuple

import torch

__all__ = ["ensure_registered", "stats", "OP_NAMES", "held", "IN_GRAPHS"]

OP_NAMES = ("lethe::offload", "lethe::issued", "lethe::release",
            "lethe::fence", "lethe::buffer", "lethe::reload", "lethe::wait")

# Whether the copies of a step run as CUDA graphs are captured in them
# (host buffers held by token) or run between them (tagged
# cudagraph_unsafe). Read once, when the ops are registered.
IN_GRAPHS = os.environ.get("LETHE_OFFLOAD_IN_GRAPHS", "1") != "0"

_lock = threading.Lock()
_registered = False
_lib: Optional[torch.library.Library] = None
_streams: Dict[int, Tuple[torch.cuda.Stream, torch.cuda.Stream]] = {}
# Offloaded device tensors held until their release, with the event of
# their D2H copy, by the data pointer of the host buffer (or of its token).
_held: Dict[int, Tuple[torch.Tensor, Optional[torch.cuda.Event]]] = {}
# Events of H2D copies in flight, by the data pointer of the buffer written.
_h2d_done: Dict[int, torch.cuda.Event] = {}
# Token mode: the host buffer of each token, by the token's data pointer,
# from `offload` to `reload`.
_token_host: Dict[int, torch.Tensor] = {}
# Token mode: free page-locked host buffers by (size, stride, dtype), each
# with the event of the last H2D copy that read it (None: never read).
_free_hosts: Dict[tuple, List[Tuple[torch.Tensor,
                                    Optional[torch.cuda.Event]]]] = {}
# Token mode: the host buffers captured graphs copy to and from, kept for
# the process's life (a graph replays its copies with their addresses).
_graph_hosts: List[torch.Tensor] = []

# Bytes copied each way since the process started (tests, benches).
# buffer_bytes: the device memory the reload buffers take (counted where
# `buffer` runs in Python: not in a CUDA graph's replays).
# graph_host_bytes: host memory owned by captured graphs.
stats = {"d2h_bytes": 0, "h2d_bytes": 0, "d2h_copies": 0, "h2d_copies": 0,
         "buffer_bytes": 0, "graph_host_bytes": 0}


def held() -> int:
    """Offloaded tensors not released yet (0 between steps)."""
    return len(_held)


def _side_streams(device: torch.device):
    index = device.index if device.index is not None \
        else torch.cuda.current_device()
    if index not in _streams:
        _streams[index] = (torch.cuda.Stream(index), torch.cuda.Stream(index))
    return _streams[index]


def _capturing() -> bool:
    return torch.cuda.is_current_stream_capturing()


def _registered_host(x: torch.Tensor) -> torch.Tensor:
    """A page-locked host tensor with x's size and strides, outside
    PyTorch's caching host allocator."""
    host = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype)
    nbytes = host.untyped_storage().nbytes()
    if nbytes:
        err = torch.cuda.cudart().cudaHostRegister(host.data_ptr(), nbytes, 0)
        if int(err) != 0:
            raise RuntimeError(
                f"lethe.offload: cudaHostRegister of {nbytes} bytes failed "
                f"({err}): not enough host memory to page-lock for the "
                "offloaded values; plan with less offload (host_budget=) "
                "or offload=False")
    return host


def _token_host_for(x: torch.Tensor, d2h) -> torch.Tensor:
    """The host buffer x's copy goes to in token mode: a free one of x's
    layout (its last reader waited for on the D2H stream), else a new one.
    During a capture the buffer becomes the captured graph's."""
    free = _free_hosts.get(_layout(x))
    capturing = _capturing()
    if free:
        host, last_read = free.pop()
        # A capture cannot wait for an event recorded outside it; cudagraph
        # trees synchronize the device before they record.
        if last_read is not None and not capturing:
            d2h.wait_event(last_read)
    elif capturing:
        raise RuntimeError(
            "lethe.offload: no host buffer for a copy captured in a CUDA "
            "graph (host buffers are made in the eager warm-up run before "
            "a capture); run the step once without capture first, or set "
            "LETHE_OFFLOAD_IN_GRAPHS=0")
    else:
        host = _registered_host(x)
    if capturing:
        _graph_hosts.append(host)
        stats["graph_host_bytes"] += host.untyped_storage().nbytes()
    return host


def _offload(x: torch.Tensor, token: bool = False) -> torch.Tensor:
    stats["d2h_bytes"] += x.numel() * x.element_size()
    stats["d2h_copies"] += 1
    # The host copy has x's strides, as the fake says (offload_fake): a
    # clone of a view with gaps (q of a fused q/k/v projection) comes out
    # contiguous, which inductor's stride check rejects.
    if x.device.type != "cuda":
        host = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype)
        host.copy_(x)
        return _hold(x, host, None, token)
    d2h, _ = _side_streams(x.device)
    d2h.wait_stream(torch.cuda.current_stream(x.device))
    if token:
        host = _token_host_for(x, d2h)
    else:
        host = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype,
                                   device="cpu", pin_memory=True)
    with torch.cuda.stream(d2h):
        host.copy_(x, non_blocking=True)
        done = torch.cuda.Event()
        done.record(d2h)
    return _hold(x, host, done, token)


def _hold(x: torch.Tensor, host: torch.Tensor,
          done: Optional[torch.cuda.Event], token: bool) -> torch.Tensor:
    """What the forward saves for x's copy `host`: the host tensor, or
    (token) a one-byte device token that holds it until `reload`; x is held
    until its release, which waits for `done` (the copy's event)."""
    if not token:
        _held[host.data_ptr()] = (x, done)
        return host
    tok = torch.empty((1,), dtype=torch.uint8, device=x.device)
    _held[tok.data_ptr()] = (x, done)
    _token_host[tok.data_ptr()] = host
    return tok


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
    # A release the forward never reached (it always has one): the copy
    # must have read x before the host buffer is read back.
    _, unreleased = _held.pop(host.data_ptr(), (None, None))
    token = host.data_ptr() in _token_host
    if token:
        host = _token_host.pop(host.data_ptr())
    elif host.device.type != "cpu":
        raise RuntimeError(
            "lethe.reload: no host copy for this token (its forward's "
            "offload did not run in this process, or the token was read "
            "twice)")
    stats["h2d_bytes"] += host.numel() * host.element_size()
    stats["h2d_copies"] += 1
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
    # A buffer a capture took stays its graph's; one of an eager run is
    # free again once this copy has read it.
    if token and not _capturing():
        _free_hosts.setdefault(_layout(host), []).append((host, done))
    return out


def _layout(t: torch.Tensor) -> tuple:
    return (tuple(t.size()), tuple(t.stride()), t.dtype)


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
        # Captured in the graphs, or run between them every step
        # (inductor's graph partition): IN_GRAPHS.
        unsafe = () if IN_GRAPHS else tuple(
            t for t in (getattr(torch.Tag, "cudagraph_unsafe", None),)
            if t is not None)
        lib = torch.library.Library("lethe", "DEF")
        lib.define("offload(Tensor x, bool token=False) -> Tensor",
                   tags=unsafe)
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

        def offload_fake(x, token=False):
            if token:
                return torch.empty((1,), dtype=torch.uint8, device=x.device)
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

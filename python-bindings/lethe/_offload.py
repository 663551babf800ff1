"""The offload runtime of the torch backend: asynchronous copies of saved
activations to pinned host memory and back, on side CUDA streams.

The partitioned graphs call these functions (they are FX call_function
targets, run by the eager boxed compilers):

    forward:   h = d2h_start(x)        after x's final forward write
               host = host_of(h)       saved for the backward instead of x
               release(h)              at Lethe's release point
    backward:  p = h2d_start(host, device)   at Lethe's prefetch point
               x = h2d_wait(p)               before x's first backward use

Ordering, with the semantics of CUDA events:
- d2h_start makes the D2H stream wait for the compute stream (x is
  complete), copies into a pinned buffer there and records `done`;
- release makes the compute stream wait for `done` and drops the handle's
  reference to x: the caching allocator may hand x's block to later compute
  work only after the copy has read it. Until then the handle keeps x alive.
- h2d_start allocates the device buffer on the compute stream, makes the H2D
  stream wait for the compute stream (the buffer's previous users are done,
  and so is every D2H, since the forward's releases waited for them) and
  copies there, recording `done`;
- h2d_wait makes the compute stream wait for `done`.
Pinned buffers come from PyTorch's caching host allocator, which keeps a
block in use until the copies that read or wrote it have completed.
For tensors not on a CUDA device the copies are synchronous clones: that is
how the CPU tests exercise the offload graphs (`offload=True`).
"""

import torch

__all__ = ["d2h_start", "host_of", "release", "h2d_start", "h2d_wait",
           "stats"]

_streams = {}  # device index -> (d2h stream, h2d stream)

# Bytes copied each way since the process started (for tests and benches).
stats = {"d2h_bytes": 0, "h2d_bytes": 0, "d2h_copies": 0, "h2d_copies": 0}


def _side_streams(device):
    index = device.index if device.index is not None \
        else torch.cuda.current_device()
    if index not in _streams:
        _streams[index] = (torch.cuda.Stream(index), torch.cuda.Stream(index))
    return _streams[index]


def _empty_like_strided(t, device, pin_memory=False):
    """A dense buffer with `t`'s dimension order: `t`'s own strides where it
    is dense (a transposed attention output, say), so that the views the
    backward re-derives from the copy (a transpose then a view) stay valid.
    (torch 2.x tensors have no public is_non_overlapping_and_dense.)"""
    return torch.empty_strided(t.size(), _dense_strides_in_order(t),
                               dtype=t.dtype, device=device,
                               pin_memory=pin_memory)


def _dense_strides_in_order(t):
    """Dense strides whose dimension order (outermost first) is `t`'s."""
    order = sorted(range(t.dim()),
                   key=lambda d: (t.stride(d), t.size(d)), reverse=True)
    strides = [0] * t.dim()
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(t.size(d), 1)
    return tuple(strides)


class _Offloaded:
    """A D2H copy in flight: keeps the device tensor until `release`."""

    __slots__ = ("device_tensor", "host", "done")

    def __init__(self, device_tensor, host, done):
        self.device_tensor = device_tensor
        self.host = host
        self.done = done


class _Prefetched:
    __slots__ = ("device_tensor", "done")

    def __init__(self, device_tensor, done):
        self.device_tensor = device_tensor
        self.done = done


def d2h_start(x):
    """Starts copying `x` to a pinned host buffer on the D2H stream."""
    stats["d2h_bytes"] += x.numel() * x.element_size()
    stats["d2h_copies"] += 1
    if x.device.type != "cuda":  # synchronous stand-in (tests on CPU)
        return _Offloaded(x, _empty_like_strided(x, "cpu").copy_(x), None)
    d2h, _ = _side_streams(x.device)
    compute = torch.cuda.current_stream(x.device)
    host = _empty_like_strided(x, "cpu", pin_memory=True)
    d2h.wait_stream(compute)
    with torch.cuda.stream(d2h):
        host.copy_(x, non_blocking=True)
        done = torch.cuda.Event()
        done.record(d2h)
    return _Offloaded(x, host, done)


def host_of(handle):
    return handle.host


def release(handle):
    """Frees the device copy once the D2H copy has read it."""
    if handle.done is not None:
        torch.cuda.current_stream(handle.device_tensor.device).wait_event(
            handle.done)
    handle.device_tensor = None


def h2d_start(host, device):
    """Starts copying `host` back to `device` on the H2D stream."""
    device = torch.device(device)
    stats["h2d_bytes"] += host.numel() * host.element_size()
    stats["h2d_copies"] += 1
    if device.type != "cuda":
        return _Prefetched(_empty_like_strided(host, device).copy_(host), None)
    _, h2d = _side_streams(device)
    compute = torch.cuda.current_stream(device)
    out = _empty_like_strided(host, device)  # in the compute stream's pool
    h2d.wait_stream(compute)
    with torch.cuda.stream(h2d):
        out.copy_(host, non_blocking=True)
        done = torch.cuda.Event()
        done.record(h2d)
    return _Prefetched(out, done)


def h2d_wait(handle):
    """The prefetched tensor, once its copy is complete (on the device)."""
    out = handle.device_tensor
    if handle.done is not None:
        torch.cuda.current_stream(out.device).wait_event(handle.done)
    handle.device_tensor = None
    return out

"""The fusions and the order inductor may choose under a Lethe plan.

Lethe's plan says when each value of the step is made and when it dies;
inductor's fusion may join two kernels that the plan puts far apart, and
the joined kernel runs at the earlier one's time: the later one's outputs
(and what it reads) then live from there on. Under a plan that binds (one
that recomputes or offloads), guard_horizontal and guard_vertical, around
the fusion checks of inductor's heuristics class (`InductorChoices`),
refuse two kinds, each measured:

- **horizontal** (two consumers of a shared read, except inductor's
  mix-order reductions): none further apart than
  MAX_HORIZONTAL_FUSION_DISTANCE;
- **vertical** (a producer and a consumer far after it): none whose kernel
  would span more than MAX_VERTICAL_FUSION_DISTANCE nodes.

The order is the plan's too: min-cut puts each recomputation right before
its first use, and inductor's peak-memory pass keeps that order instead of
choosing among its own topological sorts by its estimate
(`keep_planned_order`).

Whether the compile runs under a binding plan is read from inductor's
config: its `custom_partitioner_fn` is the Lethe partitioner that has
partitioned the graph being compiled, and says so (`plan_binds`).
Inductor compiles the forward right after the partition and the backward
then or lazily, at the first backward (on CUDA in autograd's device
thread), with its config patches applied again either way. Without a
binding plan every choice is inductor's own, as plain compile's.
`install_fusion_guard` (called by the partitioner) puts the guards in
place, once per process and for every thread.
"""

from __future__ import annotations

from typing import Any, Callable

# Why no far horizontal fusion under a plan: it joins consumers far apart in
# the step, e.g. the norms' weight-gradient reductions of two layers that
# both read the recomputed residual stream: the earlier one waits for the
# later one and keeps its inputs alive past the plan's last use. Inductor's
# own guard (`are_long_distant_nodes`) stops only nodes more than 64 apart.
# Measured, Lethe's least plan with and without it (then a config patch,
# score_fusion_memory_threshold = 2^62): Llama-8l on an H200 1.68 vs
# 2.10 GB (1.46 predicted) at the same 50.7 ms; ConvNeXt-T 0.94 vs 1.28 GB
# (0.87 predicted); a 4-layer Llama on CPU 90.6 vs 106.6 MB (84.8
# predicted) (bench/results/torch-inductor.md, 2026-11-28). The patch also
# held a plan that binds nothing, and inductor re-applies its options
# around each graph's compile, past the partitioner: BERT-base at plain
# compile's own peak ran 1.1-1.3% slower than plain compile.

# Scheduler nodes further apart than this in inductor's order are not fused
# as producer and consumer under a plan. Min-cut puts each recomputation
# right before its first use; where a recomputed value is read early (by
# another value's chain) and late (by its own layer's backward), fusing the
# late reader into it runs that reader at the start of the backward. On a
# 4-layer DiT on CPU, the least plan measured 97.1 MB with such fusions
# (layer 0's normalised q/k/v and MLP inputs made while layer 3's gradient
# was computed, and held to the end) and 66.2 MB without, for 67.3
# predicted; 32, 64 and 128 measured the same (2026-11-28). 64 is the
# distance inductor's own horizontal guard uses, and measured as it does:
# the span of the kernel the fusion would make (_apart). Measured from the
# producer's last node instead (until c19e67a), a chain fused link by link
# grew without bound: on an H200 (2026-11-28) a 2.0 GB plan of DiT-B/2
# measured 2.51 GB, one backward kernel re-making the residual stream and
# the modulated norms of layers 0 to 10 at layer 10 (37 outputs of 25 MB).
# A fused kernel spanning more than 64 positions runs far-apart work
# together; chains of adjacent ops stay within max_fusion_size (64) nodes.
# Not yet measured on a GPU; the CPU plans measure the same either way.
MAX_VERTICAL_FUSION_DISTANCE = 64

# Scheduler nodes further apart than this are not fused horizontally under
# a plan (inductor's own limit is 64). Near ones are: a norm's backward
# reads its input in several reductions, and refusing every horizontal
# fusion cost the CNNs time (H200, 2026-11-28, at compile-0.5's peak:
# ConvNeXt-T +9.2% and U-Net +4.8% over compile-0.5 with none allowed,
# -2.8% and -3.8% with no guard at all). The far ones are what broke plans
# (the RMSNorm weight-gradient reductions of neighbouring layers). Least
# plans on CPU (2026-11-28), measured with none / up to 8 / up to 16 apart
# allowed: a 4-layer Llama 20.2 / 20.2 / 21.4 MB for 20.2 predicted, a
# 4-layer DiT 66.2 / 60.8 / 68.8 MB for 67.3.
MAX_HORIZONTAL_FUSION_DISTANCE = 8


# The guards, each of which a partitioner may turn off
# (`LethePartitioner(fusion_guards=...)`), to measure what it is worth.
GUARDS = ("horizontal", "vertical", "order")


def planned_compile(guard: str) -> bool:
    """Whether the graph inductor is compiling runs under a Lethe plan that
    binds (its config's partitioner says so: `plan_binds`) and that
    partitioner holds `guard` (one of GUARDS)."""
    from torch._inductor import config
    partitioner = getattr(config, "custom_partitioner_fn", None)
    return bool(getattr(partitioner, "plan_binds", False)) and \
        guard in getattr(partitioner, "fusion_guards", GUARDS)


def _apart(node1: Any, node2: Any) -> int:
    """How far apart two scheduler nodes lie, as inductor's own horizontal
    limit (`are_long_distant_nodes`) measures it: the span, in inductor's
    original order, of the kernel that fusing them would make (`min_order` /
    `max_order`; a fused node spans all of its nodes)."""
    return max(abs(node1.min_order - node2.max_order),
               abs(node2.min_order - node1.max_order))


def guard_vertical(inner: Callable[..., bool]) -> Callable[..., bool]:
    """Inductor's `can_fuse_vertical` (a static method of its heuristics,
    `InductorChoices`) that, in a planned compile, refuses a producer and
    a consumer whose fused kernel would span more than
    MAX_VERTICAL_FUSION_DISTANCE scheduler nodes."""
    if getattr(inner, "_lethe_guard", False):
        return inner

    def can_fuse_vertical(scheduler: Any, node1: Any, node2: Any,
                          shared_data_score: int) -> bool:
        if planned_compile("vertical") and \
                _apart(node1, node2) > MAX_VERTICAL_FUSION_DISTANCE:
            from torch._inductor.scheduler import WhyNoFuse
            WhyNoFuse(node1, node2)(
                "Lethe: the fused kernel would span %d nodes",
                _apart(node1, node2))
            return False
        return inner(scheduler, node1, node2, shared_data_score)
    can_fuse_vertical._lethe_guard = True  # type: ignore[attr-defined]
    return can_fuse_vertical


def guard_horizontal(inner: Callable[..., bool]) -> Callable[..., bool]:
    """Inductor's `can_fuse_horizontal` that, in a planned compile, fuses no
    two consumers of a shared read more than MAX_HORIZONTAL_FUSION_DISTANCE
    apart, but inductor's mix-order reductions."""
    if getattr(inner, "_lethe_guard", False):
        return inner

    def can_fuse_horizontal(scheduler: Any, node1: Any, node2: Any,
                            shared_data_score: int) -> bool:
        if planned_compile("horizontal") and \
                _apart(node1, node2) > MAX_HORIZONTAL_FUSION_DISTANCE:
            from torch._inductor import scheduler as inductor_scheduler
            mix = getattr(inductor_scheduler, "MixOrderReduction", None)
            if mix is None or not mix.can_fuse(node1, node2):
                inductor_scheduler.WhyNoFuse(node1, node2)(
                    "Lethe: %d nodes apart", _apart(node1, node2))
                return False
        return inner(scheduler, node1, node2, shared_data_score)
    can_fuse_horizontal._lethe_guard = True  # type: ignore[attr-defined]
    return can_fuse_horizontal


def keep_planned_order(reorder: Callable[..., Any]) -> Callable[..., Any]:
    """Inductor's peak-memory pass (`memory.reorder_for_peak_memory`) that,
    in a planned compile, weighs only the order it is given: the pass
    picks the least of its estimated peaks over that order and three
    topological sorts of its own, and its estimate does not see what the
    plan counts: e.g. its least-peak-first sort runs a node whose output
    outlives the step (a weight gradient) as late as it can, and so holds
    its inputs. Not yet shown to matter on its own: the early
    recomputations and late weight gradients of DiT-B/2 on an H200
    (2026-11-28), first put down to this pass, came from a fusion the
    guards did not see (install_fusion_guard). The pass still runs (it
    sets what the generated code frees)."""
    if getattr(reorder, "_lethe_planned_order", False):
        return reorder

    def reorder_for_peak_memory(nodes, *args, **kwargs):
        if planned_compile("order"):
            kwargs["methods"] = []
        return reorder(nodes, *args, **kwargs)
    reorder_for_peak_memory._lethe_planned_order = True  # type: ignore
    return reorder_for_peak_memory


def install_fusion_guard() -> bool:
    """Puts the guards in place, once per process: guard_vertical and
    guard_horizontal around the static methods of inductor's heuristics
    class (`InductorChoices`), and keep_planned_order around its
    peak-memory pass. Both are module- and class-level, so they hold in
    every thread: on CUDA, autograd compiles the backward lazily in its
    device thread, where a handler set with `V.set_choices_handler` (a
    thread-local) was not seen (2026-11-28, DiT-B/2 on an H200: the
    backward fused the modulation-gradient reductions of four layers
    into one kernel, whose inputs pulled the rest of the backward ahead
    of eight layers' weight gradients: 3.57 GB measured for 0.93 GB
    planned). Returns whether the guards reach the handler the scheduler
    asks in this thread (False: a handler of its own that does not derive
    from InductorChoices, or a torch without these hooks)."""
    try:
        from torch._inductor import memory
        from torch._inductor.choices import InductorChoices
        from torch._inductor.virtualized import V
    except ImportError:
        return False
    if not (hasattr(InductorChoices, "can_fuse_vertical")
            and hasattr(InductorChoices, "can_fuse_horizontal")):
        return False  # a torch whose heuristics have no such hooks
    if hasattr(memory, "reorder_for_peak_memory"):
        # The scheduler imports it from the module when it runs the pass.
        memory.reorder_for_peak_memory = keep_planned_order(
            memory.reorder_for_peak_memory)
    InductorChoices.can_fuse_vertical = staticmethod(  # type: ignore
        guard_vertical(InductorChoices.can_fuse_vertical))
    InductorChoices.can_fuse_horizontal = staticmethod(  # type: ignore
        guard_horizontal(InductorChoices.can_fuse_horizontal))
    return isinstance(V.choices, InductorChoices)

// RUN: lethe-opt %s --lethe-plan='policy=auto budget=50% device=%S/Inputs/plan-shared-host.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALONE
// RUN: sed 's/lethe.ranks_per_host = 1/lethe.ranks_per_host = 2/' %s | \
// RUN:   lethe-opt --lethe-plan='policy=auto budget=50% device=%S/Inputs/plan-shared-host.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark -o /dev/null 2>&1 | FileCheck %s --check-prefix=SHARED

// The planner places copies by the rates the simulator will give them
// (lethe::plannedCopyCosts), including the rank's share of the host: the
// step of plan-auto.mlir (three layers; the backward reads u, v and h of
// each) planned at half its unplanned peak on a device whose host reaches,
// all GPUs together, what one GPU's link does (Inputs/plan-shared-host.json:
// 100 GB/s each way per GPU, host_d2h = host_h2d = 100, host_both = 200).
//
// One rank on the host (lethe.ranks_per_host = 1, first RUN line): an 8 MiB
// copy takes 83.89 us and hides behind compute, as in plan-auto.mlir: auto
// offloads u and v of the first two layers and h1, for no slowdown.
// ALONE: offloaded: frees 8.00 MiB from node 2 (aten.mm.default) to node 19 (aten.add.Tensor); 83.89 us copy each way, hidden behind compute
// ALONE: offloaded: frees 8.00 MiB from node 4 (aten.mm.default) to node 17 (aten.gelu_backward); 83.89 us copy each way, hidden behind compute
// ALONE: offloaded: frees 2.00 MiB from node 7 (aten.add.Tensor) to node 15 (aten.add.Tensor); 20.97 us copy each way
// ALONE: offloaded: frees 8.00 MiB from node 6 (aten.mm.default) to node 15 (aten.add.Tensor); 83.89 us copy each way
// ALONE: offloaded: frees 8.00 MiB from node 8 (aten.mm.default) to node 13 (aten.gelu_backward); 83.89 us copy each way
// ALONE: step 1920.0 us (+0.00%)
//
// Two ranks of one host copying at once (= 2, second RUN line: what
// lethe-insert-fsdp-collectives and lethe-expand-pipeline-schedule record
// for two ranks on one host): each gets 100 / 2 = 50 GB/s, an 8 MiB copy
// takes 167.77 us; auto offloads u0, h1, u1 and v1 (a copy-time trade:
// 5.5 us of its copies exposed) and recomputes v0 (10 us): +0.81%
// (recomputing v0 and v1, as it did before trades competed with
// recomputes, is +1.04%). Before
// the planner placed copies by these rates it placed them by the lone
// 100 GB/s: the same five offloads as one rank, released and prefetched
// for 83.89 us copies, which the simulation (that shares the host) found
// exposed: 2203.0 us, +14.74%.
// SHARED: offloaded: frees 8.00 MiB from node 4 (aten.mm.default) to node 17 (aten.gelu_backward); 167.77 us copy each way, hidden behind compute; recompute would cost 100.00 us
// SHARED: recomputed: frees 8.00 MiB from node 2 (aten.mm.default) to node 20 (aten.mm_backward) for 10.00 us of re-run (1 node); offload would not hide its copies at the peak
// SHARED: offloaded: frees 2.00 MiB from node 7 (aten.add.Tensor) to node 15 (aten.add.Tensor); 41.94 us copy each way
// SHARED: offloaded: frees 8.00 MiB from node 8 (aten.mm.default) to node 15 (aten.add.Tensor); 167.77 us copy each way
// SHARED: offloaded: frees 8.00 MiB from node 11 (aten.add.Tensor) to node 13 (aten.gelu_backward); 167.77 us copy each way, about 5.54 us of it exposed
// SHARED: step 1935.5 us (+0.81%)

!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %w1_2: !w1 {lethe.kind = "param"},
                %w2_2: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2, !w1, !w2) attributes {lethe.ranks_per_host = 1 : i64} {
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, !w1) -> !a
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  %u1 = lethe.node "aten.mm.default" fwd (%h1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, !w1) -> !a
  %v1 = lethe.node "aten.gelu.default" fwd (%u1) {scope = "model.h.1", time_us = 10.0 : f64} : (!a) -> !a
  %o1 = lethe.node "aten.mm.default" fwd (%v1, %w2_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!a, !w2) -> !h
  %h2 = lethe.node "aten.add.Tensor" fwd (%h1, %o1) {scope = "model.h.1", time_us = 5.0 : f64} : (!h, !h) -> !h
  %u2 = lethe.node "aten.mm.default" fwd (%h2, %w1_2) {scope = "model.h.2", time_us = 100.0 : f64} : (!h, !w1) -> !a
  %v2 = lethe.node "aten.gelu.default" fwd (%u2) {scope = "model.h.2", time_us = 10.0 : f64} : (!a) -> !a
  %o2 = lethe.node "aten.mm.default" fwd (%v2, %w2_2) {scope = "model.h.2", time_us = 100.0 : f64} : (!a, !w2) -> !h
  %h3 = lethe.node "aten.add.Tensor" fwd (%h2, %o2) {scope = "model.h.2", time_us = 5.0 : f64} : (!h, !h) -> !h
  %d2:2 = lethe.node "aten.mm_backward" bwd (%seed, %v2, %w2_2) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %g2 = lethe.node "aten.gelu_backward" bwd (%d2#0, %u2) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e2:2 = lethe.node "aten.mm_backward" bwd (%g2, %h2, %w1_2) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %s2 = lethe.node "aten.add.Tensor" bwd (%seed, %e2#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  %d1:2 = lethe.node "aten.mm_backward" bwd (%s2, %v1, %w2_1) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %g1 = lethe.node "aten.gelu_backward" bwd (%d1#0, %u1) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e1:2 = lethe.node "aten.mm_backward" bwd (%g1, %h1, %w1_1) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %s1 = lethe.node "aten.add.Tensor" bwd (%s2, %e1#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  %d0:2 = lethe.node "aten.mm_backward" bwd (%s1, %v0, %w2_0) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %g0 = lethe.node "aten.gelu_backward" bwd (%d0#0, %u0) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e0:2 = lethe.node "aten.mm_backward" bwd (%g0, %x, %w1_0) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %s0 = lethe.node "aten.add.Tensor" bwd (%s1, %e0#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  return %e2#1, %d2#1, %e1#1, %d1#1, %e0#1, %d0#1 : !w1, !w2, !w1, !w2, !w1, !w2
}

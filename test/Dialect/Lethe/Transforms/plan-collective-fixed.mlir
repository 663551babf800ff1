// RUN: lethe-opt %s --lethe-annotate-costs='device=%S/Inputs/plan-collectives.json' \
// RUN:   --lethe-plan='policy=auto budget=50% device=%S/Inputs/plan-collectives.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark 2>&1 | FileCheck %s --check-prefix=BYTES
// RUN: sed 's/"collective_fixed_us": 0/"collective_fixed_us": 150/' %S/Inputs/plan-collectives.json > %t.json
// RUN: lethe-opt %s --lethe-annotate-costs='device=%t.json' \
// RUN:   --lethe-plan='policy=auto budget=50% device=%t.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark 2>&1 | FileCheck %s --check-prefix=FIXED

// A collective costs its profile's fixed cost (collective_fixed_us, what
// lethe-calibrate fits to the measured all-gather) on top of its bytes, and
// the planner sees it: the step of plan-auto.mlir whose weight gradients
// are reduce-scattered over 2 ranks as the backward produces them, planned
// at half its unplanned peak on a device whose copies and collectives
// contend (Inputs/plan-collectives.json: collectives x2 beside copies), so
// the planner simulates copies that pause while a collective runs.
//
// Bytes only (first RUN line): each reduce-scatter moves half of a 512 KiB
// gradient, 2.621 us at 100 GB/s, and the copies hardly pause: auto
// offloads as in plan-auto.mlir, for no slowdown.
// BYTES: offloaded: frees 8.00 MiB from node 2 (aten.mm.default) to node 23 (aten.add.Tensor); 83.89 us copy each way, hidden behind compute
// BYTES: offloaded: frees 8.00 MiB from node 4 (aten.mm.default) to node 20 (aten.gelu_backward); 83.89 us copy each way, hidden behind compute
// BYTES: step 1920.0 us (+0.00%)
// BYTES: lethe.collective reduce_scatter {{.*}}time_us = 2.621000e+00
//
// With collective_fixed_us 150 (second RUN line) each takes 152.621 us: the
// six of them hold the copy streams for 916 us of the backward, where the
// prefetches must run, and the last one ends 147.6 us after the compute
// (the unplanned step: 2067.6 us). The prefetches no longer hide: auto
// recomputes u and v of the first two layers instead (220 us), +10.64%.
// FIXED: recomputed: frees 8.00 MiB from node 1 (aten.gelu.default) to node 24 (aten.mm_backward) for 100.00 us of re-run (1 node)
// FIXED: recomputed: frees 8.00 MiB from node 2 (aten.mm.default) to node 24 (aten.mm_backward) for 10.00 us of re-run (1 node)
// FIXED: recomputed: frees 8.00 MiB from node 5 (aten.gelu.default) to node 18 (aten.mm_backward) for 100.00 us of re-run (1 node)
// FIXED: recomputed: frees 8.00 MiB from node 6 (aten.mm.default) to node 18 (aten.mm_backward) for 10.00 us of re-run (1 node)
// FIXED: step 2287.6 us (+10.64%)
// FIXED: lethe.collective reduce_scatter {{.*}}time_us = 1.526210e+02

!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>
!w1h = tensor<128x1024xbf16>
!w2h = tensor<512x256xbf16>

func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %w1_2: !w1 {lethe.kind = "param"},
                %w2_2: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1h, !w2h, !w1h, !w2h, !w1h, !w2h) {
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
  %rd2 = lethe.collective reduce_scatter %d2#1 group [0, 1] bwd : !w2 -> !w2h
  %g2 = lethe.node "aten.gelu_backward" bwd (%d2#0, %u2) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e2:2 = lethe.node "aten.mm_backward" bwd (%g2, %h2, %w1_2) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %re2 = lethe.collective reduce_scatter %e2#1 group [0, 1] bwd : !w1 -> !w1h
  %s2 = lethe.node "aten.add.Tensor" bwd (%seed, %e2#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  %d1:2 = lethe.node "aten.mm_backward" bwd (%s2, %v1, %w2_1) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %rd1 = lethe.collective reduce_scatter %d1#1 group [0, 1] bwd : !w2 -> !w2h
  %g1 = lethe.node "aten.gelu_backward" bwd (%d1#0, %u1) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e1:2 = lethe.node "aten.mm_backward" bwd (%g1, %h1, %w1_1) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %re1 = lethe.collective reduce_scatter %e1#1 group [0, 1] bwd : !w1 -> !w1h
  %s1 = lethe.node "aten.add.Tensor" bwd (%s2, %e1#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  %d0:2 = lethe.node "aten.mm_backward" bwd (%s1, %v0, %w2_0) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %rd0 = lethe.collective reduce_scatter %d0#1 group [0, 1] bwd : !w2 -> !w2h
  %g0 = lethe.node "aten.gelu_backward" bwd (%d0#0, %u0) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e0:2 = lethe.node "aten.mm_backward" bwd (%g0, %x, %w1_0) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %re0 = lethe.collective reduce_scatter %e0#1 group [0, 1] bwd : !w1 -> !w1h
  %s0 = lethe.node "aten.add.Tensor" bwd (%s1, %e0#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  return %re2, %rd2, %re1, %rd1, %re0, %rd0 : !w1h, !w2h, !w1h, !w2h, !w1h, !w2h
}

// RUN: lethe-opt %s --lethe-plan='policy=full device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %s

// Policy `full` checkpoints every layer, as torch.utils.checkpoint around
// each block does: inside a layer it recomputes every activation, and it
// keeps the activations a later layer reads (the layer's output, which is
// the next layer's input). Layers come from the nodes' `scope`
// (`model.h.0`, `model.h.1`).
//
// The step: two layers of
//   u = mm(h, w1)  [8 MiB];  v = gelu(u)  [8 MiB];  o = mm(v, w2);  h' = h + o
// then the backward in reverse order. The backward of a layer reads v, u
// and the layer input h: these are the activations, and each one gets a
// decision and a remark saying why. `lethe.placement` names nodes by their
// `lethe.node_id`; these nodes have none, so lethe-plan gives them 0, 1, ...
// in program order (the `// node N` comments), and prints them.
//
// The remarks are optimization remarks (category lethe-plan): they show
// with --remarks-filter=lethe-plan, and --remark-format=emitRemark prints
// them as diagnostics, which -verify-diagnostics checks.

!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

// Recomputing costs 2 x (100 + 10) us on a 1280 us step: +17.19%; the peak
// falls from 42.5 MiB to 27.5 MiB.
// CHECK-LABEL: func.func @step
// CHECK-SAME: lethe.plan = #lethe.plan<policy = full, budget_bytes = 9223372036854775807, feasible = true, peak_bytes = 28835840, baseline_peak_bytes = 44564480, step_us = 1.500000e+03, baseline_step_us = 1.280000e+03, overhead = 1.718750e-01>
// expected-remark @below {{policy full: peak 28835840 B, no budget (unplanned 44564480 B); step 1500.0 us (+17.19%)}}
func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2) {
  // node 0
  // u0 is re-created by re-running node 0. The chain of v0 (node 1) reads
  // u0, so u0 comes back where v0 does: before node 12, v0's first
  // backward use.
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>], lethe.node_id = 0 : i64, lethe.placement = [#lethe.placement<restore_before = 12, nodes = [0]>]
  // expected-remark @below {{recomputed (policy full): frees 8.00 MiB for 100.00 us of re-run}}
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 1
  // CHECK: lethe.node "aten.gelu.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>], lethe.node_id = 1 : i64, lethe.placement = [#lethe.placement<restore_before = 12, nodes = [1]>]
  // expected-remark @below {{recomputed (policy full): frees 8.00 MiB for 10.00 us of re-run}}
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  // node 2: o0 is not read by the backward, so it is no activation and
  // gets no decision.
  // CHECK: lethe.node "aten.mm.default" fwd
  // CHECK-NOT: lethe.decisions
  // CHECK-SAME: -> tensor<4096x256xbf16>
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 3
  // h1 is layer 0's output and layer 1's input: kept.
  // CHECK: lethe.node "aten.add.Tensor" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained (policy full): read by the next layer (a layer boundary)}}
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 4
  // Layer 1 is the last layer: its activations come back before node 8,
  // the first backward node.
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>], lethe.node_id = 4 : i64, lethe.placement = [#lethe.placement<restore_before = 8, nodes = [4]>]
  // expected-remark @below {{recomputed (policy full): frees 8.00 MiB for 100.00 us of re-run}}
  %u1 = lethe.node "aten.mm.default" fwd (%h1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 5
  // expected-remark @below {{recomputed (policy full): frees 8.00 MiB for 10.00 us of re-run}}
  %v1 = lethe.node "aten.gelu.default" fwd (%u1) {scope = "model.h.1", time_us = 10.0 : f64} : (!a) -> !a
  // node 6
  %o1 = lethe.node "aten.mm.default" fwd (%v1, %w2_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 7
  %h2 = lethe.node "aten.add.Tensor" fwd (%h1, %o1) {scope = "model.h.1", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 8
  %d1:2 = lethe.node "aten.mm_backward" bwd (%seed, %v1, %w2_1) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 9
  %g1 = lethe.node "aten.gelu_backward" bwd (%d1#0, %u1) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 10
  %e1:2 = lethe.node "aten.mm_backward" bwd (%g1, %h1, %w1_1) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  // node 11
  %s1 = lethe.node "aten.add.Tensor" bwd (%seed, %e1#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 12
  %d0:2 = lethe.node "aten.mm_backward" bwd (%s1, %v0, %w2_0) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 13
  %g0 = lethe.node "aten.gelu_backward" bwd (%d0#0, %u0) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 14
  %e0:2 = lethe.node "aten.mm_backward" bwd (%g0, %x, %w1_0) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  // node 15
  %s0 = lethe.node "aten.add.Tensor" bwd (%s1, %e0#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  return %e1#1, %d1#1, %e0#1, %d0#1 : !w1, !w2, !w1, !w2
}

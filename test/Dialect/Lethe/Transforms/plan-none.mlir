// RUN: lethe-opt %s --lethe-plan='policy=none device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %s

// Policy `none` keeps every activation: the unplanned step, as a baseline.
// The predicted numbers on the function are the simulator's: the peak is
// the lifetime analysis's (a storage lives from its producer to its last
// use through any alias), the step time the sum of the node times.
//
// The step: two layers of
//   u = mm(h, w1)  [8 MiB];  v = gelu(u)  [8 MiB];  o = mm(v, w2);  h' = h + o
// then the backward in reverse order, which reads v, u and h of each layer
// (the activations). Without a budget the module gets no lethe.budget_bytes.

// CHECK: module {
!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

// CHECK-LABEL: func.func @step
// CHECK-SAME: lethe.plan = #lethe.plan<policy = none, budget_bytes = 9223372036854775807, feasible = true, peak_bytes = 44564480, baseline_peak_bytes = 44564480, step_us = 1.280000e+03, baseline_step_us = 1.280000e+03, overhead = 0.000000e+00>
// expected-remark @below {{policy none: peak 44564480 B, no budget (unplanned 44564480 B); step 1280.0 us (+0.00%)}}
func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2) {
  // node 0
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // CHECK-NOT: lethe.placement
  // CHECK-SAME: scope = "model.h.0"
  // expected-remark @below {{retained (policy none)}}
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 1
  // expected-remark @below {{retained (policy none)}}
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  // node 2
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 3
  // expected-remark @below {{retained (policy none)}}
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 4
  // expected-remark @below {{retained (policy none)}}
  %u1 = lethe.node "aten.mm.default" fwd (%h1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 5
  // expected-remark @below {{retained (policy none)}}
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

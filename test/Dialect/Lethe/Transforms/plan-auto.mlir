// RUN: lethe-opt %s --lethe-plan='policy=auto budget=50% device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %s
// RUN: lethe-opt %s --lethe-plan='policy=auto budget=50% device=%S/Inputs/toy-profile.json' \
// RUN:   | FileCheck %s --check-prefix=SLOW

// Policy `auto` picks, per activation, retain, recompute or offload so that
// device memory stays within the budget at every instant (activations,
// recompute temporaries and prefetched copies all counted) at the least
// predicted step time. Here the budget is half the unplanned peak.
//
// The step: three layers of
//   u = mm(h, w1)  [8 MiB];  v = gelu(u)  [8 MiB];  o = mm(v, w2);  h' = h + o
// then the backward in reverse order, which reads v, u and h of each layer.
// Recomputing u costs 100 us, v 10 us; `full` would recompute all six for
// +17.19%.
//
// With 100 GB/s host copies (plan-device.json) an 8 MiB copy takes 83.9 us
// and the copies of the first two layers hide behind compute: auto offloads
// them and the step is not slower at all. The last layer's activations are
// read as soon as the backward starts, where the peak is, so dropping them
// would not help: they stay.
//
// With 10 GB/s copies (toy-profile.json, second RUN line) an 8 MiB copy
// takes 839 us and cannot hide: auto recomputes layers 0 and 1 instead and
// still offloads the 2 MiB layer input h1 (210 us, hidden), for +11.46%.

!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

// CHECK-LABEL: func.func @step
// CHECK-SAME: lethe.plan = #lethe.plan<policy = auto, budget_bytes = 31719424, feasible = true, peak_bytes = 30932992, baseline_peak_bytes = 63438848, step_us = 1.920000e+03, baseline_step_us = 1.920000e+03, overhead = 0.000000e+00>
// SLOW-LABEL: func.func @step
// SLOW-SAME: lethe.plan = #lethe.plan<policy = auto, {{.*}}, peak_bytes = 30932992, {{.*}}, overhead = 1.145830e-01>
// expected-remark @below {{policy auto: peak 30932992 B, budget 31719424 B (unplanned 63438848 B); step 1920.0 us (+0.00%)}}
func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %w1_2: !w1 {lethe.kind = "param"},
                %w2_2: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2, !w1, !w2) {
  // node 0
  // CHECK: lethe.decisions = [#lethe<decision offload>]
  // SLOW: lethe.decisions = [#lethe<decision recompute>]
  // expected-remark @below {{offloaded: frees 8.00 MiB from node 2 (aten.mm.default) to node 19 (aten.add.Tensor); 83.89 us copy each way, hidden behind compute; recompute would cost 100.00 us}}
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 1
  // CHECK: lethe.decisions = [#lethe<decision offload>]
  // SLOW: lethe.decisions = [#lethe<decision recompute>]
  // expected-remark @below {{offloaded: frees 8.00 MiB from node 4 (aten.mm.default) to node 17 (aten.gelu_backward); 83.89 us copy each way, hidden behind compute; recompute would cost 10.00 us}}
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  // node 2
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 3
  // CHECK: lethe.decisions = [#lethe<decision offload>]
  // SLOW: lethe.decisions = [#lethe<decision offload>]
  // expected-remark @below {{offloaded: frees 2.00 MiB from node 7 (aten.add.Tensor) to node 15 (aten.add.Tensor); 20.97 us copy each way, hidden behind compute; recompute would cost 105.00 us}}
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 4
  // CHECK: lethe.decisions = [#lethe<decision offload>]
  // SLOW: lethe.decisions = [#lethe<decision recompute>]
  // expected-remark @below {{offloaded: frees 8.00 MiB from node 6 (aten.mm.default) to node 15 (aten.add.Tensor); 83.89 us copy each way, hidden behind compute; recompute would cost 100.00 us}}
  %u1 = lethe.node "aten.mm.default" fwd (%h1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 5
  // CHECK: lethe.decisions = [#lethe<decision offload>]
  // SLOW: lethe.decisions = [#lethe<decision recompute>]
  // expected-remark @below {{offloaded: frees 8.00 MiB from node 8 (aten.mm.default) to node 13 (aten.gelu_backward); 83.89 us copy each way, hidden behind compute; recompute would cost 10.00 us}}
  %v1 = lethe.node "aten.gelu.default" fwd (%u1) {scope = "model.h.1", time_us = 10.0 : f64} : (!a) -> !a
  // node 6
  %o1 = lethe.node "aten.mm.default" fwd (%v1, %w2_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 7
  // CHECK: lethe.decisions = [#lethe<decision retain>]
  // SLOW: lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained: the budget holds without dropping it}}
  %h2 = lethe.node "aten.add.Tensor" fwd (%h1, %o1) {scope = "model.h.1", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 8
  // CHECK: lethe.decisions = [#lethe<decision retain>]
  // SLOW: lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained: the budget holds without dropping it}}
  %u2 = lethe.node "aten.mm.default" fwd (%h2, %w1_2) {scope = "model.h.2", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 9
  // CHECK: lethe.decisions = [#lethe<decision retain>]
  // SLOW: lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained: the budget holds without dropping it}}
  %v2 = lethe.node "aten.gelu.default" fwd (%u2) {scope = "model.h.2", time_us = 10.0 : f64} : (!a) -> !a
  // node 10
  %o2 = lethe.node "aten.mm.default" fwd (%v2, %w2_2) {scope = "model.h.2", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 11
  %h3 = lethe.node "aten.add.Tensor" fwd (%h2, %o2) {scope = "model.h.2", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 12
  %d2:2 = lethe.node "aten.mm_backward" bwd (%seed, %v2, %w2_2) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 13
  %g2 = lethe.node "aten.gelu_backward" bwd (%d2#0, %u2) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 14
  %e2:2 = lethe.node "aten.mm_backward" bwd (%g2, %h2, %w1_2) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  // node 15
  %s2 = lethe.node "aten.add.Tensor" bwd (%seed, %e2#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 16
  %d1:2 = lethe.node "aten.mm_backward" bwd (%s2, %v1, %w2_1) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 17
  %g1 = lethe.node "aten.gelu_backward" bwd (%d1#0, %u1) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 18
  %e1:2 = lethe.node "aten.mm_backward" bwd (%g1, %h1, %w1_1) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  // node 19
  %s1 = lethe.node "aten.add.Tensor" bwd (%s2, %e1#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 20
  %d0:2 = lethe.node "aten.mm_backward" bwd (%s1, %v0, %w2_0) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 21
  %g0 = lethe.node "aten.gelu_backward" bwd (%d0#0, %u0) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 22
  %e0:2 = lethe.node "aten.mm_backward" bwd (%g0, %x, %w1_0) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  // node 23
  %s0 = lethe.node "aten.add.Tensor" bwd (%s1, %e0#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  return %e2#1, %d2#1, %e1#1, %d1#1, %e0#1, %d0#1 : !w1, !w2, !w1, !w2, !w1, !w2
}

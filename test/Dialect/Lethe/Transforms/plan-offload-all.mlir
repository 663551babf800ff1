// RUN: lethe-opt %s --lethe-plan='policy=offload-all min-offload-bytes=4MiB device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %s

// Policy `offload-all` is TransformerEngine's CPU offloading: every
// activation that may go to host does. Storages smaller than
// `min-offload-bytes` (here 4 MiB: the 2 MiB layer input h1) stay. Each
// offloaded storage is copied to host (D2H) after its producer, released
// after node `release_after` once the copy is done, and prefetched (H2D)
// after node `prefetch_after`, as late as the H2D queue allows, to be back
// before node `restore_before`.
//
// The device profile copies 100 GB/s each way: 8 MiB take 83.9 us, more
// than the windows this small step offers for four 8 MiB copies, so some
// copy time shows in the step (+10.68%).
//
// The step: two layers of
//   u = mm(h, w1)  [8 MiB];  v = gelu(u)  [8 MiB];  o = mm(v, w2);  h' = h + o
// then the backward in reverse order, which reads v, u and h of each layer.

!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

// CHECK-LABEL: func.func @step
// CHECK-SAME: policy = "offload-all"
// expected-remark @below {{policy offload-all: peak 28835840 B, no budget (unplanned 44564480 B); step 1416.7 us (+10.68%)}}
func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2) {
  // node 0
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision offload>], lethe.node_id = 0 : i64, lethe.placement = [#lethe.placement<restore_before = 13, release_after = {{[0-9]+}}, prefetch_after = {{[0-9]+}}, nodes = []>]
  // expected-remark @below {{offloaded (policy offload-all): frees 8.00 MiB}}
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 1
  // expected-remark @below {{offloaded (policy offload-all): frees 8.00 MiB}}
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  // node 2
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 3
  // CHECK: lethe.node "aten.add.Tensor" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained (policy offload-all): cannot be offloaded: smaller than the offload threshold (4 MiB)}}
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 4
  // expected-remark @below {{offloaded (policy offload-all): frees 8.00 MiB}}
  %u1 = lethe.node "aten.mm.default" fwd (%h1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 5
  // expected-remark @below {{offloaded (policy offload-all): frees 8.00 MiB}}
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

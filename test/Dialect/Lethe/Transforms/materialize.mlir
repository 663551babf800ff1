// RUN: lethe-opt %s -split-input-file --lethe-materialize \
// RUN:   --remarks-filter=lethe-materialize --remark-format=emitRemark -verify-diagnostics | FileCheck %s
// RUN: lethe-opt %s -split-input-file --lethe-materialize --lethe-verify=allocated=false -o /dev/null
// RUN: lethe-opt %s -split-input-file --lethe-materialize --lethe-schedule --lethe-assign-buffers --lethe-verify -o /dev/null

// Decisions as lethe-plan records them (one entry per result): %0 is
// offloaded (placed by the device profile, as no placement is given) and
// %1 recomputed from it.

// CHECK-LABEL: func.func @offload_and_recompute
// expected-remark @+1 {{materialized 2 decisions: 1 recompute regions re-running 1 nodes, 1 offloads, 1 prefetches, 8 releases}}
func.func @offload_and_recompute(%x: tensor<512x512xf32> {lethe.kind = "input"}, %w: tensor<512x512xf32> {lethe.kind = "param"}) -> tensor<512x512xf32> {
  // CHECK: %[[A:.*]] = lethe.node "aten.mm.default" fwd
  // CHECK-NOT: lethe.decisions
  // The D2H copy starts once the producer is done.
  // CHECK-NEXT: %[[B0:.*]] = lethe.barrier
  // CHECK-NEXT: %[[H:.*]], %[[D:.*]] = lethe.offload %[[A]] await(%[[B0]])
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.decisions = [#lethe<decision offload>]} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  // CHECK-NEXT: %[[G:.*]] = lethe.node "aten.gelu.default" fwd (%[[A]])
  %1 = lethe.node "aten.gelu.default" fwd (%0) {time_us = 20.0 : f64, lethe.decisions = [#lethe<decision recompute>]} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  // CHECK-NEXT: %[[M:.*]] = lethe.node "aten.mm.default" fwd (%[[G]], %{{.*}})
  // The recomputed activation is dropped after its last forward use.
  // CHECK-NEXT: lethe.release %[[G]]
  // The device buffer is freed after the first op predicted to end once it
  // is copied: its 1 MiB take 19.0 us at h200's 55.1 GB/s plus the copy's
  // fixed 2.61 us, longer than the 20 us gelu, so after this mm.
  // CHECK-NEXT: lethe.release %[[A]] await(%[[D]])
  %2 = lethe.node "aten.mm.default" fwd (%1, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  // The H2D copy is issued as late as it stays hidden: after the mm.
  // CHECK-NEXT: %[[B1:.*]] = lethe.barrier
  // CHECK-NEXT: %[[J:.*]] = lethe.join %[[D]], %[[B1]]
  // CHECK-NEXT: %[[P:.*]], %[[PD:.*]] = lethe.prefetch %[[H]] await(%[[J]])
  // CHECK-NEXT: %[[GB:.*]] = lethe.node "aten.mm.default" bwd (%[[M]], %{{.*}})
  // CHECK-NEXT: lethe.release %[[M]]
  %3 = lethe.node "aten.mm.default" bwd (%2, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  // The backward reads the prefetched value through an await.
  // CHECK-NEXT: %[[Z:.*]] = lethe.await %[[PD]] => %[[P]]
  // CHECK-NEXT: lethe.release %[[H]] await(%[[PD]])
  // CHECK-NEXT: %[[GG:.*]] = lethe.node "aten.gelu_backward.default" bwd (%[[GB]], %[[Z]])
  %4 = lethe.node "aten.gelu_backward.default" bwd (%3, %0) {time_us = 20.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  // The recompute region re-runs gelu on the prefetched value, releasing
  // it inside after its last use.
  // CHECK-NEXT: lethe.release %[[GB]]
  // CHECK-NEXT: %[[R:.*]] = lethe.recompute : tensor<512x512xf32> {
  // CHECK-NEXT:   %[[RG:.*]] = lethe.node "aten.gelu.default" fwd (%[[Z]])
  // CHECK-NEXT:   lethe.release %[[Z]]
  // CHECK-NEXT:   lethe.yield %[[RG]]
  // CHECK-NEXT: }
  // CHECK-NEXT: %[[OUT:.*]] = lethe.node "aten.mm.default" bwd (%[[GG]], %[[R]])
  // CHECK-NEXT: lethe.release %[[GG]]
  // CHECK-NEXT: lethe.release %[[R]]
  %5 = lethe.node "aten.mm.default" bwd (%4, %1) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  // The step ends once every stream is done.
  // CHECK-NEXT: lethe.await %[[D]], %[[PD]]
  // CHECK-NEXT: return %[[OUT]]
  return %5 : tensor<512x512xf32>
}

// -----

// With a placement, the plan's own points are kept: the prefetch is issued
// right after node 40 (the forward mm, by its `lethe.node_id`) here, as
// early as possible.
// CHECK-LABEL: func.func @placed
// expected-remark @+1 {{materialized 1 decisions: 0 recompute regions re-running 0 nodes, 1 offloads, 1 prefetches, 5 releases}}
func.func @placed(%x: tensor<512x512xf32>, %w: tensor<512x512xf32>) -> tensor<512x512xf32> {
  // CHECK: lethe.offload
  // CHECK-NEXT: lethe.release {{.*}} await
  // CHECK-NEXT: lethe.barrier
  // CHECK-NEXT: lethe.join
  // CHECK-NEXT: lethe.prefetch
  // CHECK-NEXT: lethe.node "aten.gelu.default"
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.node_id = 40, lethe.decisions = [#lethe<decision offload>], lethe.placement = [#lethe.placement<restore_before = 43, release_after = 40, prefetch_after = 40, nodes = []>]} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %1 = lethe.node "aten.gelu.default" fwd (%x) {time_us = 20.0 : f64, lethe.node_id = 41} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = lethe.node "aten.mm.default" bwd (%1, %w) {time_us = 100.0 : f64, lethe.node_id = 42} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %0) {time_us = 100.0 : f64, lethe.node_id = 43} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %3 : tensor<512x512xf32>
}

// -----

// The same plan on the same nodes listed in another order (the gelu first):
// the placement names nodes by `lethe.node_id`, not by position, so the
// offload still follows the mm (id 40), is released there and prefetched
// right after it. Read by position, the placement would name no node
// (ids 40 and 43 of a 4-node function).
// CHECK-LABEL: func.func @placed_reordered
// expected-remark @+1 {{materialized 1 decisions: 0 recompute regions re-running 0 nodes, 1 offloads, 1 prefetches, 5 releases}}
func.func @placed_reordered(%x: tensor<512x512xf32>, %w: tensor<512x512xf32>) -> tensor<512x512xf32> {
  // CHECK: lethe.node "aten.gelu.default"
  // CHECK-NEXT: lethe.node "aten.mm.default" fwd
  // CHECK-NEXT: lethe.barrier
  // CHECK-NEXT: lethe.offload
  // CHECK-NEXT: lethe.release {{.*}} await
  // CHECK-NEXT: lethe.barrier
  // CHECK-NEXT: lethe.join
  // CHECK-NEXT: lethe.prefetch
  // CHECK-NEXT: lethe.node "aten.mm.default" bwd
  %1 = lethe.node "aten.gelu.default" fwd (%x) {time_us = 20.0 : f64, lethe.node_id = 41} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.node_id = 40, lethe.decisions = [#lethe<decision offload>], lethe.placement = [#lethe.placement<restore_before = 43, release_after = 40, prefetch_after = 40, nodes = []>]} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = lethe.node "aten.mm.default" bwd (%1, %w) {time_us = 100.0 : f64, lethe.node_id = 42} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %0) {time_us = 100.0 : f64, lethe.node_id = 43} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %3 : tensor<512x512xf32>
}

// -----

// Without decisions the program is the unplanned step with its releases;
// views allocate nothing and are not released, their storage is.
// CHECK-LABEL: func.func @unplanned
// expected-remark @+1 {{materialized 0 decisions: 0 recompute regions re-running 0 nodes, 0 offloads, 0 prefetches, 2 releases}}
func.func @unplanned(%x: tensor<16xf32>) -> tensor<16xf32> {
  // CHECK: %[[A:.*]] = lethe.node "aten.relu.default"
  // CHECK-NEXT: %[[V:.*]] = lethe.node "aten.view.default" fwd (%[[A]])
  // CHECK-NEXT: %[[B:.*]] = lethe.node "aten.neg.default" fwd (%[[V]])
  // CHECK-NEXT: lethe.release %[[A]]
  // CHECK-NEXT: %[[C:.*]] = lethe.node "aten.neg.default" bwd (%[[B]])
  // CHECK-NEXT: lethe.release %[[B]]
  // CHECK-NEXT: return %[[C]]
  %0 = lethe.node "aten.relu.default" fwd (%x) : (tensor<16xf32>) -> tensor<16xf32>
  %1 = lethe.node "aten.view.default" fwd (%0) {aliases = array<i64: 0>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %2 = lethe.node "aten.neg.default" fwd (%1) : (tensor<4x4xf32>) -> tensor<16xf32>
  %3 = lethe.node "aten.neg.default" bwd (%2) : (tensor<16xf32>) -> tensor<16xf32>
  return %3 : tensor<16xf32>
}

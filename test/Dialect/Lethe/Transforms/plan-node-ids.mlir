// RUN: lethe-opt %s --lethe-plan='policy=offload-all device=%S/Inputs/plan-device.json' | FileCheck %s
// RUN: lethe-opt %s --lethe-plan='policy=offload-all device=%S/Inputs/plan-device.json' --lethe-materialize \
// RUN:   --remarks-filter=lethe-materialize --remark-format=emitRemark -o /dev/null 2>&1 | FileCheck %s --check-prefix=MAT

// A plan names nodes by their `lethe.node_id`, never by their position:
// here the exported ids (30, 20, 10, 5) are not the positions (0 .. 4),
// and the node without an id gets one above the largest in use (31).
// lethe-materialize reads the placement back by the same ids.
//
// The step: u = mm(x, w) [4 MiB]; v = gelu(u); a loss node; then the
// backward reads u (gelu's backward) and x. u is the one activation, and
// offload-all sends it to host.

!t = tensor<1024x1024xf32>

// CHECK-LABEL: func.func @step
func.func @step(%x: !t, %w: !t {lethe.kind = "param"},
                %seed: !t {lethe.kind = "tangent"}) -> (!t, !t) {
  // Position 0, id 30: the offload is restored before node 10 (the gelu
  // backward, position 3); the copy is released and the prefetch issued
  // after node 31 (the last forward node, position 2).
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision offload>], lethe.node_id = 30 : i64, lethe.placement = [#lethe.placement<restore_before = 10, release_after = 31, prefetch_after = 31, nodes = []>]
  %u = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.node_id = 30} : (!t, !t) -> !t
  // CHECK: lethe.node "aten.gelu.default" fwd {{.*}}lethe.node_id = 20 : i64
  %v = lethe.node "aten.gelu.default" fwd (%u) {time_us = 10.0 : f64, lethe.node_id = 20} : (!t) -> !t
  // No id: lethe-plan gives it 31.
  // CHECK: lethe.node "aten.neg.default" fwd {{.*}}lethe.node_id = 31 : i64
  %l = lethe.node "aten.neg.default" fwd (%v) {time_us = 10.0 : f64} : (!t) -> !t
  // CHECK: lethe.node "aten.gelu_backward.default" bwd {{.*}}lethe.node_id = 10 : i64
  %g = lethe.node "aten.gelu_backward.default" bwd (%seed, %u) {time_us = 20.0 : f64, lethe.node_id = 10} : (!t, !t) -> !t
  // CHECK: lethe.node "aten.mm.default" bwd {{.*}}lethe.node_id = 5 : i64
  %d = lethe.node "aten.mm.default" bwd (%g, %x) {time_us = 100.0 : f64, lethe.node_id = 5} : (!t, !t) -> !t
  return %l, %d : !t, !t
}

// MAT: remark: [Analysis] materialized | Category:lethe-materialize | Function=step | Remark="materialized 1 decisions: 0 recompute regions re-running 0 nodes, 1 offloads, 1 prefetches

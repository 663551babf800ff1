// RUN: lethe-opt %s | lethe-opt | FileCheck %s
// RUN: lethe-opt %s --mlir-print-op-generic | lethe-opt | FileCheck %s

// Round trip of every lethe op and type, pretty and generic.

// CHECK-LABEL: func.func @graph
func.func @graph(%w: tensor<128x32xbf16>, %x: tensor<64x128xbf16>) -> tensor<64x32xbf16> {
  // CHECK: %[[MM:.*]] = lethe.node "aten.mm.default" fwd (%{{.*}}, %{{.*}}) {scope = "h.0.mlp", time_us = 1.250000e+01 : f64} : (tensor<64x128xbf16>, tensor<128x32xbf16>) -> tensor<64x32xbf16>
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 12.5 : f64, scope = "h.0.mlp"} : (tensor<64x128xbf16>, tensor<128x32xbf16>) -> tensor<64x32xbf16>
  // CHECK: lethe.node "aten.view.default" fwd (%[[MM]]) {aliases = array<i64: 0>} : (tensor<64x32xbf16>) -> tensor<2048xbf16>
  %1 = lethe.node "aten.view.default" fwd (%0) {aliases = array<i64: 0>} : (tensor<64x32xbf16>) -> tensor<2048xbf16>
  // CHECK: lethe.node "aten.native_layer_norm.default" bwd
  %2:2 = lethe.node "aten.native_layer_norm.default" bwd (%0) : (tensor<64x32xbf16>) -> (tensor<64x32xbf16>, tensor<64x1xf32>)
  // CHECK: lethe.node "aten.zeros.default" opt () : () -> tensor<4xf32>
  %3 = lethe.node "aten.zeros.default" opt () : () -> tensor<4xf32>
  return %2#0 : tensor<64x32xbf16>
}

// CHECK-LABEL: func.func @memory
func.func @memory(%x: tensor<8x1024xbf16>, %t0: !lethe.timepoint) -> tensor<8x1024xbf16> {
  // CHECK: %{{.*}}, %[[T1:.*]] = lethe.offload %{{.*}} : tensor<8x1024xbf16> -> !lethe.host<tensor<8x1024xbf16>>
  %h, %t1 = lethe.offload %x : tensor<8x1024xbf16> -> !lethe.host<tensor<8x1024xbf16>>
  // CHECK: lethe.offload %{{.*}} await(%{{.*}}) : tensor<8x1024xbf16> -> !lethe.host<tensor<8x1024xbf16>>
  %h2, %t2 = lethe.offload %x await(%t0) : tensor<8x1024xbf16> -> !lethe.host<tensor<8x1024xbf16>>
  // CHECK: lethe.release %{{.*}} await(%[[T1]]) : tensor<8x1024xbf16>
  lethe.release %x await(%t1) : tensor<8x1024xbf16>
  // CHECK: %[[B:.*]] = lethe.barrier{{$}}
  %b = lethe.barrier
  // CHECK: lethe.barrier {lethe.stream = #lethe<stream h2d>}
  %b2 = lethe.barrier {lethe.stream = #lethe<stream h2d>}
  // CHECK: %[[J:.*]] = lethe.join %{{.*}}, %{{.*}}
  %j = lethe.join %t1, %t2
  // CHECK: %[[D:.*]], %[[T3:.*]] = lethe.prefetch %{{.*}} await(%[[J]]) : !lethe.host<tensor<8x1024xbf16>> -> tensor<8x1024xbf16>
  %d, %t3 = lethe.prefetch %h await(%j) : !lethe.host<tensor<8x1024xbf16>> -> tensor<8x1024xbf16>
  // CHECK: %[[Y:.*]] = lethe.await %[[T3]] => %[[D]] : tensor<8x1024xbf16>
  %y = lethe.await %t3 => %d : tensor<8x1024xbf16>
  // CHECK: lethe.await %{{.*}}, %{{.*}}{{$}}
  lethe.await %t2, %t3
  // CHECK: lethe.release %{{.*}} : !lethe.host<tensor<8x1024xbf16>>
  lethe.release %h : !lethe.host<tensor<8x1024xbf16>>
  // CHECK: %[[R:.*]]:2 = lethe.recompute : tensor<8x1024xbf16>, tensor<8x1024xbf16> {
  // CHECK-NEXT: lethe.node "aten.gelu.default" bwd
  // CHECK-NEXT: lethe.node "aten.mul.Tensor" bwd
  // CHECK-NEXT: lethe.yield %{{.*}}, %{{.*}} : tensor<8x1024xbf16>, tensor<8x1024xbf16>
  // CHECK-NEXT: }
  %r:2 = lethe.recompute : tensor<8x1024xbf16>, tensor<8x1024xbf16> {
    %g = lethe.node "aten.gelu.default" bwd (%y) : (tensor<8x1024xbf16>) -> tensor<8x1024xbf16>
    %m = lethe.node "aten.mul.Tensor" bwd (%g, %y) : (tensor<8x1024xbf16>, tensor<8x1024xbf16>) -> tensor<8x1024xbf16>
    lethe.yield %g, %m : tensor<8x1024xbf16>, tensor<8x1024xbf16>
  }
  return %r#1 : tensor<8x1024xbf16>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%p: tensor<512x768xbf16>, %g: tensor<1024x768xbf16>) {
  // CHECK: lethe.collective all_gather %{{.*}} group [0, 1] fwd : tensor<512x768xbf16> -> tensor<1024x768xbf16>
  %0 = lethe.collective all_gather %p group [0, 1] fwd : tensor<512x768xbf16> -> tensor<1024x768xbf16>
  // CHECK: lethe.collective reduce_scatter %{{.*}} group [0, 1] bwd {time_us = 1.000000e+01 : f64} : tensor<1024x768xbf16> -> tensor<512x768xbf16>
  %1 = lethe.collective reduce_scatter %g group [0, 1] bwd {time_us = 10.0 : f64} : tensor<1024x768xbf16> -> tensor<512x768xbf16>
  // CHECK: lethe.collective all_reduce %{{.*}} group [3] opt : tensor<512x768xbf16> -> tensor<512x768xbf16>
  %2 = lethe.collective all_reduce %p group [3] opt : tensor<512x768xbf16> -> tensor<512x768xbf16>
  // CHECK: lethe.collective all_to_all
  %3 = lethe.collective all_to_all %p group [0, 1, 2, 3] fwd : tensor<512x768xbf16> -> tensor<512x768xbf16>
  // CHECK: lethe.collective send %{{.*}} peer 1 group [0, 1] fwd {time_us = 2.000000e+00 : f64} : tensor<512x768xbf16>{{$}}
  lethe.collective send %p peer 1 group [0, 1] fwd {time_us = 2.0 : f64} : tensor<512x768xbf16>
  // CHECK: %{{.*}} = lethe.collective recv peer 0 group [0, 1] bwd : -> tensor<512x768xbf16>{{$}}
  %4 = lethe.collective recv peer 0 group [0, 1] bwd : -> tensor<512x768xbf16>
  return
}

// CHECK-LABEL: func.func @test_ops
func.func @test_ops() {
  // CHECK: %[[A:.*]] = lethe.test.timeline_op on compute {time_us = 5.000000e+00 : f64}
  %a = lethe.test.timeline_op on compute {time_us = 5.0 : f64}
  // CHECK: lethe.test.timeline_op on d2h await(%[[A]])
  %b = lethe.test.timeline_op on d2h await(%a)
  // CHECK: lethe.test.timeline_op on h2d await(%{{.*}}, %{{.*}})
  %c = lethe.test.timeline_op on h2d await(%a, %b)
  // CHECK: lethe.test.timeline_op on comm
  %d = lethe.test.timeline_op on comm
  // CHECK: %[[X:.*]] = lethe.test.tensor : () -> tensor<1024xf32>
  %x = lethe.test.tensor : () -> tensor<1024xf32>
  // CHECK: lethe.test.tensor(%[[X]]) {time_us = 1.000000e+00 : f64} : (tensor<1024xf32>) -> tensor<4xf32>
  %y = lethe.test.tensor (%x) {time_us = 1.0 : f64} : (tensor<1024xf32>) -> tensor<4xf32>
  return
}

// Decision, phase and stream attributes round-trip (here under names outside
// the dialect: a `lethe.*` discardable attribute must be one Lethe declares).
// CHECK-LABEL: func.func @attrs
// CHECK-SAME: decision = #lethe<decision offload>
// CHECK-SAME: phase = #lethe<phase bwd>
// CHECK-SAME: stream = #lethe<stream h2d>
func.func @attrs() attributes {decision = #lethe<decision offload>, phase = #lethe<phase bwd>, stream = #lethe<stream h2d>, retain = #lethe<decision retain>, recompute = #lethe<decision recompute>, d2h = #lethe<stream d2h>, comm = #lethe<stream comm>, fwd = #lethe<phase fwd>, opt = #lethe<phase opt>} {
  return
}

// The plan's attributes round-trip: the summary on the function, the
// decision and placement of each result on its node (`every-n` is quoted:
// it is no keyword).
// CHECK-LABEL: func.func @planned
// CHECK-SAME: lethe.contention = #lethe<contention yield>
// CHECK-SAME: lethe.plan = #lethe.plan<policy = "every-n", budget_bytes = 4096, feasible = true, peak_bytes = 2048, baseline_peak_bytes = 8192, step_us = 1.250000e+02, baseline_step_us = 1.000000e+02, overhead = 2.500000e-01, lower_bound_overhead = 1.000000e-01>
func.func @planned(%x: tensor<1024xf32>) -> tensor<1024xf32> attributes {lethe.contention = #lethe<contention yield>, lethe.copy_chunk_bytes = 4096 : i64, lethe.plan = #lethe.plan<overhead = 0.25, policy = "every-n", budget_bytes = 4096, feasible = true, peak_bytes = 2048, baseline_peak_bytes = 8192, step_us = 125.0, baseline_step_us = 100.0, lower_bound_overhead = 0.1>} {
  // CHECK: lethe.node "aten.relu.default" fwd {{.*}} {lethe.cost_source = #lethe<cost_source bandwidth>, lethe.decisions = [#lethe<decision recompute>, unit], lethe.placement = [#lethe.placement<restore_before = 3, nodes = [0]>, unit]}
  %0:2 = lethe.node "aten.relu.default" fwd (%x) {lethe.cost_source = #lethe<cost_source bandwidth>, lethe.decisions = [#lethe<decision recompute>, unit], lethe.placement = [#lethe.placement<nodes = [0], restore_before = 3>, unit]} : (tensor<1024xf32>) -> (tensor<1024xf32>, tensor<1024xf32>)
  // CHECK: lethe.node "aten.neg.default" fwd {{.*}} {lethe.decisions = [#lethe<decision offload>], lethe.placement = [#lethe.placement<restore_before = 3, release_after = 1, prefetch_after = 2, nodes = []>]}
  %1 = lethe.node "aten.neg.default" fwd (%0#0) {lethe.decisions = [#lethe<decision offload>], lethe.placement = [#lethe.placement<restore_before = 3, release_after = 1, prefetch_after = 2, nodes = []>]} : (tensor<1024xf32>) -> tensor<1024xf32>
  %2 = lethe.node "aten.add.Tensor" bwd (%0#0, %1) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %3 = lethe.node "aten.add.Tensor" bwd (%2, %0#1) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  return %3 : tensor<1024xf32>
}

// RUN: lethe-opt %s --lethe-verify | FileCheck %s
// RUN: lethe-opt %s --lethe-verify='budget=4KiB' | FileCheck %s
// RUN: not lethe-opt %s --lethe-verify='budget=3KiB' 2>&1 | FileCheck %s --check-prefix=TIGHT
// RUN: not lethe-opt %s --lethe-verify='budget=lots' 2>&1 | FileCheck %s --check-prefix=BAD

// Valid allocated programs: lethe-verify accepts them and changes nothing.

// TIGHT: error: 'lethe.node' op result #0 (%9 ('aten.gelu.default')) at device arena [3072, 4096) ends beyond the budget of 3072 bytes
// BAD: error: lethe-verify: invalid byte count 'lots': expected a number

// CHECK: module attributes {lethe.arena_alignment = 256 : i64, lethe.budget_bytes = 8192 : i64
module attributes {lethe.arena_alignment = 256 : i64, lethe.budget_bytes = 8192 : i64, lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 1024 : i64} {

// Offload + prefetch of %a, recompute of %b, on four streams. The prefetch
// writes the bytes %b held ([1024, 2048)) after awaiting a compute barrier
// issued after %b's release.
// CHECK-LABEL: func.func @offload_and_recompute
func.func @offload_and_recompute(%w: tensor<256xf32>) -> tensor<256xf32> {
  %a = lethe.node "aten.mm.default" fwd (%w) {lethe.offsets = array<i64: 0>, lethe.stream = #lethe<stream compute>} : (tensor<256xf32>) -> tensor<256xf32>
  %t0 = lethe.barrier {lethe.stream = #lethe<stream compute>}
  %h, %d = lethe.offload %a await(%t0) {lethe.offsets = array<i64: 0, -1>, lethe.stream = #lethe<stream d2h>} : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  %b = lethe.node "aten.gelu.default" fwd (%a) {lethe.offsets = array<i64: 1024>} : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %a await(%d) : tensor<256xf32>
  %c = lethe.node "aten.mm.default" fwd (%b) {lethe.offsets = array<i64: 2048>} : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %b : tensor<256xf32>
  %g = lethe.node "aten.mm.default" bwd (%c, %w) {lethe.offsets = array<i64: 0>} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %c : tensor<256xf32>
  %t1 = lethe.barrier
  %p, %pd = lethe.prefetch %h await(%t1) {lethe.offsets = array<i64: 1024, -1>, lethe.stream = #lethe<stream h2d>} : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
  %a2 = lethe.await %pd => %p : tensor<256xf32>
  lethe.release %h await(%pd) : !lethe.host<tensor<256xf32>>
  %b2 = lethe.recompute : tensor<256xf32> {
    %r = lethe.node "aten.gelu.default" bwd (%a2) {lethe.offsets = array<i64: 3072>} : (tensor<256xf32>) -> tensor<256xf32>
    lethe.yield %r : tensor<256xf32>
  }
  %g2 = lethe.node "aten.gelu_backward.default" bwd (%g, %b2, %a2) {lethe.offsets = array<i64: 2048>} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %g : tensor<256xf32>
  lethe.release %b2 : tensor<256xf32>
  lethe.release %a2 : tensor<256xf32>
  return %g2 : tensor<256xf32>
}

// A collective reads a compute result after a compute barrier; compute
// reads the collective's result after a comm barrier, through a join.
// CHECK-LABEL: func.func @collective
func.func @collective(%w: tensor<256xf32>) -> tensor<256xf32> {
  %a = lethe.node "aten.mm.default" bwd (%w) {lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
  %t0 = lethe.barrier
  %c = lethe.await %t0 => %a : tensor<256xf32> {lethe.stream = #lethe<stream comm>}
  %r = lethe.collective all_reduce %c group [0, 1] bwd {lethe.offsets = array<i64: 1024>} : tensor<256xf32> -> tensor<256xf32>
  %t1 = lethe.barrier {lethe.stream = #lethe<stream comm>}
  %t2 = lethe.barrier
  %j = lethe.join %t1, %t2
  lethe.await %j
  lethe.release %a : tensor<256xf32>
  %o = lethe.node "aten.relu.default" bwd (%r) {lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %r : tensor<256xf32>
  return %o : tensor<256xf32>
}

// Timeline test ops carry ordering like copies do.
// CHECK-LABEL: func.func @timeline
func.func @timeline() {
  %t0 = lethe.test.timeline_op on compute {time_us = 5.0 : f64}
  %t1 = lethe.test.timeline_op on d2h await(%t0)
  %t2 = lethe.test.timeline_op on h2d await(%t1)
  lethe.await %t2
  return
}
}

// RUN: lethe-opt %s --lethe-pipeline='budget=4000 policy=auto device=h200' -mlir-print-op-on-diagnostic=false | FileCheck %s
// RUN: lethe-opt %s --lethe-pipeline='budget=100% policy=auto device=h200' -mlir-print-op-on-diagnostic=false | FileCheck %s --check-prefix=FULL
// RUN: lethe-opt %s --lethe-plan='budget=4000' -mlir-print-op-on-diagnostic=false | FileCheck %s --check-prefix=PLAN
// RUN: not lethe-opt %s --lethe-plan='budget=4000 alignment=1' --lethe-materialize --lethe-schedule --lethe-assign-buffers --lethe-verify -o /dev/null -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=UNALIGNED
// RUN: not lethe-opt %s --lethe-plan='alignment=24' -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not lethe-opt %s --lethe-pipeline='alignment=4611686018427387904 budget=4000' -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE

// Every activation is 1000 bytes, 1024 once lethe-assign-buffers aligns it
// to 256: the unplanned step peaks at 4000 tensor bytes, an arena of 4096.
// Planned on tensor bytes (alignment=1), a budget of 4000 keeps everything
// and the arena ends 96 bytes over it; lethe-plan (by default) and
// lethe-pipeline plan the aligned sizes, so they recompute one activation
// and the arena fits.

// CHECK: module attributes {lethe.arena_alignment = 256 : i64, lethe.budget_bytes = 4000 : i64, lethe.device_arena_bytes = 3072 : i64
// CHECK: lethe.plan = #lethe.plan<{{.*}}, peak_bytes = 3072, baseline_peak_bytes = 4096,
// CHECK: lethe.recompute

// 100% is of the aligned unplanned peak: nothing to do.
// FULL: module attributes {lethe.arena_alignment = 256 : i64, lethe.budget_bytes = 4096 : i64, lethe.device_arena_bytes = 4096 : i64
// FULL-NOT: lethe.recompute

// PLAN: lethe.plan = #lethe.plan<{{.*}}, peak_bytes = 3072, baseline_peak_bytes = 4096,
// PLAN: #lethe<decision recompute>

// UNALIGNED: error: {{.*}} at device arena [{{[0-9]+}}, {{[0-9]+}}) ends beyond the budget of 4000 bytes

// BAD: error: lethe-plan: alignment must be a power of two at most 4294967296, got 24
// An alignment of 2^62 would round sizes past int64.
// HUGE: error: lethe-plan: alignment must be a power of two at most 4294967296, got 4611686018427387904

func.func @step(%x: tensor<250xf32> {lethe.kind = "input"}) -> tensor<250xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %1 = lethe.node "aten.relu.default" fwd (%0) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %2 = lethe.node "aten.relu.default" fwd (%1) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %3 = lethe.node "aten.neg.default" bwd (%2) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %4 = lethe.node "aten.mul.Tensor" bwd (%3, %1) {time_us = 10.0 : f64} : (tensor<250xf32>, tensor<250xf32>) -> tensor<250xf32>
  %5 = lethe.node "aten.mul.Tensor" bwd (%4, %0) {time_us = 10.0 : f64} : (tensor<250xf32>, tensor<250xf32>) -> tensor<250xf32>
  return %5 : tensor<250xf32>
}

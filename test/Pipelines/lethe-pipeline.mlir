// RUN: lethe-opt %s --lethe-pipeline='budget=3MiB policy=auto device=h200' \
// RUN:   --remarks-filter='lethe-materialize|lethe-assign-buffers' --remark-format=emitRemark -mlir-print-op-on-diagnostic=false 2>%t.remarks | FileCheck %s
// RUN: FileCheck %s --check-prefix=REMARKS < %t.remarks
// RUN: lethe-opt %s --lethe-pipeline='policy=none' --remarks-filter=lethe-assign-buffers --remark-format=emitRemark -o /dev/null -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not lethe-opt %s --lethe-pipeline='budget=1MiB' -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIGHT

// The whole pipeline on a small step: plan under 3 MiB (the unplanned peak
// is 4 MiB), materialize, schedule, allocate, verify.

// CHECK: module attributes {lethe.arena_alignment = 256 : i64, lethe.budget_bytes = 3145728 : i64, lethe.device_arena_bytes = [[ARENA:[0-9]+]] : i64
// CHECK-LABEL: func.func @step
// CHECK-SAME: lethe.plan = #lethe.plan<policy = auto, budget_bytes = 3145728
// Every op is on a stream and allocating ops have arena offsets.
// CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.offsets = array<i64: {{[0-9]+}}>, lethe.stream = #lethe<stream compute>
// CHECK: return

// REMARKS: remark: [Analysis] materialized | Category:lethe-materialize | Function=step | Remark="materialized 3 decisions: 1 recompute regions
// REMARKS: remark: [Analysis] arena | Category:lethe-assign-buffers | Function=step | Remark="device arena {{[0-9]+}} bytes for a max-live of {{[0-9]+}} (+0.00%)

// NONE: remark: [Analysis] arena | Category:lethe-assign-buffers | Function=step | Remark="device arena 4194304 bytes for a max-live of 4194304 (+0.00%)

// TIGHT: error: lethe-plan: budget 1.00 MiB (1048576 B) is below the least budget policy auto can meet on this graph

func.func @step(%x: tensor<512x512xf32> {lethe.kind = "input"}, %w: tensor<512x512xf32> {lethe.kind = "param"}) -> tensor<512x512xf32> {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %1 = lethe.node "aten.gelu.default" fwd (%0) {time_us = 20.0 : f64} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = lethe.node "aten.mm.default" fwd (%1, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %4 = lethe.node "aten.gelu_backward.default" bwd (%3, %0) {time_us = 20.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %5 = lethe.node "aten.mm.default" bwd (%4, %1) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %5 : tensor<512x512xf32>
}

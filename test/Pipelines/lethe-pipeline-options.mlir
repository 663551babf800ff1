// lethe-pipeline takes every lethe-plan option, parsed by that pass's own
// declaration (Passes.td), and its own (contention, annotate-costs): an
// option added to lethe-plan reaches the pipeline with no other change.
// RUN: lethe-opt %s --lethe-pipeline='budget=4000 bound=true contention=off annotate-costs=false' -mlir-print-op-on-diagnostic=false | FileCheck %s
// RUN: not lethe-opt %s --lethe-pipeline='budget=4000 polcy=auto' -o /dev/null 2>&1 | FileCheck %s --check-prefix=TYPO
// RUN: not lethe-opt %s --lethe-pipeline='budget=4000 annotate-costs=maybe' -o /dev/null 2>&1 | FileCheck %s --check-prefix=OWN

// bound=true: the plan carries the lower bound on any plan's overhead.
// CHECK: lethe.device_arena_bytes = 3072 : i64
// CHECK: lethe.plan = #lethe.plan<{{.*}}, peak_bytes = 3072, {{.*}}, lower_bound_overhead = {{.*}}>

// TYPO: error: invalid option 'polcy=auto': {{.*}}no such option polcy
// OWN: error: invalid option 'annotate-costs=maybe'

func.func @step(%x: tensor<250xf32> {lethe.kind = "input"}) -> tensor<250xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %1 = lethe.node "aten.relu.default" fwd (%0) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %2 = lethe.node "aten.relu.default" fwd (%1) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %3 = lethe.node "aten.neg.default" bwd (%2) {time_us = 10.0 : f64} : (tensor<250xf32>) -> tensor<250xf32>
  %4 = lethe.node "aten.mul.Tensor" bwd (%3, %1) {time_us = 10.0 : f64} : (tensor<250xf32>, tensor<250xf32>) -> tensor<250xf32>
  %5 = lethe.node "aten.mul.Tensor" bwd (%4, %0) {time_us = 10.0 : f64} : (tensor<250xf32>, tensor<250xf32>) -> tensor<250xf32>
  return %5 : tensor<250xf32>
}

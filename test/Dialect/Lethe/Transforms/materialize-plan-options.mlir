// RUN: lethe-opt %s -split-input-file --lethe-materialize \
// RUN:   --remarks-filter=lethe-materialize --remark-format=emitRemark -verify-diagnostics | FileCheck %s

// lethe-materialize reads a plan under the options the planner made it
// with, as the function's `#lethe.plan` records them: the plan is not
// re-derived under looser rules of its own. The dropout (node 2) is an RNG
// op, so only a plan made with `replay_rng = true` may re-run it.

// A plan made without RNG replay (no `replay_rng` printed: false) that
// names the dropout among the nodes to re-run is refused, naming the node
// by its `lethe.node_id`. (Read with replay accepted, as before, it would
// have been materialized.)
// expected-error @+1 {{lethe-materialize: the plan cannot be followed: value node 2#0 (aten.native_dropout.default) cannot be recomputed: its chain needs an RNG op (node 2 (aten.native_dropout.default))}}
func.func @no_replay(%x: tensor<512x512xf32>, %w: tensor<512x512xf32> {lethe.kind = "param"}) -> tensor<512x512xf32> attributes {lethe.plan = #lethe.plan<policy = full, budget_bytes = 9223372036854775807, feasible = true, peak_bytes = 0, baseline_peak_bytes = 0, step_us = 0.0, baseline_step_us = 0.0, overhead = 0.0>} {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.node_id = 1} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %1:2 = lethe.node "aten.native_dropout.default" fwd (%0) {time_us = 10.0 : f64, lethe.node_id = 2, lethe.decisions = [#lethe<decision recompute>, unit], lethe.placement = [#lethe.placement<restore_before = 4, nodes = [2]>, unit]} : (tensor<512x512xf32>) -> (tensor<512x512xf32>, tensor<512x512xi8>)
  %2 = lethe.node "aten.mm.default" fwd (%1#0, %w) {time_us = 100.0 : f64, lethe.node_id = 3} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %1#0) {time_us = 100.0 : f64, lethe.node_id = 4} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %3 : tensor<512x512xf32>
}

// -----

// The same plan made with `replay_rng = true`: the dropout is re-run
// before node 4 (its RNG state replayed by the runtime).
// CHECK-LABEL: func.func @replay
// CHECK-SAME: replay_rng = true
// CHECK: lethe.recompute
// CHECK-NEXT: lethe.node "aten.native_dropout.default" fwd
// expected-remark @+1 {{materialized 1 decisions: 1 recompute regions re-running 1 nodes, 0 offloads, 0 prefetches}}
func.func @replay(%x: tensor<512x512xf32>, %w: tensor<512x512xf32> {lethe.kind = "param"}) -> tensor<512x512xf32> attributes {lethe.plan = #lethe.plan<policy = full, budget_bytes = 9223372036854775807, feasible = true, peak_bytes = 0, baseline_peak_bytes = 0, step_us = 0.0, baseline_step_us = 0.0, overhead = 0.0, replay_rng = true>} {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.node_id = 1} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %1:2 = lethe.node "aten.native_dropout.default" fwd (%0) {time_us = 10.0 : f64, lethe.node_id = 2, lethe.decisions = [#lethe<decision recompute>, unit], lethe.placement = [#lethe.placement<restore_before = 4, nodes = [2]>, unit]} : (tensor<512x512xf32>) -> (tensor<512x512xf32>, tensor<512x512xi8>)
  %2 = lethe.node "aten.mm.default" fwd (%1#0, %w) {time_us = 100.0 : f64, lethe.node_id = 3} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %1#0) {time_us = 100.0 : f64, lethe.node_id = 4} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %3 : tensor<512x512xf32>
}

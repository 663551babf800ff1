// RUN: split-file %s %t
// RUN: lethe-opt %t/step.mlir --lethe-plan='plan-file=%t/plan.json device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %t/step.mlir
// RUN: not lethe-opt %t/step.mlir --lethe-plan='plan-file=%t/bad.json device=%S/Inputs/plan-device.json' 2>&1 | FileCheck %s --check-prefix=BAD

// `plan-file` (the driver's `--plan-file FILE`) evaluates a plan made elsewhere
// instead of planning: policy `given`. Each decision names the exported
// node, by `lethe.node_id` or by `name`, and its output (plan.json below):
// u is recomputed, v offloaded. The plan is placed, scheduled and
// simulated as Lethe's own, with the same attributes and remarks, and it
// is evaluated, not improved: the step's peak is in the backward, where u
// and v are back on the device, so neither decision lowers it, and they
// cost 100 us of re-run and the copies' exposed time: +29.19%.

// An entry that names no node of the graph is an error at the entry.
// BAD: bad.json:1:16: error: no node with id 99 in the graph

//--- plan.json
{"decisions": [{"node": "u", "output": 0, "decision": "recompute"},
               {"node_id": 11, "output": 0, "decision": "offload"}]}
//--- bad.json
{"decisions": [{"node_id": 99, "output": 0, "decision": "recompute"}]}
//--- step.mlir
!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

// CHECK-LABEL: func.func @step
// CHECK-SAME: lethe.plan = #lethe.plan<policy = given, budget_bytes = 9223372036854775807, feasible = true, peak_bytes = 25690112, baseline_peak_bytes = 25690112, step_us = 8.138860e+02, baseline_step_us = 6.300000e+02, overhead = 2.918830e-01>
// expected-remark @below {{policy given: peak 25690112 B, no budget (unplanned 25690112 B); step 813.9 us (+29.19%)}}
func.func @step(%x: !h,
                %w1: !w1 {lethe.kind = "param"},
                %w2: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2) {
  // Nodes are named by `lethe.node_id`. Node 10: recomputed by name; back
  // before node 14, gelu_backward.
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>], lethe.node_id = 10 : i64, lethe.placement = [#lethe.placement<restore_before = 14, nodes = [10]>]
  // expected-remark @below {{recomputed (given plan): frees 8.00 MiB for 100.00 us of re-run}}
  %u = lethe.node "aten.mm.default" fwd (%x, %w1) {name = "u", lethe.node_id = 10 : i64, time_us = 100.0 : f64} : (!h, !w1) -> !a
  // Node 11: offloaded by id; the planner places the copies.
  // CHECK: lethe.node "aten.gelu.default" fwd {{.*}}lethe.decisions = [#lethe<decision offload>], lethe.node_id = 11 : i64, lethe.placement = [#lethe.placement<restore_before = 13, release_after = 12, prefetch_after = 12, nodes = []>]
  // expected-remark @below {{offloaded (given plan): frees 8.00 MiB}}
  %v = lethe.node "aten.gelu.default" fwd (%u) {name = "v", lethe.node_id = 11 : i64, time_us = 10.0 : f64} : (!a) -> !a
  // Node 12: not read by the backward, no activation, no decision.
  // CHECK: lethe.node "aten.mm.default" fwd
  // CHECK-NOT: lethe.decisions
  // CHECK-SAME: -> tensor<4096x256xbf16>
  %o = lethe.node "aten.mm.default" fwd (%v, %w2) {name = "o", lethe.node_id = 12 : i64, time_us = 100.0 : f64} : (!a, !w2) -> !h
  // Nodes 13-15: without an id in the input, they get the ids above the
  // largest in use (12), in program order.
  %d:2 = lethe.node "aten.mm_backward" bwd (%seed, %v, %w2) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %g = lethe.node "aten.gelu_backward" bwd (%d#0, %u) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e:2 = lethe.node "aten.mm_backward" bwd (%g, %x, %w1) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  return %e#1, %d#1 : !w1, !w2
}

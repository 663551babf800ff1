// RUN: split-file %s %t
// RUN: lethe-opt %t/step.mlir --lethe-plan='plan-file=%t/plan.json device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -o %t/planned.mlir 2> %t/remarks
// RUN: FileCheck %t/step.mlir < %t/planned.mlir
// RUN: FileCheck %s --check-prefix=REASON < %t/remarks
// RUN: lethe-opt %t/planned.mlir --lethe-materialize --lethe-schedule \
// RUN:   --remarks-filter='lethe-materialize|lethe-assign-buffers' --remark-format=emitRemark \
// RUN:   --lethe-assign-buffers --lethe-verify -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PROGRAM

// A checkpoint (docs/Planner.md §4: a layer input the backward does not
// read, kept to cut the recompute chains that read it) is restored only for
// those chains. The graph is plan-checkpoints.mlir's three layers; the plan
// (plan.json, as `lethe compile --plan` or `auto` may make it) offloads the
// checkpoints h1 and h2 and recomputes n2:
// - n2's chain (node 10, the norm) reads h2 before node 17: h2 stays
//   offloaded, prefetched after node 14 and back before node 17;
// - n1 is retained, so no chain reads h1. A retained h1 is freed after its
//   last forward use (node 9) already; offloaded, it would be copied out
//   and back for nothing. The planner runs it as retained
//   (effectiveDecisions) and says why.
// Before, h1 was restored before node 15 (the first backward use of any
// chain that could read it), and the program's prefetch of h1 had no
// reader: lethe-verify rejected it ("'lethe.prefetch' op result #0 is
// never released and the step does not return it"); `auto` made such a
// plan on Mixtral-MoE at 90% (bench/results/corpus.md).

// REASON: remark: {{.*}}retained: input of layer model.h.1, a checkpoint candidate no recompute chain reads in this plan (freed after its last forward use)
// REASON: remark: {{.*}}offloaded (given plan): frees 2.00 MiB

// One offload and one prefetch (h2's), and the arena is the planned peak.
// PROGRAM: remark: [Analysis] materialized | Category:lethe-materialize | Function=step | Remark="materialized 11 decisions: 1 recompute regions re-running 1 nodes, 1 offloads, 1 prefetches
// PROGRAM: remark: [Analysis] arena | Category:lethe-assign-buffers | Function=step | Remark="device arena 69730304 bytes for a max-live of 69730304 (+0.00%)

//--- plan.json
{"decisions": [{"node": "h1", "output": 0, "decision": "offload"},
               {"node": "h2", "output": 0, "decision": "offload"},
               {"node": "n2", "output": 0, "decision": "recompute"}]}
//--- step.mlir
!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!n = tensor<4096x256xf32>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

// CHECK-LABEL: func.func @step
func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %w1_2: !w1 {lethe.kind = "param"},
                %w2_2: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2, !w1, !w2) {
  // node 0
  %n0 = lethe.node "aten.norm" fwd (%x) {scope = "model.h.0", time_us = 5.0 : f64} : (!h) -> !n
  // node 1
  %u0 = lethe.node "aten.mm.default" fwd (%n0, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!n, !w1) -> !a
  // node 2
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  // node 3
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 4
  // CHECK: lethe.decisions = [#lethe<decision retain>]{{.*}}name = "h1"
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {name = "h1", scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 5
  %n1 = lethe.node "aten.norm" fwd (%h1) {scope = "model.h.1", time_us = 5.0 : f64} : (!h) -> !n
  // node 6
  %u1 = lethe.node "aten.mm.default" fwd (%n1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!n, !w1) -> !a
  // node 7
  %v1 = lethe.node "aten.gelu.default" fwd (%u1) {scope = "model.h.1", time_us = 10.0 : f64} : (!a) -> !a
  // node 8
  %o1 = lethe.node "aten.mm.default" fwd (%v1, %w2_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 9
  // CHECK: lethe.decisions = [#lethe<decision offload>], lethe.node_id = 9 : i64, lethe.placement = [#lethe.placement<restore_before = 17, release_after = 14, prefetch_after = 14, nodes = []>], name = "h2"
  %h2 = lethe.node "aten.add.Tensor" fwd (%h1, %o1) {name = "h2", scope = "model.h.1", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 10
  // CHECK: lethe.decisions = [#lethe<decision recompute>], lethe.node_id = 10 : i64, lethe.placement = [#lethe.placement<restore_before = 17, nodes = [10]>], name = "n2"
  %n2 = lethe.node "aten.norm" fwd (%h2) {name = "n2", scope = "model.h.2", time_us = 5.0 : f64} : (!h) -> !n
  // node 11
  %u2 = lethe.node "aten.mm.default" fwd (%n2, %w1_2) {scope = "model.h.2", time_us = 100.0 : f64} : (!n, !w1) -> !a
  // node 12
  %v2 = lethe.node "aten.gelu.default" fwd (%u2) {scope = "model.h.2", time_us = 10.0 : f64} : (!a) -> !a
  // node 13
  %o2 = lethe.node "aten.mm.default" fwd (%v2, %w2_2) {scope = "model.h.2", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 14
  %h3 = lethe.node "aten.add.Tensor" fwd (%h2, %o2) {scope = "model.h.2", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 15
  %d2:2 = lethe.node "aten.mm_backward" bwd (%seed, %v2, %w2_2) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 16
  %g2 = lethe.node "aten.gelu_backward" bwd (%d2#0, %u2) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 17
  %e2:2 = lethe.node "aten.mm_backward" bwd (%g2, %n2, %w1_2) {time_us = 200.0 : f64} : (!a, !n, !w1) -> (!h, !w1)
  // node 18
  %m2 = lethe.node "aten.norm_backward" bwd (%e2#0, %n2) {time_us = 10.0 : f64} : (!h, !n) -> !h
  // node 19
  %s2 = lethe.node "aten.add.Tensor" bwd (%seed, %m2) {time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 20
  %d1:2 = lethe.node "aten.mm_backward" bwd (%s2, %v1, %w2_1) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 21
  %g1 = lethe.node "aten.gelu_backward" bwd (%d1#0, %u1) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 22
  %e1:2 = lethe.node "aten.mm_backward" bwd (%g1, %n1, %w1_1) {time_us = 200.0 : f64} : (!a, !n, !w1) -> (!h, !w1)
  // node 23
  %m1 = lethe.node "aten.norm_backward" bwd (%e1#0, %n1) {time_us = 10.0 : f64} : (!h, !n) -> !h
  // node 24
  %s1 = lethe.node "aten.add.Tensor" bwd (%s2, %m1) {time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 25
  %d0:2 = lethe.node "aten.mm_backward" bwd (%s1, %v0, %w2_0) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 26
  %g0 = lethe.node "aten.gelu_backward" bwd (%d0#0, %u0) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 27
  %e0:2 = lethe.node "aten.mm_backward" bwd (%g0, %n0, %w1_0) {time_us = 200.0 : f64} : (!a, !n, !w1) -> (!h, !w1)
  // node 28
  %m0 = lethe.node "aten.norm_backward" bwd (%e0#0, %n0) {time_us = 10.0 : f64} : (!h, !n) -> !h
  return %e2#1, %d2#1, %e1#1, %d1#1, %e0#1, %d0#1 : !w1, !w2, !w1, !w2, !w1, !w2
}

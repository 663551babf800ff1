// RUN: lethe-opt %s --lethe-plan='policy=full device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %s
// RUN: lethe-opt %s --lethe-plan='policy=offload-all min-offload-bytes=2MiB device=%S/Inputs/plan-device.json' \
// RUN:   | FileCheck %s --check-prefix=OFFLOAD
// RUN: lethe-opt %s --lethe-plan='policy=full replay-rng=true device=%S/Inputs/plan-device.json' \
// RUN:   | FileCheck %s --check-prefix=REPLAY

// The rules every policy obeys, whatever it would like to do:
// - an RNG op (dropout, attention with dropout) is never re-run, so its
//   outputs and everything recomputed from them stay (unless
//   replay-rng=true says the runtime replays the RNG state);
// - a collective is never re-run (all ranks must issue the same ones);
// - a storage written in place during the forward is never recomputed (the
//   chain would see the later contents);
// - a view owns no storage: the decision is about the storage it views,
//   and the view is re-run after the storage comes back;
// - storages below min-offload-bytes are never offloaded.
// Policy `full` would recompute everything in layer model.h.0; the remarks
// say why it does not.

!h = tensor<1024x1024xbf16>
!m = tensor<1024x1024xi8>
!w = tensor<512x1024xbf16>
!g = tensor<1024x1024xbf16>

// CHECK-LABEL: func.func @step
// A plan made with replay-rng=true says so on its summary, so that
// lethe-materialize reads it under the same rule (materialize-plan-options.mlir).
// REPLAY: func.func @step{{.*}}lethe.plan = #lethe.plan<{{.*}}, replay_rng = true>
// expected-remark @below {{policy full: peak 11534336 B, no budget (unplanned 13631488 B); step 270.0 us (+3.85%)}}
func.func @step(%x: !h, %w: !w {lethe.kind = "param"}, %seed: !h {lethe.kind = "tangent"}) -> !h {
  // node 0
  // The mask (result 1) is read by the backward; the dropout output (result
  // 0) is not, so it gets no decision.
  // CHECK: lethe.node "aten.native_dropout.default" fwd {{.*}}lethe.decisions = [unit, #lethe<decision retain>]
  // OFFLOAD: lethe.node "aten.native_dropout.default" fwd {{.*}}lethe.decisions = [unit, #lethe<decision retain>]
  // REPLAY: lethe.node "aten.native_dropout.default" fwd {{.*}}lethe.decisions = [unit, #lethe<decision recompute>]
  // expected-remark @below {{result 1: retained (policy full): cannot be recomputed: its chain needs an RNG op (node 0 (aten.native_dropout.default))}}
  %d:2 = lethe.node "aten.native_dropout.default" fwd (%x) {scope = "model.h.0", time_us = 10.0 : f64} : (!h) -> (!h, !m)
  // node 1
  // CHECK: lethe.collective all_gather {{.*}}lethe.decisions = [#lethe<decision retain>]
  // OFFLOAD: lethe.collective all_gather {{.*}}lethe.decisions = [#lethe<decision offload>]
  // REPLAY: lethe.collective all_gather {{.*}}lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained (policy full): cannot be recomputed: its chain needs a collective (node 1 (lethe.collective.all_gather))}}
  %g = lethe.collective all_gather %w group [0, 1] fwd {scope = "model.h.0", time_us = 40.0 : f64} : !w -> !g
  // node 2
  // y is read by the backward through the view %v: it is an activation.
  // Re-creating it would re-run the dropout.
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // OFFLOAD: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision offload>], lethe.node_id = 2 : i64, lethe.placement = [#lethe.placement<restore_before = {{[0-9]+}}, release_after = {{[0-9]+}}, prefetch_after = {{[0-9]+}}, nodes = [3]>]
  // REPLAY: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>], lethe.node_id = 2 : i64, lethe.placement = [#lethe.placement<restore_before = {{[0-9]+}}, nodes = [0, 2, 3]>]
  // expected-remark @below {{retained (policy full): cannot be recomputed: its chain needs an RNG op (node 0 (aten.native_dropout.default))}}
  %y = lethe.node "aten.mm.default" fwd (%d#0, %g) {scope = "model.h.0", time_us = 50.0 : f64} : (!h, !g) -> !h
  // node 3
  // A view: no decision of its own. When y is offloaded or recomputed, the
  // view (node 3) is re-run on the restored y (the `nodes` above).
  // CHECK: lethe.node "aten.t.default" fwd
  // CHECK-NOT: lethe.decisions
  // CHECK-SAME: -> tensor<1024x1024xbf16>
  %v = lethe.node "aten.t.default" fwd (%y) {scope = "model.h.0", aliases = array<i64: 0>, time_us = 0.0 : f64} : (!h) -> !h
  // node 4
  // t is updated in place by relu_ (node 5).
  // CHECK: lethe.node "aten.mul.Tensor" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // REPLAY: lethe.node "aten.mul.Tensor" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained (policy full): cannot be recomputed: written in place during the forward}}
  %t = lethe.node "aten.mul.Tensor" fwd (%y) {scope = "model.h.0", time_us = 10.0 : f64} : (!h) -> !h
  // node 5
  %r = lethe.node "aten.relu_.default" fwd (%t) {scope = "model.h.0", aliases = array<i64: 0>, time_us = 10.0 : f64} : (!h) -> !h
  // node 6
  // CHECK: lethe.node "aten.sin.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>]
  // expected-remark @below {{recomputed (policy full): frees 2.00 MiB for 10.00 us of re-run}}
  %s = lethe.node "aten.sin.default" fwd (%x) {scope = "model.h.0", time_us = 10.0 : f64} : (!h) -> !h
  // node 7
  %h1 = lethe.node "aten.add.Tensor" fwd (%r, %y) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 8
  %h2 = lethe.node "aten.add.Tensor" fwd (%h1, %h1) {scope = "model.h.1", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 9
  %b0 = lethe.node "aten.mm_backward" bwd (%seed, %v, %g) {time_us = 100.0 : f64} : (!h, !h, !g) -> !h
  // node 10
  %b1 = lethe.node "aten.relu_backward" bwd (%b0, %r, %s) {time_us = 10.0 : f64} : (!h, !h, !h) -> !h
  // node 11
  %b2 = lethe.node "aten.native_dropout_backward" bwd (%b1, %d#1) {time_us = 10.0 : f64} : (!h, !m) -> !h
  return %b2 : !h
}

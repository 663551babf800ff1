// RUN: lethe-opt %s --lethe-plan='policy=selective-op device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %s
// RUN: lethe-opt %s --lethe-plan='policy=selective-op offload-kept=true device=%S/Inputs/plan-device.json' \
// RUN:   | FileCheck %s --check-prefix=OFFLOAD
// RUN: lethe-opt %s --lethe-plan='policy=selective-op keep-ops=gelu device=%S/Inputs/plan-device.json' \
// RUN:   | FileCheck %s --check-prefix=KEEP
// A kept kind that no op of the step has (here a misspelling) is refused:
// it would keep nothing and recompute what was meant to be kept.
// RUN: not lethe-opt %s --lethe-plan='policy=selective-op keep-ops=mm,gleu device=%S/Inputs/plan-device.json' \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: keep-ops names 'gleu', which is in no op of this graph: nothing would be kept for it

// Policy `selective-op` is PyTorch's selective activation checkpointing
// (torchtitan's default): inside each layer, keep the outputs of the
// expensive op kinds (`keep-ops`, matched as substrings of the op name;
// default: matmul-like ops and attention) and recompute the rest from them.
// With `offload-kept=true` the kept outputs go to host instead, as
// InternEvo's selective_checkpoint_offload does.
//
// The step: two layers of
//   u = mm(h, w1)  [8 MiB];  v = gelu(u)  [8 MiB];  o = mm(v, w2);  h' = h + o
// then the backward in reverse order, which reads v, u and h of each layer.

!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

// CHECK-LABEL: func.func @step
// CHECK-SAME: policy = "selective-op"
// OFFLOAD-LABEL: func.func @step
// KEEP-LABEL: func.func @step
// expected-remark @below {{policy selective-op: peak 36175872 B, no budget (unplanned 44564480 B); step 1300.0 us (+1.56%)}}
func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2) {
  // node 0
  // The matmul's output is kept (or, with offload-kept, offloaded and
  // prefetched back before node 12, where v0's chain reads it)...
  // CHECK: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // OFFLOAD: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision offload>], lethe.node_id = 0 : i64, lethe.placement = [#lethe.placement<restore_before = 12, release_after = {{[0-9]+}}, prefetch_after = {{[0-9]+}}, nodes = []>]
  // With keep-ops=gelu the roles swap: u0 is recomputed.
  // KEEP: lethe.node "aten.mm.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>]
  // expected-remark @below {{retained (policy selective-op): output of kept op aten.mm.default}}
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 1
  // ... and the cheap gelu after it is recomputed from it.
  // CHECK: lethe.node "aten.gelu.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>], lethe.node_id = 1 : i64, lethe.placement = [#lethe.placement<restore_before = 12, nodes = [1]>]
  // OFFLOAD: lethe.node "aten.gelu.default" fwd {{.*}}lethe.decisions = [#lethe<decision recompute>]
  // KEEP: lethe.node "aten.gelu.default" fwd {{.*}}lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{recomputed (policy selective-op): frees 8.00 MiB for 10.00 us of re-run}}
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  // node 2
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 3
  // expected-remark @below {{retained (policy selective-op): read by the next layer (a layer boundary)}}
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 4
  // expected-remark @below {{retained (policy selective-op): output of kept op aten.mm.default}}
  %u1 = lethe.node "aten.mm.default" fwd (%h1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, !w1) -> !a
  // node 5
  // expected-remark @below {{recomputed (policy selective-op): frees 8.00 MiB for 10.00 us of re-run}}
  %v1 = lethe.node "aten.gelu.default" fwd (%u1) {scope = "model.h.1", time_us = 10.0 : f64} : (!a) -> !a
  // node 6
  %o1 = lethe.node "aten.mm.default" fwd (%v1, %w2_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!a, !w2) -> !h
  // node 7
  %h2 = lethe.node "aten.add.Tensor" fwd (%h1, %o1) {scope = "model.h.1", time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 8
  %d1:2 = lethe.node "aten.mm_backward" bwd (%seed, %v1, %w2_1) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 9
  %g1 = lethe.node "aten.gelu_backward" bwd (%d1#0, %u1) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 10
  %e1:2 = lethe.node "aten.mm_backward" bwd (%g1, %h1, %w1_1) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  // node 11
  %s1 = lethe.node "aten.add.Tensor" bwd (%seed, %e1#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  // node 12
  %d0:2 = lethe.node "aten.mm_backward" bwd (%s1, %v0, %w2_0) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  // node 13
  %g0 = lethe.node "aten.gelu_backward" bwd (%d0#0, %u0) {time_us = 20.0 : f64} : (!a, !a) -> !a
  // node 14
  %e0:2 = lethe.node "aten.mm_backward" bwd (%g0, %x, %w1_0) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  // node 15
  %s0 = lethe.node "aten.add.Tensor" bwd (%s1, %e0#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  return %e1#1, %d1#1, %e0#1, %d0#1 : !w1, !w2, !w1, !w2
}

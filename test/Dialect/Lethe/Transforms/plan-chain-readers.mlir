// RUN: lethe-opt %s --lethe-plan='policy=auto budget=62914560 device=%S/Inputs/plan-device.json' \
// RUN:   --remarks-filter=lethe-plan --remark-format=emitRemark \
// RUN:   -verify-diagnostics | FileCheck %s
// RUN: not lethe-opt %s --lethe-plan='policy=auto budget=62914559 device=%S/Inputs/plan-device.json' \
// RUN:   2>&1 | FileCheck %s --check-prefix=BELOW

// A value a recompute chain reads is back on the device from the chain on,
// up to its own backward use: where the chain runs before the peak node and
// the value is needed only after it, it holds its bytes across the peak op
// only because the chain read it early. Here the least budget falls to the
// peak node's working set only when auto offloads the chain's value instead
// of recomputing it and issues the input's prefetch after the peak node.
//
// The step: x = mm(in, w0) [4 MiB, 500 us], c = mm(x, w1) [16 MiB, 10 us],
// y = mm(c, w2) [4 MiB], t = mm(y, w3) [32 MiB], the loss sum(t), and the
// backward. Node 7, the backward of y = mm(c, w2), reads c and the 4 MiB
// gradient gy and writes gc (16 MiB) and gw2 (8 MiB), with gw3 (16 MiB)
// live: 60 MiB (62914560 B), which no plan can go below. Node 8, the
// backward of c = mm(x, w1), is the first to read x. A 16 MiB copy takes
// 167.77 us and a 4 MiB one 41.94 us at 100 GB/s (plan-device.json).
//
// Without the move auto's least here was 64 MiB (67108864 B, +0.96%;
// measured with AutoSolverOptions::chainReaders off): for the forward's
// peak (t beside c and x) its greedy recomputes c before node 7 (10 us of
// re-run, where c's copy cannot hide behind the short backward) and
// offloads x (recompute would cost 500 us); the chain re-running c reads x,
// so x is prefetched before node 7 and stays for node 8: 60 + 4 MiB at
// node 7, and no decision the greedy adds, and no late prefetch, lowers it
// (x's restore point is the chain's, before the peak node). Where it is
// stuck, the chain-reader move offloads c instead (its prefetch issued
// after node 6: the step waits 167.77 us for it) and issues x's prefetch
// after node 7 (41.94 us waited for before node 8), then lets the greedy go
// on: the peak is node 7's working set, 60 MiB, for +20.16%.
// One byte less is below the least (BELOW).

!s = tensor<2048x1024xbf16>
!b = tensor<2048x4096xbf16>
!t = tensor<2048x8192xbf16>
!w0 = tensor<1024x1024xbf16>
!w1 = tensor<1024x4096xbf16>
!w2 = tensor<4096x1024xbf16>
!w3 = tensor<1024x8192xbf16>
!r = tensor<f32>

// CHECK-LABEL: func.func @step
// CHECK-SAME: lethe.plan = #lethe.plan<policy = auto, budget_bytes = 62914560, feasible = true, peak_bytes = 62914560, baseline_peak_bytes = 79691776, {{.*}}, overhead = 2.0164
// BELOW: error: lethe-plan: budget 60.00 MiB (62914559 B) is below the least budget policy auto can meet on this graph: 60.00 MiB (62914560 B)
// expected-remark @below {{policy auto: peak 62914560 B, budget 62914560 B (unplanned 79691776 B); step 1249.7 us (+20.16%)}}
func.func @step(%in: !s, %w0: !w0 {lethe.kind = "param"}, %w1: !w1 {lethe.kind = "param"},
                %w2: !w2 {lethe.kind = "param"}, %w3: !w3 {lethe.kind = "param"},
                %seed: !r {lethe.kind = "tangent"})
    -> (!w0, !w1, !w2, !w3) {
  // node 0: x, offloaded; prefetched after node 7 (the peak node), not for
  // a chain before it.
  // CHECK: lethe.decisions = [#lethe<decision offload>], lethe.node_id = 0 : i64, lethe.placement = [#lethe.placement<restore_before = 8, release_after = 3, prefetch_after = 7, nodes = []>]
  // expected-remark @below {{offloaded: frees 4.00 MiB from node 3 (aten.mm.default) to node 7 (aten.mm_backward); 41.94 us copy each way, about 41.94 us of it exposed; recompute would cost 500.00 us}}
  %x = lethe.node "aten.mm.default" fwd (%in, %w0) {time_us = 500.0 : f64} : (!s, !w0) -> !s
  // node 1: c, offloaded instead of recomputed (no chain reads x before
  // node 7); prefetched after node 6.
  // CHECK: lethe.decisions = [#lethe<decision offload>], lethe.node_id = 1 : i64, lethe.placement = [#lethe.placement<restore_before = 7, release_after = 4, prefetch_after = 6, nodes = []>]
  // expected-remark @below {{offloaded: frees 16.00 MiB from node 4 (aten.sum.default) to node 6 (aten.mm_backward); 167.77 us copy each way, about 167.77 us of it exposed; recompute would cost 10.00 us}}
  %c = lethe.node "aten.mm.default" fwd (%x, %w1) {time_us = 10.0 : f64} : (!s, !w1) -> !b
  // node 2
  // CHECK: lethe.decisions = [#lethe<decision retain>]
  // expected-remark @below {{retained: the budget holds without dropping it}}
  %y = lethe.node "aten.mm.default" fwd (%c, %w2) {time_us = 10.0 : f64} : (!b, !w2) -> !s
  // node 3
  %t = lethe.node "aten.mm.default" fwd (%y, %w3) {time_us = 100.0 : f64} : (!s, !w3) -> !t
  // node 4
  %l = lethe.node "aten.sum.default" fwd (%t) {time_us = 100.0 : f64} : (!t) -> !r
  // node 5
  %gt = lethe.node "aten.sum_backward" bwd (%seed) {time_us = 10.0 : f64} : (!r) -> !t
  // node 6
  %gy:2 = lethe.node "aten.mm_backward" bwd (%gt, %y, %w3) {time_us = 10.0 : f64} : (!t, !s, !w3) -> (!s, !w3)
  // node 7: the peak, 60 MiB.
  %gc:2 = lethe.node "aten.mm_backward" bwd (%gy#0, %c, %w2) {time_us = 100.0 : f64} : (!s, !b, !w2) -> (!b, !w2)
  // node 8
  %gx:2 = lethe.node "aten.mm_backward" bwd (%gc#0, %x, %w1) {time_us = 100.0 : f64} : (!b, !s, !w1) -> (!s, !w1)
  // node 9
  %gi:2 = lethe.node "aten.mm_backward" bwd (%gx#0, %in, %w0) {time_us = 100.0 : f64} : (!s, !s, !w0) -> (!s, !w0)
  return %gi#1, %gx#1, %gc#1, %gy#1 : !w0, !w1, !w2, !w3
}

// RUN: lethe-translate --lethe-to-cpp %s | FileCheck %s
// RUN: lethe-opt %s --lethe-verify -o /dev/null
// RUN: lethe-translate --lethe-to-cpp %s -o %t.cpp
// RUN: %host_cxx -std=c++17 -fsyntax-only -Wall -Werror -I%lethe_src/include -x c++ %t.cpp

// An offload/prefetch pair and a recompute (the program of
// test/Dialect/Lethe/Transforms/verify.mlir): one call per op, copy, record,
// wait and release; events numbered per timepoint in issue order.

// CHECK: // Device arena: 4096 planned bytes, then 1024 bytes of resident inputs; host arena: 1024 bytes.
// CHECK-NEXT: #include "lethe-c/Runtime.h"
// CHECK: static const LetheRtBuf relu = {0, 1024};
// CHECK: static const LetheRtBuf relu_back = {1024, 1024};
// CHECK: static const LetheRtBuf gelu_re = {3072, 1024};
// CHECK: static const LetheRtBuf relu_host = {0, 1024};
// Resident inputs follow the planned arena.
// CHECK: static const LetheRtBuf fc_weight = {4096, 1024};

// CHECK-LABEL: static LetheRtStatus init(LetheRt* v1) {
// CHECK-NEXT: LetheRt *rt = v1;
// CHECK: letheRtFill(rt, fc_weight, LETHE_DTYPE_F32, 1);
// CHECK-NEXT: return letheRtGetStatus(rt);

// CHECK-LABEL: static LetheRtStatus step(LetheRt* v1) {
// CHECK-NEXT: LetheRt *rt = v1;
// CHECK-NEXT: // %0 = aten.relu.default "relu" fwd (%arg0)
// CHECK-NEXT: letheRtReplay(rt, "aten.relu.default relu", 2.0, {fc_weight}, {relu});
// The offload waits for the barrier after relu, then records its own event.
// CHECK-NEXT: // %1 = lethe.barrier on compute
// CHECK-NEXT: letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
// CHECK-NEXT: // %result, %done = lethe.offload (%0, %1): 1024 bytes
// CHECK-NEXT: letheRtWait(rt, LETHE_STREAM_D2H, 0);
// CHECK-NEXT: letheRtCopyD2H(rt, relu.offset, relu_host.offset, 1024);
// CHECK-NEXT: letheRtRecord(rt, LETHE_STREAM_D2H, 1);
// CHECK-NEXT: // %2 = aten.gelu.default "gelu" fwd (%0)
// CHECK-NEXT: letheRtReplay(rt, "aten.gelu.default gelu", 3.0, {relu}, {gelu});
// The release waits for the copy's event: the slot is reused only after it.
// CHECK-NEXT: // lethe.release (%0, %done) on compute
// CHECK-NEXT: letheRtWait(rt, LETHE_STREAM_COMPUTE, 1);
// CHECK-NEXT: letheRtRelease(rt, LETHE_STREAM_COMPUTE, relu);
// CHECK: // %5 = lethe.barrier on compute
// CHECK-NEXT: letheRtRecord(rt, LETHE_STREAM_COMPUTE, 2);
// CHECK-NEXT: // %result_0, %done_1 = lethe.prefetch (%result, %5): 1024 bytes
// CHECK-NEXT: letheRtWait(rt, LETHE_STREAM_H2D, 2);
// CHECK-NEXT: letheRtCopyH2D(rt, relu_host.offset, relu_back.offset, 1024);
// CHECK-NEXT: letheRtRecord(rt, LETHE_STREAM_H2D, 3);
// CHECK-NEXT: // %6 = lethe.await (%done_1, %result_0) on compute
// CHECK-NEXT: letheRtWait(rt, LETHE_STREAM_COMPUTE, 3);
// The host release awaits the same event: compute already waited for it.
// CHECK-NEXT: // lethe.release (%result, %done_1) on compute
// CHECK-NEXT: // (host slot relu_host is free: no call)
// The recompute's body is inlined and reads the prefetched copy.
// CHECK-NEXT: // recompute %7: re-runs 1 ops
// CHECK-NEXT: // %9 = aten.gelu.default "gelu" bwd (%6)
// CHECK-NEXT: letheRtReplay(rt, "aten.gelu.default gelu", 3.0, {relu_back}, {gelu_re});
// CHECK-NEXT: // end of recompute
// CHECK-NEXT: // %8 = aten.gelu_backward.default "gelu_backward" bwd (%4, %7, %6)
// CHECK-NEXT: letheRtReplay(rt, "aten.gelu_backward.default gelu_backward", 4.0, {mul_1, gelu_re, relu_back}, {gelu_backward});
// CHECK: letheRtRelease(rt, LETHE_STREAM_COMPUTE, relu_back);
// CHECK-NEXT: return letheRtGetStatus(rt);

// CHECK-LABEL: static LetheRtStatus checksum(LetheRt* v1) {
// CHECK: letheRtChecksum(rt, "out0 gelu_backward", gelu_backward);

// The planned step time is the compute stream's sum without a simulator
// figure; the planned peak is the whole device arena.
// CHECK: // Planned step: 15.0 us (the compute stream's op times).
// CHECK: static const LetheRtProgram program = {LETHE_RT_ABI_VERSION, "step", 5120, 1024, 4, 0, 15.0, 5120, init, step, checksum};
// CHECK-NEXT: extern "C" const LetheRtProgram* letheProgram() {
// CHECK-NEXT: return &program;

module attributes {lethe.arena_alignment = 256 : i64, lethe.budget_bytes = 8192 : i64, lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32> {lethe.kind = "param", lethe.name = "fc.weight"}) -> tensor<256xf32> {
  %a = lethe.node "aten.relu.default" fwd (%w) {name = "relu", time_us = 2.0 : f64, lethe.offsets = array<i64: 0>, lethe.stream = #lethe<stream compute>} : (tensor<256xf32>) -> tensor<256xf32>
  %t0 = lethe.barrier {lethe.stream = #lethe<stream compute>}
  %h, %d = lethe.offload %a await(%t0) {lethe.offsets = array<i64: 0, -1>, lethe.stream = #lethe<stream d2h>} : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  %b = lethe.node "aten.gelu.default" fwd (%a) {name = "gelu", time_us = 3.0 : f64, lethe.offsets = array<i64: 1024>} : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %a await(%d) : tensor<256xf32>
  %c = lethe.node "aten.mul.Tensor" fwd (%b) {name = "mul", time_us = 1.5 : f64, lethe.offsets = array<i64: 2048>} : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %b : tensor<256xf32>
  %g = lethe.node "aten.mul.Tensor" bwd (%c, %w) {name = "mul_1", time_us = 1.5 : f64, lethe.offsets = array<i64: 0>} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %c : tensor<256xf32>
  %t1 = lethe.barrier
  %p, %pd = lethe.prefetch %h await(%t1) {lethe.offsets = array<i64: 1024, -1>, lethe.stream = #lethe<stream h2d>} : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
  %a2 = lethe.await %pd => %p : tensor<256xf32>
  lethe.release %h await(%pd) : !lethe.host<tensor<256xf32>>
  %b2 = lethe.recompute : tensor<256xf32> {
    %r = lethe.node "aten.gelu.default" bwd (%a2) {name = "gelu", time_us = 3.0 : f64, lethe.offsets = array<i64: 3072>} : (tensor<256xf32>) -> tensor<256xf32>
    lethe.yield %r : tensor<256xf32>
  }
  %g2 = lethe.node "aten.gelu_backward.default" bwd (%g, %b2, %a2) {name = "gelu_backward", time_us = 4.0 : f64, lethe.offsets = array<i64: 2048>} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %g : tensor<256xf32>
  lethe.release %b2 : tensor<256xf32>
  lethe.release %a2 : tensor<256xf32>
  return %g2 : tensor<256xf32>
}
}

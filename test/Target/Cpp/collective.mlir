// RUN: lethe-translate --lethe-to-cpp --lethe-program-name=fsdp-unit %s | FileCheck %s
// RUN: lethe-opt %s --lethe-verify -o /dev/null
// RUN: lethe-translate --lethe-to-cpp %s -o %t.cpp
// RUN: %host_cxx -std=c++17 -fsyntax-only -Wall -Werror -I%lethe_src/include -x c++ %t.cpp

// An FSDP unit over two ranks: the comm stream all-gathers the weight shard
// after a compute barrier, compute awaits a comm barrier before reading the
// gathered weight, and the gradient is reduce-scattered back to a shard.

// CHECK-LABEL: static LetheRtStatus step(
// CHECK: // %0 = lethe.barrier on compute
// CHECK-NEXT: letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
// CHECK-NEXT: // %1 = lethe.await (%0, %arg0) on comm
// CHECK-NEXT: letheRtWait(rt, LETHE_STREAM_COMM, 0);
// CHECK-NEXT: // %2 = lethe.collective all_gather "ag" fwd (%1) over 2 ranks
// CHECK-NEXT: letheRtAllGather(rt, "all_gather ag", w_shard, ag, LETHE_DTYPE_F32);
// CHECK-NEXT: // %3 = lethe.barrier on comm
// CHECK-NEXT: letheRtRecord(rt, LETHE_STREAM_COMM, 1);
// A join awaits each of its events (compute recorded event 2 itself).
// CHECK-NEXT: // %4 = lethe.barrier on compute
// CHECK-NEXT: letheRtRecord(rt, LETHE_STREAM_COMPUTE, 2);
// CHECK-NEXT: // %5 = lethe.join (%3, %4): events 1, 2
// CHECK-NEXT: // lethe.await (%5) on compute
// CHECK-NEXT: letheRtWait(rt, LETHE_STREAM_COMPUTE, 1);
// CHECK-NOT: letheRtWait(rt, LETHE_STREAM_COMPUTE, 2);
// CHECK: letheRtReplay(rt, "aten.mul.Tensor mul", 2.0, {ag, x}, {mul});
// CHECK: letheRtReduceScatter(rt, "reduce_scatter rs", mul, rs, LETHE_DTYPE_F32);
// CHECK: letheRtRelease(rt, LETHE_STREAM_COMPUTE, mul);
// The planner's prediction is the program's planned step time.
// CHECK: // Planned step: 12.5 us (lethe.plan step_us, planned activation peak 3072 bytes).
// CHECK: static const LetheRtProgram program = {LETHE_RT_ABI_VERSION, "fsdp-unit", 4608, 0, 5, 2, 12.5, 4608,

module attributes {lethe.arena_alignment = 256 : i64, lethe.device_arena_bytes = 3072 : i64, lethe.host_arena_bytes = 0 : i64} {
func.func @step(%w: tensor<128xf32> {lethe.kind = "param", lethe.name = "w_shard"}, %x: tensor<256xf32> {lethe.kind = "input", lethe.name = "x"}) -> tensor<128xf32> attributes {lethe.plan = #lethe.plan<policy = none, budget_bytes = 9223372036854775807, feasible = true, peak_bytes = 3072, baseline_peak_bytes = 3072, step_us = 12.5, baseline_step_us = 12.5, overhead = 0.0>} {
  %t0 = lethe.barrier
  %c = lethe.await %t0 => %w : tensor<128xf32> {lethe.stream = #lethe<stream comm>}
  %g = lethe.collective all_gather %c group [0, 1] fwd {name = "ag", time_us = 5.0 : f64, lethe.offsets = array<i64: 0>} : tensor<128xf32> -> tensor<256xf32>
  %t1 = lethe.barrier {lethe.stream = #lethe<stream comm>}
  %t2 = lethe.barrier
  %j = lethe.join %t1, %t2
  lethe.await %j
  %y = lethe.node "aten.mul.Tensor" fwd (%g, %x) {name = "mul", time_us = 2.0 : f64, lethe.offsets = array<i64: 1024>} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %t3 = lethe.barrier
  %y2 = lethe.await %t3 => %y : tensor<256xf32> {lethe.stream = #lethe<stream comm>}
  %rs = lethe.collective reduce_scatter %y2 group [0, 1] bwd {name = "rs", time_us = 5.0 : f64, lethe.offsets = array<i64: 2048>} : tensor<256xf32> -> tensor<128xf32>
  %t4 = lethe.barrier {lethe.stream = #lethe<stream comm>}
  lethe.release %g await(%t4) : tensor<256xf32>
  lethe.release %y : tensor<256xf32>
  return %rs : tensor<128xf32>
}
}

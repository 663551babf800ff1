// RUN: lethe-translate --lethe-to-cpp --lethe-program-name=fsdp-yield %s | FileCheck %s
// RUN: lethe-translate --lethe-to-cpp %s -o %t.cpp
// RUN: %host_cxx -std=c++17 -fsyntax-only -Wall -Werror -I%lethe_src/include -x c++ %t.cpp

// lethe-schedule chose contention=yield: the step turns yielding on first,
// with the chunk size the schedule recorded; copies and collectives are
// emitted as usual (the runtime chunks the copies and opens a window around
// each collective).

// CHECK-LABEL: static LetheRtStatus step(
// CHECK-NEXT: LetheRt *rt = {{.*}};
// CHECK-NEXT: // Copies yield to collectives (lethe-schedule contention=yield), in chunks of 8388608 bytes.
// CHECK-NEXT: letheRtSetCopyYield(rt, 8388608);
// CHECK: letheRtAllGather(rt, "all_gather ag", w_shard, ag, LETHE_DTYPE_F32);
// CHECK: letheRtCopyD2H(
// CHECK-LABEL: static LetheRtStatus checksum(
// CHECK-NOT: letheRtSetCopyYield

module attributes {lethe.arena_alignment = 256 : i64, lethe.device_arena_bytes = 3072 : i64, lethe.host_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<128xf32> {lethe.kind = "param", lethe.name = "w_shard"}, %x: tensor<256xf32> {lethe.kind = "input", lethe.name = "x"}) -> tensor<256xf32> attributes {lethe.contention = #lethe<contention yield>, lethe.copy_chunk_bytes = 8388608 : i64} {
  %t0 = lethe.barrier
  %c = lethe.await %t0 => %w : tensor<128xf32> {lethe.stream = #lethe<stream comm>}
  %g = lethe.collective all_gather %c group [0, 1] fwd {name = "ag", time_us = 5.0 : f64, lethe.offsets = array<i64: 0>} : tensor<128xf32> -> tensor<256xf32>
  %t1 = lethe.barrier {lethe.stream = #lethe<stream comm>}
  lethe.await %t1
  %y = lethe.node "aten.mul.Tensor" fwd (%g, %x) {name = "mul", time_us = 2.0 : f64, lethe.offsets = array<i64: 1024>} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %t2 = lethe.barrier
  %h, %tp = lethe.offload %y await(%t2) {lethe.offsets = array<i64: 0, -1>, lethe.stream = #lethe<stream d2h>} : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  lethe.release %g await(%t1) : tensor<256xf32>
  return %y : tensor<256xf32>
}
}

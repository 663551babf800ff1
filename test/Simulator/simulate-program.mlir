// RUN: split-file %s %t
// RUN: lethe-opt %t/planned.mlir --lethe-materialize --lethe-schedule --test-lethe-simulate-program -o /dev/null | FileCheck %s
// RUN: lethe-opt %t/exposed.mlir --test-lethe-simulate-program='device=h200-pcie' -o /dev/null | FileCheck %s --check-prefix=COPIES

//--- planned.mlir

// The simulator runs the program as the IR says. After materialize: the
// offload and the prefetch hide behind the compute stream, which runs 5
// nodes and one re-run gelu, 460 us of kernels. On the calibrated h200
// (the default profile) running them costs more: the two waits the
// compute stream issues for the copies, 1.5 us each (wait_us), and the
// matrix products beside the copies run x1.052 slower: 464.4 us. The gelu
// and its re-run are not slowed: they move 2 MiB in 20 us, 2.6% of what
// the profile's memory-bound kernel streams in that time
// (memory_kernel_gb_per_s), and only a kernel's memory traffic is slowed
// beside copies. The offload moves 1 MiB at 55.1 GB/s
// (19.03 us) plus its fixed 2.61 us and a 1.5 us wait for the compute
// stream: 23.14 us, 23.18 slowed a little beside the kernels; the prefetch
// 18.93 + 2.73 + two waits (the compute stream and the offload).
// CHECK: func @step
// CHECK-NEXT: step_us 464.377
// CHECK-NEXT: peak_bytes 3145728
// CHECK-NEXT: host_peak_bytes 1048576
// CHECK-NEXT: exposed_copy_us 0.000
// CHECK-NEXT: busy_us.compute 464.377
// CHECK-NEXT: busy_us.d2h 23.184
// CHECK-NEXT: busy_us.h2d 24.682
// CHECK-NEXT: busy_us.comm 0.000
func.func @step(%x: tensor<512x512xf32> {lethe.kind = "input"}, %w: tensor<512x512xf32> {lethe.kind = "param"}) -> tensor<512x512xf32> {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.decisions = [#lethe<decision offload>]} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %1 = lethe.node "aten.gelu.default" fwd (%0) {time_us = 20.0 : f64, lethe.decisions = [#lethe<decision recompute>]} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = lethe.node "aten.mm.default" fwd (%1, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %4 = lethe.node "aten.gelu_backward.default" bwd (%3, %0) {time_us = 20.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %5 = lethe.node "aten.mm.default" bwd (%4, %1) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %5 : tensor<512x512xf32>
}

//--- exposed.mlir
// A copy the compute stream waits for right away is exposed: here the
// release waits for the whole D2H copy (1 MiB over 55.3 GB/s).
// COPIES: func @exposed
// COPIES-NEXT: step_us 38.962
// COPIES: exposed_copy_us 18.962
func.func @exposed(%x: tensor<512x512xf32>) {
  %0 = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %t = lethe.barrier
  %h, %d = lethe.offload %0 await(%t) : tensor<512x512xf32> -> !lethe.host<tensor<512x512xf32>>
  lethe.release %0 await(%d) : tensor<512x512xf32>
  %1 = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  lethe.release %1 : tensor<512x512xf32>
  lethe.release %h : !lethe.host<tensor<512x512xf32>>
  return
}

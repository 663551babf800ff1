// RUN: split-file %s %t
// RUN: lethe-opt %t/hidden.mlir --lethe-schedule='place-prefetches=true' | FileCheck %t/hidden.mlir
// RUN: lethe-opt %t/hidden.mlir --lethe-schedule='place-prefetches=true' --lethe-assign-buffers --lethe-verify -o /dev/null
// RUN: lethe-opt %t/hidden.mlir --lethe-schedule --test-lethe-simulate-program -o /dev/null | FileCheck %t/hidden.mlir --check-prefix=AS-IS
// RUN: lethe-opt %t/hidden.mlir --lethe-schedule='place-prefetches=true' --test-lethe-simulate-program -o /dev/null | FileCheck %t/hidden.mlir --check-prefix=PLACED
// RUN: lethe-opt %t/budget.mlir --lethe-schedule='place-prefetches=true' | FileCheck %t/budget.mlir
// RUN: lethe-opt %t/budget.mlir --lethe-schedule='place-prefetches=true' --lethe-assign-buffers --lethe-verify -o /dev/null

//--- hidden.mlir

// A prefetch written right before its reader is exposed: the compute
// stream waits for the whole copy (on the calibrated h200: 1 MiB at
// 55.4 GB/s, 18.927 us, plus the copy's fixed 2.73 us and the two waits
// its issue needs, 1.5 us each: 24.657 us). Placed, it is issued before
// the last 100 us node, which hides it, and no earlier, so its buffer is
// held as briefly as it can be. Either way the compute stream also pays
// 3 us of waits (320 us of kernels: 323 us). Its kernels are not slowed
// beside the copies: each moves 2 MiB in 10-100 us, a few percent of what
// the memory-bound kernel the h200 profile measured streams in that time
// (memory_kernel_gb_per_s), so the copies' share of HBM costs them nothing.

// AS-IS: step_us 347.657
// AS-IS: exposed_copy_us 24.657
// PLACED: step_us 323.000
// PLACED: exposed_copy_us 0.000

// CHECK-LABEL: func.func @step
func.func @step(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %a = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %t0 = lethe.barrier
  %h, %d = lethe.offload %a await(%t0) : tensor<256x1024xf32> -> !lethe.host<tensor<256x1024xf32>>
  %b = lethe.node "aten.relu.default" fwd (%x) {time_us = 100.0 : f64} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  lethe.release %a await(%d) : tensor<256x1024xf32>
  // CHECK: %[[C:.*]] = lethe.node "aten.neg.default" bwd
  // CHECK-NEXT: %[[B:.*]] = lethe.barrier {lethe.stream = #lethe<stream compute>}
  // CHECK-NEXT: %[[J:.*]] = lethe.join %{{.*}}, %[[B]]
  // CHECK-NEXT: %[[P:.*]], %[[PD:.*]] = lethe.prefetch %{{.*}} await(%[[J]])
  // CHECK-NEXT: lethe.node "aten.neg.default" bwd
  %c = lethe.node "aten.neg.default" bwd (%b) {time_us = 100.0 : f64} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %e = lethe.node "aten.neg.default" bwd (%c) {time_us = 100.0 : f64} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %t1 = lethe.barrier
  %j = lethe.join %d, %t1
  %p, %pd = lethe.prefetch %h await(%j) : !lethe.host<tensor<256x1024xf32>> -> tensor<256x1024xf32>
  // CHECK: lethe.await %[[PD]] => %[[P]]
  %z = lethe.await %pd => %p : tensor<256x1024xf32>
  lethe.release %h await(%pd) : !lethe.host<tensor<256x1024xf32>>
  %f = lethe.node "aten.add.Tensor" bwd (%z, %e) {time_us = 10.0 : f64} : (tensor<256x1024xf32>, tensor<256x1024xf32>) -> tensor<256x1024xf32>
  lethe.release %z : tensor<256x1024xf32>
  lethe.release %b : tensor<256x1024xf32>
  lethe.release %c : tensor<256x1024xf32>
  lethe.release %e : tensor<256x1024xf32>
  return %f : tensor<256x1024xf32>
}

//--- budget.mlir
// Issued one node earlier, the prefetched buffer would be live beside %c
// (2 MiB) and %e: 4 MiB, over the 3 MiB budget; it stays where it is.
module attributes {lethe.budget_bytes = 3145728 : i64} {
// CHECK-LABEL: func.func @budget
func.func @budget(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %a = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %t0 = lethe.barrier
  %h, %d = lethe.offload %a await(%t0) : tensor<256x1024xf32> -> !lethe.host<tensor<256x1024xf32>>
  %b = lethe.node "aten.relu.default" fwd (%x) {time_us = 100.0 : f64} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  lethe.release %a await(%d) : tensor<256x1024xf32>
  %c = lethe.node "aten.cat.default" bwd (%b) {time_us = 100.0 : f64} : (tensor<256x1024xf32>) -> tensor<512x1024xf32>
  lethe.release %b : tensor<256x1024xf32>
  // CHECK: lethe.node "aten.slice.default" bwd
  // CHECK-NEXT: lethe.release
  // CHECK-NEXT: lethe.barrier
  // CHECK-NEXT: lethe.join
  // CHECK-NEXT: lethe.prefetch
  %e = lethe.node "aten.slice.default" bwd (%c) {time_us = 100.0 : f64} : (tensor<512x1024xf32>) -> tensor<256x1024xf32>
  lethe.release %c : tensor<512x1024xf32>
  %p, %pd = lethe.prefetch %h : !lethe.host<tensor<256x1024xf32>> -> tensor<256x1024xf32>
  %z = lethe.await %pd => %p : tensor<256x1024xf32>
  lethe.release %h await(%pd) : !lethe.host<tensor<256x1024xf32>>
  %f = lethe.node "aten.add.Tensor" bwd (%z, %e) {time_us = 10.0 : f64} : (tensor<256x1024xf32>, tensor<256x1024xf32>) -> tensor<256x1024xf32>
  lethe.release %z : tensor<256x1024xf32>
  lethe.release %e : tensor<256x1024xf32>
  return %f : tensor<256x1024xf32>
}
}

// What running a plan costs beyond its ops' times: the simulator's terms for
// copies beside kernels, copies of several ranks of one host, and launching
// the step (docs/Planner.md, "Time model"). Each RUN line simulates the same
// programs on a profile (Inputs/) that has one group of these figures; on
// Inputs/plain.json, which has none of them, the programs run as before.
// Copies move 1,000,000 bytes (tensor<250x1000xf32>) at 50 GB/s: 20 us.
//
// RUN: split-file %s %t
// RUN: lethe-opt %t/beside.mlir --test-lethe-simulate-program='device=%S/Inputs/plain.json' -o /dev/null | FileCheck %s --check-prefix=PLAIN
// RUN: lethe-opt %t/beside.mlir --test-lethe-simulate-program='device=%S/Inputs/contended.json' -o /dev/null | FileCheck %s --check-prefix=CONTENDED
// RUN: lethe-opt %t/host.mlir --test-lethe-simulate-program='device=%S/Inputs/plain.json' -o /dev/null | FileCheck %s --check-prefix=HOST-PLAIN
// RUN: lethe-opt %t/host.mlir --test-lethe-simulate-program='device=%S/Inputs/shared-host.json' -o /dev/null | FileCheck %s --check-prefix=HOST
// RUN: lethe-opt %t/launch.mlir --test-lethe-simulate-program='device=%S/Inputs/plain.json' -o /dev/null | FileCheck %s --check-prefix=LAUNCH-PLAIN
// RUN: lethe-opt %t/launch.mlir --test-lethe-simulate-program='device=%S/Inputs/launch.json' -o /dev/null | FileCheck %s --check-prefix=EAGER
// RUN: lethe-opt %t/launch.mlir --test-lethe-simulate-program='device=%S/Inputs/launch.json graph=true' -o /dev/null | FileCheck %s --check-prefix=GRAPH

//--- beside.mlir

// An offload runs beside a 100 us matrix product, then beside a 100 us
// memory-bound kernel.
//
// Without run costs the copy takes its 20 us and hides: the step is the
// compute stream's 10 + 100 us.
// PLAIN: func @beside_matmul
// PLAIN-NEXT: step_us 110.000
// PLAIN: busy_us.d2h 20.000
// PLAIN: func @beside_memory_bound
// PLAIN-NEXT: step_us 110.000
// PLAIN: busy_us.d2h 20.000
//
// Inputs/contended.json: the copy costs 5 us more (d2h_fixed_us), 25 us of
// work, and moves at half its rate beside a matrix product
// (copy_slowdown_with_matmul 0.5): 50 us. For those 50 us the product runs
// 1.25 times slower (matmul_slowdown_with_copies): it does 40 us of its
// work, the other 60 at full rate, and ends at 10 + 50 + 60 = 120 us.
// CONTENDED: func @beside_matmul
// CONTENDED-NEXT: step_us 120.000
// CONTENDED: busy_us.compute 120.000
// CONTENDED-NEXT: busy_us.d2h 50.000
//
// Beside a memory-bound kernel the copy moves at a quarter of its rate
// (copy_slowdown_with_memory_bound 0.25): 100 us, during which the kernel
// runs twice as slow (memory_bound_slowdown_with_copies 2) and does 50 us
// of its work; the other 50 end it at 10 + 100 + 50 = 160 us.
// CONTENDED: func @beside_memory_bound
// CONTENDED-NEXT: step_us 160.000
// CONTENDED: busy_us.d2h 100.000
func.func @beside_matmul(%x: tensor<250x1000xf32>, %w: tensor<1000x1000xf32>) {
  %a = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %t = lethe.barrier
  %h, %d = lethe.offload %a await(%t) : tensor<250x1000xf32> -> !lethe.host<tensor<250x1000xf32>>
  %b = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64} : (tensor<250x1000xf32>, tensor<1000x1000xf32>) -> tensor<250x1000xf32>
  lethe.release %a await(%d) : tensor<250x1000xf32>
  lethe.release %b : tensor<250x1000xf32>
  lethe.release %h : !lethe.host<tensor<250x1000xf32>>
  return
}
func.func @beside_memory_bound(%x: tensor<250x1000xf32>) {
  %a = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %t = lethe.barrier
  %h, %d = lethe.offload %a await(%t) : tensor<250x1000xf32> -> !lethe.host<tensor<250x1000xf32>>
  %b = lethe.node "aten.gelu.default" fwd (%x) {time_us = 100.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  lethe.release %a await(%d) : tensor<250x1000xf32>
  lethe.release %b : tensor<250x1000xf32>
  lethe.release %h : !lethe.host<tensor<250x1000xf32>>
  return
}

//--- host.mlir

// An offload alone (10-30 us), then an offload and a prefetch at once from
// 40 us, on a rank alone on its host and on one of two ranks of a host
// (lethe.ranks_per_host, which lethe-insert-fsdp-collectives and
// lethe-expand-pipeline-schedule record).
//
// Without host figures both copies run at 50 GB/s: the step ends at 60 us.
// HOST-PLAIN: func @one_rank
// HOST-PLAIN-NEXT: step_us 60.000
// HOST-PLAIN: func @two_ranks
// HOST-PLAIN-NEXT: step_us 60.000
//
// Inputs/shared-host.json: the host reaches 100 GB/s D2H, 60 H2D and 80 in
// both directions together. One rank: alone each direction keeps its
// 50 GB/s; together 100 > 80, so both run at 40: 25 us, the step ends at
// 65 us.
// (D2H busy time: 20 us for the lone offload, then 25.)
// HOST: func @one_rank
// HOST-NEXT: step_us 65.000
// HOST: busy_us.d2h 45.000
// HOST-NEXT: busy_us.h2d 25.000
//
// Two ranks copying at once: each gets half of the host. The lone offload
// keeps 50 GB/s (100 / 2). Together, H2D is capped at 60 / 2 = 30 and the
// pair at 80 / 2 = 40, shared 25 : 15 GB/s: the offload takes 40 us; the
// prefetch has then moved 600,000 bytes and moves the rest at 30 GB/s in
// 13.33 us: the step ends at 40 + 53.33 = 93.33 us.
// HOST: func @two_ranks
// HOST-NEXT: step_us 93.333
// HOST: busy_us.d2h 60.000
// HOST-NEXT: busy_us.h2d 53.333
func.func @one_rank(%x: tensor<250x1000xf32>) {
  %a = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %t0 = lethe.barrier
  %ha, %da = lethe.offload %a await(%t0) : tensor<250x1000xf32> -> !lethe.host<tensor<250x1000xf32>>
  lethe.release %a await(%da) : tensor<250x1000xf32>
  %b = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %t1 = lethe.barrier
  %hb, %db = lethe.offload %b await(%t1) : tensor<250x1000xf32> -> !lethe.host<tensor<250x1000xf32>>
  %p, %pd = lethe.prefetch %ha await(%t1) : !lethe.host<tensor<250x1000xf32>> -> tensor<250x1000xf32>
  lethe.release %b await(%db) : tensor<250x1000xf32>
  lethe.release %p await(%pd) : tensor<250x1000xf32>
  lethe.release %ha : !lethe.host<tensor<250x1000xf32>>
  lethe.release %hb : !lethe.host<tensor<250x1000xf32>>
  return
}
func.func @two_ranks(%x: tensor<250x1000xf32>) attributes {lethe.ranks_per_host = 2 : i64} {
  %a = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %t0 = lethe.barrier
  %ha, %da = lethe.offload %a await(%t0) : tensor<250x1000xf32> -> !lethe.host<tensor<250x1000xf32>>
  lethe.release %a await(%da) : tensor<250x1000xf32>
  %b = lethe.node "aten.relu.default" fwd (%x) {time_us = 10.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %t1 = lethe.barrier
  %hb, %db = lethe.offload %b await(%t1) : tensor<250x1000xf32> -> !lethe.host<tensor<250x1000xf32>>
  %p, %pd = lethe.prefetch %ha await(%t1) : !lethe.host<tensor<250x1000xf32>> -> tensor<250x1000xf32>
  lethe.release %b await(%db) : tensor<250x1000xf32>
  lethe.release %p await(%pd) : tensor<250x1000xf32>
  lethe.release %ha : !lethe.host<tensor<250x1000xf32>>
  lethe.release %hb : !lethe.host<tensor<250x1000xf32>>
  return
}

//--- launch.mlir

// Three 5 us kernels and a 20 us offload, launched eagerly and as a CUDA
// graph. Without launch figures: 5 + 5 + 5 us on the compute stream, the
// offload (5-25 us) hides until the release waits for it: 25 us.
// LAUNCH-PLAIN: func @launch
// LAUNCH-PLAIN-NEXT: step_us 25.000
//
// Eager (Inputs/launch.json): the host enqueues a kernel or copy every
// 20 us (host_launch_us) and nothing starts before the host has enqueued
// what precedes it: a at 0, the offload at 20 us, b at 40, c at 60, the
// release at 80. The offload waits for the compute stream's barrier
// (wait_us 3, and event_record_us 1 on the barrier) and is waited for by
// the release (3 more on the release, 1 on the offload): 24 us of work,
// done at 44 us. The step ends at 80 + 3 = 83 us: host-bound.
// EAGER: func @launch
// EAGER-NEXT: step_us 83.000
// EAGER: busy_us.d2h 24.000
//
// As a CUDA graph: launched at 10 us (graph_launch_us), no host bound, no
// kernel shorter than 8 us (graph_kernel_us), 0.5 us per cross-stream wait
// (graph_wait_us): a 10-18 us, the offload 18-38.5 us, b and c to 34 us,
// the release waits for the offload: 39 us.
// GRAPH: func @launch
// GRAPH-NEXT: step_us 39.000
// GRAPH: busy_us.compute 24.500
func.func @launch(%x: tensor<250x1000xf32>) {
  %a = lethe.node "aten.relu.default" fwd (%x) {time_us = 5.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %t = lethe.barrier
  %h, %d = lethe.offload %a await(%t) : tensor<250x1000xf32> -> !lethe.host<tensor<250x1000xf32>>
  %b = lethe.node "aten.relu.default" fwd (%x) {time_us = 5.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  %c = lethe.node "aten.relu.default" fwd (%x) {time_us = 5.0 : f64} : (tensor<250x1000xf32>) -> tensor<250x1000xf32>
  lethe.release %a await(%d) : tensor<250x1000xf32>
  lethe.release %b : tensor<250x1000xf32>
  lethe.release %c : tensor<250x1000xf32>
  lethe.release %h : !lethe.host<tensor<250x1000xf32>>
  return
}

// RUN: lethe-opt %s --lethe-schedule | FileCheck %s
// RUN: lethe-opt %s --lethe-schedule | lethe-opt --lethe-schedule | FileCheck %s
// RUN: lethe-opt %s --lethe-schedule --lethe-verify=allocated=false -o /dev/null
// RUN: lethe-opt %s --lethe-schedule --lethe-assign-buffers --lethe-verify -o /dev/null
// RUN: lethe-opt %s --lethe-schedule='device=h200-pcie' | FileCheck %s --check-prefix=APART
// RUN: lethe-opt %s --lethe-schedule='device=h200-pcie' --lethe-assign-buffers --lethe-verify -o /dev/null
// RUN: lethe-opt %s --lethe-schedule='device=h200-pcie contention=off' | FileCheck %s
// RUN: not lethe-opt %s --lethe-schedule='contention=maybe' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: lethe-opt %s --lethe-schedule='write-streams=false' | FileCheck %s --check-prefix=QUIET
// RUN: lethe-opt %s --lethe-schedule='write-streams=false' | lethe-opt --lethe-schedule | FileCheck %s
// RUN: not lethe-opt %s --lethe-schedule='device=tpu9' 2>&1 | FileCheck %s --check-prefix=NODEV

// BAD: error: lethe-schedule: contention must be auto, on, off or yield, got 'maybe'
// NODEV: error: lethe-schedule: {{.*}}tpu9

// An explicit program without any synchronisation: lethe-schedule puts
// every op on its stream and adds the barriers and awaits the program needs,
// and nothing more (running it twice gives the same program).

// With write-streams=false (the pipeline's feasibility check, which only
// measures the program) the ops keep no stream of their own, the barriers
// and awaits inserted theirs; scheduled again with the streams written, it
// is the program above: the same barriers and awaits.
// QUIET-LABEL: func.func @step
// QUIET-NEXT: lethe.node "aten.mm.default" fwd (%arg0) : (tensor<256xf32>) -> tensor<256xf32>
// QUIET-NEXT: lethe.barrier {lethe.stream = #lethe<stream compute>}
// QUIET-NEXT: lethe.offload %0 await(%1) : tensor<256xf32>
// QUIET: lethe.await %3 {lethe.stream = #lethe<stream comm>}
// QUIET-NEXT: lethe.collective all_reduce %2 group [0, 1] bwd : tensor<256xf32>

// CHECK-LABEL: func.func @step
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  // CHECK: %[[A:.*]] = lethe.node "aten.mm.default" {{.*}}lethe.stream = #lethe<stream compute>
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  // The D2H copy waits for its producer.
  // CHECK-NEXT: %[[B0:.*]] = lethe.barrier {lethe.stream = #lethe<stream compute>}
  // CHECK-NEXT: %[[H:.*]], %[[D:.*]] = lethe.offload %[[A]] await(%[[B0]]) {lethe.stream = #lethe<stream d2h>}
  %h, %d = lethe.offload %a : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  // CHECK-NEXT: %[[G:.*]] = lethe.node "aten.gelu.default"
  %b = lethe.node "aten.gelu.default" fwd (%a) : (tensor<256xf32>) -> tensor<256xf32>
  // The device buffer is freed once the copy is done.
  // CHECK-NEXT: lethe.release %[[A]] await(%[[D]]) {lethe.stream = #lethe<stream compute>}
  lethe.release %a : tensor<256xf32>
  // The collective reads a compute result.
  // CHECK-NEXT: %[[B1:.*]] = lethe.barrier {lethe.stream = #lethe<stream compute>}
  // CHECK-NEXT: lethe.await %[[B1]] {lethe.stream = #lethe<stream comm>}
  // CHECK-NEXT: %[[R:.*]] = lethe.collective all_reduce %[[G]] {{.*}}lethe.stream = #lethe<stream comm>
  %g = lethe.collective all_reduce %b group [0, 1] bwd : tensor<256xf32> -> tensor<256xf32>
  // The prefetch reads the host copy and may reuse memory released before
  // it: it awaits the copy and a compute barrier after the release.
  // CHECK-NEXT: %[[J:.*]] = lethe.join %[[D]], %[[B1]]
  // CHECK-NEXT: %[[P:.*]], %[[PD:.*]] = lethe.prefetch %[[H]] await(%[[J]]) {lethe.stream = #lethe<stream h2d>}
  %p, %pd = lethe.prefetch %h : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
  // The collective's input is freed after the collective is done.
  // CHECK-NEXT: %[[C0:.*]] = lethe.barrier {lethe.stream = #lethe<stream comm>}
  // CHECK-NEXT: lethe.release %[[G]] await(%[[C0]])
  lethe.release %b : tensor<256xf32>
  // Compute reads the prefetched value after its copy.
  // CHECK-NEXT: lethe.await %[[PD]] {lethe.stream = #lethe<stream compute>}
  // CHECK-NEXT: lethe.node "aten.add.Tensor" bwd (%[[R]], %[[P]])
  %c = lethe.node "aten.add.Tensor" bwd (%g, %p) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %g : tensor<256xf32>
  lethe.release %p : tensor<256xf32>
  lethe.release %h : !lethe.host<tensor<256xf32>>
  return %c : tensor<256xf32>
}

// Where copies and collectives contend (h200-pcie: all-gather x1.39 beside a
// copy), a collective waits for the copies before it and a copy for the
// collectives before it.
// APART-LABEL: func.func @step
// APART: %[[H:.*]], %[[D:.*]] = lethe.offload
// APART: %[[B1:.*]] = lethe.barrier {lethe.stream = #lethe<stream compute>}
// APART-NEXT: lethe.await %[[B1]], %[[D]] {lethe.stream = #lethe<stream comm>}
// APART-NEXT: lethe.collective all_reduce
// APART-NEXT: %[[C:.*]] = lethe.barrier {lethe.stream = #lethe<stream comm>}
// APART-NEXT: %[[J:.*]] = lethe.join %[[D]], %[[B1]], %[[C]]
// APART-NEXT: lethe.prefetch %[[H]] await(%[[J]])

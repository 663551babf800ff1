// RUN: lethe-opt %s --lethe-assign-buffers --remarks-filter=lethe-assign-buffers --remark-format=emitRemark -verify-diagnostics | FileCheck %s
// RUN: sed 's/expected-remark.*//' %s | lethe-opt --lethe-assign-buffers --lethe-verify -o /dev/null 2>&1 | FileCheck %s --allow-empty --check-prefix=QUIET
// RUN: lethe-opt %s --lethe-assign-buffers='alignment=4096' --remarks-filter=lethe-assign-buffers --remark-format=emitRemark -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALIGN
// RUN: not lethe-opt %s --lethe-assign-buffers='alignment=100' 2>&1 | FileCheck %s --check-prefix=BADALIGN

// Each function's arena against its max-live is an analysis remark, shown
// with --remarks-filter=lethe-assign-buffers; without it the pass prints
// nothing (the QUIET run drops the expected-remark lines, which lethe-opt
// reports as not produced even without -verify-diagnostics).
// QUIET-NOT: {{.}}
// ALIGN: remark: [Analysis] arena | Category:lethe-assign-buffers | Function=layers | Remark="device arena 16384 bytes for a max-live of 16384 (+0.00%); host arena 4096 bytes for a max-live of 4096"
// ALIGN: remark: [Analysis] arena | Category:lethe-assign-buffers | Function=small | Remark="device arena 8192 bytes for a max-live of 8192 (+0.00%); host arena 0 bytes for a max-live of 0"
// BADALIGN: error: lethe-assign-buffers: alignment must be a power of two at most 4294967296, got 100

// The module records the largest arena of its functions.
// CHECK: module attributes {lethe.arena_alignment = 256 : i64, lethe.device_arena_bytes = 4352 : i64, lethe.host_arena_bytes = 1024 : i64, lethe.host_max_live_bytes = 1024 : i64, lethe.max_live_bytes = 4352 : i64}

// A forward/backward chain: activations freed in reverse order of
// allocation, temporaries in between. The arena meets max-live.
// CHECK-LABEL: func.func @layers
// expected-remark @+1 {{device arena 4352 bytes for a max-live of 4352 (+0.00%); host arena 1024 bytes for a max-live of 1024}}
func.func @layers(%w: tensor<256xf32>) -> tensor<256xf32> {
  // CHECK: %[[A:.*]] = lethe.node "aten.mm.default" fwd {{.*}}lethe.offsets = array<i64: [[OA:[0-9]+]]>
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  // Views and awaits allocate nothing; an offload's host result does.
  // CHECK: lethe.node "aten.view.default" fwd (%[[A]]) {aliases = array<i64: 0>} :
  %v = lethe.node "aten.view.default" fwd (%a) {aliases = array<i64: 0>} : (tensor<256xf32>) -> tensor<16x16xf32>
  %t0 = lethe.barrier
  // CHECK: lethe.offload {{.*}}lethe.offsets = array<i64: 0, -1>
  %h, %d = lethe.offload %a await(%t0) : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  %b:2 = lethe.node "aten.native_layer_norm.default" fwd (%v) : (tensor<16x16xf32>) -> (tensor<256xf32>, tensor<2xf32>)
  lethe.release %a await(%d) : tensor<256xf32>
  %c = lethe.node "aten.mm.default" fwd (%b#0) : (tensor<256xf32>) -> tensor<512xf32>
  %g = lethe.node "aten.mm.default" bwd (%c, %b#1) : (tensor<512xf32>, tensor<2xf32>) -> tensor<256xf32>
  lethe.release %c : tensor<512xf32>
  lethe.release %b#0 : tensor<256xf32>
  lethe.release %b#1 : tensor<2xf32>
  %t1 = lethe.barrier
  %p, %pd = lethe.prefetch %h await(%t1) : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
  %a2 = lethe.await %pd => %p : tensor<256xf32>
  lethe.release %h await(%pd) : !lethe.host<tensor<256xf32>>
  %r = lethe.recompute : tensor<256xf32> {
    %x = lethe.node "aten.gelu.default" bwd (%a2) : (tensor<256xf32>) -> tensor<256xf32>
    lethe.yield %x : tensor<256xf32>
  }
  %o = lethe.node "aten.gelu_backward.default" bwd (%g, %r) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %g : tensor<256xf32>
  lethe.release %r : tensor<256xf32>
  lethe.release %a2 : tensor<256xf32>
  return %o : tensor<256xf32>
}

// A second program shares the arena.
// CHECK-LABEL: func.func @small
// expected-remark @+1 {{device arena 2048 bytes for a max-live of 2048 (+0.00%); host arena 0 bytes for a max-live of 0}}
func.func @small(%w: tensor<256xf32>) {
  // The longest-lived of three equal buffers is placed first.
  // CHECK: lethe.offsets = array<i64: 1024>
  %a = lethe.node "aten.relu.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  // CHECK: lethe.offsets = array<i64: 0>
  %b = lethe.node "aten.relu.default" fwd (%a) : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %a : tensor<256xf32>
  // CHECK: lethe.offsets = array<i64: 1024>
  %c = lethe.node "aten.relu.default" fwd (%b) : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %b : tensor<256xf32>
  lethe.release %c : tensor<256xf32>
  return
}

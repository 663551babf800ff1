// RUN: lethe-opt %s -split-input-file -verify-diagnostics --lethe-verify

// One case per arena violation lethe-verify reports on allocated programs.

// expected-error @+1 {{module has no 'lethe.device_arena_bytes': run lethe-assign-buffers, or verify with allocated=false}}
module {
  func.func @no_arena() {
    return
  }
}

// -----

module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 0 : i64} {
  func.func @missing_offset(%w: tensor<256xf32>) {
    // expected-error @+1 {{result #0 (%0 ('aten.mm.default')) allocates 1024 bytes but has no arena offset}}
    %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
    lethe.release %a : tensor<256xf32>
    return
  }
}

// -----

module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 0 : i64} {
  func.func @offset_on_view(%w: tensor<256xf32>) {
    %a = lethe.node "aten.mm.default" fwd (%w) {lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
    // expected-error @+1 {{result #0 allocates nothing but has arena offset 1024}}
    %v = lethe.node "aten.view.default" fwd (%a) {aliases = array<i64: 0>, lethe.offsets = array<i64: 1024>} : (tensor<256xf32>) -> tensor<16x16xf32>
    lethe.release %a : tensor<256xf32>
    return
  }
}

// -----

module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 0 : i64} {
  func.func @offset_count(%w: tensor<256xf32>) {
    // expected-error @+1 {{has 1 arena offsets for 2 results}}
    %a:2 = lethe.node "aten.native_layer_norm.default" fwd (%w) {lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> (tensor<256xf32>, tensor<1xf32>)
    lethe.release %a#0 : tensor<256xf32>
    lethe.release %a#1 : tensor<1xf32>
    return
  }
}

// -----

module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 0 : i64, lethe.arena_alignment = 256 : i64} {
  func.func @misaligned(%w: tensor<256xf32>) {
    // expected-error @+1 {{result #0 has arena offset 100, not a multiple of the alignment 256}}
    %a = lethe.node "aten.mm.default" fwd (%w) {lethe.offsets = array<i64: 100>} : (tensor<256xf32>) -> tensor<256xf32>
    lethe.release %a : tensor<256xf32>
    return
  }
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64, lethe.host_arena_bytes = 0 : i64} {
  func.func @beyond_arena(%w: tensor<256xf32>) {
    // expected-error @+1 {{result #0 (%0 ('aten.mm.default')) at device arena [512, 1536) ends beyond the arena of 1024 bytes}}
    %a = lethe.node "aten.mm.default" fwd (%w) {lethe.offsets = array<i64: 512>} : (tensor<256xf32>) -> tensor<256xf32>
    lethe.release %a : tensor<256xf32>
    return
  }
}

// -----

module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 0 : i64, lethe.budget_bytes = 2048 : i64} {
  func.func @beyond_budget(%w: tensor<256xf32>) {
    // expected-error @+1 {{result #0 (%0 ('aten.mm.default')) at device arena [2048, 3072) ends beyond the budget of 2048 bytes}}
    %a = lethe.node "aten.mm.default" fwd (%w) {lethe.offsets = array<i64: 2048>} : (tensor<256xf32>) -> tensor<256xf32>
    lethe.release %a : tensor<256xf32>
    return
  }
}

// -----

// The recorded arena itself must fit the budget.
// expected-error @+1 {{device arena of 4096 bytes exceeds the budget of 2048 bytes}}
module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 0 : i64, lethe.budget_bytes = 2048 : i64} {
  func.func @arena_over_budget() {
    return
  }
}

// -----

module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 0 : i64} {
  func.func @overlap(%w: tensor<256xf32>) {
    // expected-note @+1 {{allocated here}}
    %a = lethe.node "aten.mm.default" fwd (%w) {lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
    // expected-error @+1 {{result #0 (%1 ('aten.relu.default')) at device arena [512, 1536) overlaps %0 ('aten.mm.default') at [0, 1024), which is still live}}
    %b = lethe.node "aten.relu.default" fwd (%a) {lethe.offsets = array<i64: 512>} : (tensor<256xf32>) -> tensor<256xf32>
    lethe.release %a : tensor<256xf32>
    lethe.release %b : tensor<256xf32>
    return
  }
}

// -----

// A prefetch may write memory freed by a release only after awaiting a
// compute barrier issued after that release: here the barrier comes first.
module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 1024 : i64} {
  func.func @prefetch_into_unreleased_memory(%w: tensor<256xf32>, %h: !lethe.host<tensor<256xf32>>) {
    %a = lethe.node "aten.mm.default" fwd (%w) {lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
    %t = lethe.barrier
    // expected-note @+1 {{released here}}
    lethe.release %a : tensor<256xf32>
    // expected-error @+1 {{writes device arena bytes of %0 ('aten.mm.default') on stream h2d before their release is awaited; await a compute barrier issued after the release}}
    %p, %d = lethe.prefetch %h await(%t) {lethe.offsets = array<i64: 0, -1>} : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
    %q = lethe.await %d => %p : tensor<256xf32>
    lethe.release %q : tensor<256xf32>
    return
  }
}

// -----

// Host buffers overlap-check in their own arena.
module attributes {lethe.device_arena_bytes = 4096 : i64, lethe.host_arena_bytes = 2048 : i64} {
  func.func @host_overlap(%w: tensor<256xf32>) {
    %t = lethe.barrier
    // expected-note @+1 {{allocated here}}
    %h1, %d1 = lethe.offload %w await(%t) {lethe.offsets = array<i64: 0, -1>} : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
    // expected-error @+1 {{result #0 (%result_0) at host arena [256, 1280) overlaps %result at [0, 1024), which is still live}}
    %h2, %d2 = lethe.offload %w await(%t) {lethe.offsets = array<i64: 256, -1>} : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
    %j = lethe.join %d1, %d2
    lethe.release %h1 await(%j) : !lethe.host<tensor<256xf32>>
    lethe.release %h2 : !lethe.host<tensor<256xf32>>
    return
  }
}

// RUN: lethe-opt %s --split-input-file --lethe-lower-to-runtime -verify-diagnostics
// RUN: not lethe-translate --lethe-to-cpp %S/Inputs/no-offsets.mlir -o %t.cpp 2>&1 | FileCheck %s --check-prefix=TRANSLATE
// RUN: not test -e %t.cpp

// Programs the runtime cannot run are refused at the op, naming the value.

// TRANSLATE: error: lethe-lower-to-runtime: result #0 (%0) has no arena offset: run lethe-assign-buffers

// expected-error @+1 {{lethe-lower-to-runtime: the module has no lethe.device_arena_bytes: lower an allocated program (run lethe-assign-buffers)}}
module {
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  %a = lethe.node "aten.relu.default" fwd (%w) {time_us = 2.0 : f64} : (tensor<256xf32>) -> tensor<256xf32>
  return %a : tensor<256xf32>
}
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  // expected-error @+1 {{lethe-lower-to-runtime: result #0 (%0) has no arena offset: run lethe-assign-buffers}}
  %a = lethe.node "aten.relu.default" fwd (%w) {time_us = 2.0 : f64} : (tensor<256xf32>) -> tensor<256xf32>
  return %a : tensor<256xf32>
}
}

// -----

module attributes {lethe.device_arena_bytes = 512 : i64} {
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  // expected-error @+1 {{lethe-lower-to-runtime: result #0 (%0) at [0, 1024) lies outside the device arena of 512 bytes}}
  %a = lethe.node "aten.relu.default" fwd (%w) {time_us = 2.0 : f64, lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
  return %a : tensor<256xf32>
}
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  // expected-error @+1 {{lethe-lower-to-runtime: %0 = aten.relu.default "relu" fwd (%arg0) has no time_us: run lethe-annotate-costs before lowering}}
  %a = lethe.node "aten.relu.default" fwd (%w) {name = "relu", lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
  return %a : tensor<256xf32>
}
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  // expected-error @+1 {{lethe-lower-to-runtime: %0 = aten.relu.default fwd (%arg0) is on the d2h stream; the runtime runs kernels on compute}}
  %a = lethe.node "aten.relu.default" fwd (%w) {time_us = 1.0 : f64, lethe.offsets = array<i64: 0>, lethe.stream = #lethe<stream d2h>} : (tensor<256xf32>) -> tensor<256xf32>
  return %a : tensor<256xf32>
}
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32>) {
  // expected-error @+1 {{lethe-lower-to-runtime: the runtime has no all_to_all collective}}
  %a = lethe.collective all_to_all %w group [0, 1] fwd {time_us = 1.0 : f64, lethe.offsets = array<i64: 0>} : tensor<256xf32> -> tensor<256xf32>
  return
}
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32>) {
  // expected-error @+1 {{lethe-lower-to-runtime: %arg0 is a function argument: it cannot be released}}
  lethe.release %w : tensor<256xf32>
  return
}
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step() {
  // expected-error @+1 {{lethe-lower-to-runtime: 'lethe.test.timeline_op' has no runtime call}}
  %t = lethe.test.timeline_op on compute {time_us = 5.0 : f64}
  return
}
}

// -----

// expected-error @+1 {{lethe-lower-to-runtime: a program is one function; the module has 2}}
module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @a() {
  return
}
func.func @b() {
  return
}
}

// -----

// expected-error @+1 {{lethe-lower-to-runtime: lethe.arena_alignment must be a power of two of at least 16 (the runtime's kernels move 16 bytes per access), got 8}}
module attributes {lethe.device_arena_bytes = 1024 : i64, lethe.arena_alignment = 8 : i64} {
func.func @step() {
  return
}
}

// -----

module attributes {lethe.device_arena_bytes = 1024 : i64} {
// expected-error @+1 {{lethe-lower-to-runtime: lethe.copy_chunk_bytes is 4096; the runtime takes chunks of at least 65536 bytes}}
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> attributes {lethe.contention = #lethe<contention yield>, lethe.copy_chunk_bytes = 4096 : i64} {
  %a = lethe.node "aten.relu.default" fwd (%w) {time_us = 2.0 : f64, lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
  return %a : tensor<256xf32>
}
}

// -----

// The second send of NCCL group 1 reads a tensor computed after compute
// waited for the first send; NCCL launches both only at the group's end.
module attributes {lethe.device_arena_bytes = 2048 : i64} {
func.func @step(%w: tensor<256xf32>) {
  %a = lethe.node "aten.relu.default" fwd (%w) {time_us = 1.0 : f64, lethe.offsets = array<i64: 0>} : (tensor<256xf32>) -> tensor<256xf32>
  %t0 = lethe.barrier
  %a2 = lethe.await %t0 => %a : tensor<256xf32> {lethe.stream = #lethe<stream comm>}
  lethe.collective send %a2 peer 1 group [0, 1] fwd {lethe.p2p_group = 1 : i64, time_us = 1.0 : f64} : tensor<256xf32>
  %t1 = lethe.barrier {lethe.stream = #lethe<stream comm>}
  lethe.await %t1
  %b = lethe.node "aten.relu.default" fwd (%a) {time_us = 1.0 : f64, lethe.offsets = array<i64: 1024>} : (tensor<256xf32>) -> tensor<256xf32>
  %t2 = lethe.barrier
  %b2 = lethe.await %t2 => %b : tensor<256xf32> {lethe.stream = #lethe<stream comm>}
  // expected-error @+1 {{cannot be issued in NCCL group 1: it needs an op that waits for an earlier transfer of the group}}
  lethe.collective send %b2 peer 1 group [0, 1] fwd {lethe.p2p_group = 1 : i64, time_us = 1.0 : f64} : tensor<256xf32>
  return
}
}

// -----

// Another collective between two transfers of a group.
module attributes {lethe.device_arena_bytes = 2048 : i64} {
func.func @step(%w: tensor<256xf32>) {
  lethe.collective send %w peer 1 group [0, 1] fwd {lethe.p2p_group = 3 : i64, time_us = 1.0 : f64} : tensor<256xf32>
  // expected-error @+1 {{lies inside NCCL group 3 (between its transfers), where no other collective can be issued}}
  %r = lethe.collective all_reduce %w group [0, 1] fwd {time_us = 1.0 : f64, lethe.offsets = array<i64: 0>} : tensor<256xf32> -> tensor<256xf32>
  %g = lethe.collective recv peer 1 group [0, 1] bwd {lethe.p2p_group = 3 : i64, time_us = 1.0 : f64, lethe.offsets = array<i64: 1024>} : -> tensor<256xf32>
  return
}
}

// -----

// Stage 1 of a pipeline sending to itself.
module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32>) attributes {lethe.pipeline = #lethe.pipeline<schedule = "1f1b", stages = 2, stage = 1, microbatches = 1, vpp = 1>} {
  // expected-error @+1 {{names its own stage 1 as the peer}}
  lethe.collective send %w peer 1 group [0, 1] fwd {time_us = 1.0 : f64} : tensor<256xf32>
  return
}
}

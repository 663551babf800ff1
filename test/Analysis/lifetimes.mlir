// RUN: lethe-opt %s -test-lethe-lifetimes -split-input-file -o /dev/null | FileCheck %s

// A two-layer chain: forward mm -> view -> relu, backward reads the relu
// output and the view (through its alias of the mm result).
// CHECK-LABEL: func @chain
// CHECK: lifetimes: 5 nodes
// The mm result is live until its view is last read, at node 3 (backward).
// CHECK-NEXT: mm (aten.mm.default): [0, 3] 64 B saved
// CHECK-NEXT: relu (aten.relu.default): [2, 3] 64 B saved
// CHECK-NEXT: grad (aten.mm.default): [3, 4] 32 B{{$}}
// CHECK-NEXT: out (aten.sum.default): [4, 4] 4 B{{$}}
// CHECK: peak memory:      160 B allocated by the step, plus 96 B of resident inputs
// CHECK-NEXT: peak at:          node 3 grad (aten.mm.default), bwd
// CHECK-NEXT: saved for bwd:    128 B in 2 activations
// CHECK-NEXT: live at fwd end:  128 B
// CHECK-NEXT: largest tensors live at the peak:
// CHECK-NEXT: 64 B  mm (aten.mm.default)
// CHECK-NEXT: 64 B  relu (aten.relu.default)
// CHECK-NEXT: 32 B  grad (aten.mm.default)
func.func @chain(%w: tensor<4x4xf16> {lethe.kind = "param"}, %x: tensor<8x4xf16>)
    -> tensor<f32> {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {name = "mm"} : (tensor<8x4xf16>, tensor<4x4xf16>) -> tensor<8x4xf16>
  %1 = lethe.node "aten.view.default" fwd (%0) {name = "view", aliases = array<i64: 0>} : (tensor<8x4xf16>) -> tensor<32xf16>
  %2 = lethe.node "aten.relu.default" fwd (%1) {name = "relu"} : (tensor<32xf16>) -> tensor<32xf16>
  %3 = lethe.node "aten.mm.default" bwd (%2, %1) {name = "grad"} : (tensor<32xf16>, tensor<32xf16>) -> tensor<4x4xf16>
  %4 = lethe.node "aten.sum.default" bwd (%3) {name = "out"} : (tensor<4x4xf16>) -> tensor<f32>
  return %4 : tensor<f32>
}

// -----

// A value nobody reads lives only while its producer runs; a returned value
// lives to the end.
// CHECK-LABEL: func @dead_and_returned
// CHECK: a (aten.ones.default): [0, 0] 16 B
// CHECK-NEXT: b (aten.ones.default): [1, 2] 16 B
// CHECK-NEXT: c (aten.ones.default): [2, 2] 16 B
// CHECK: peak memory:      32 B
func.func @dead_and_returned() -> tensor<4xf32> {
  %0 = lethe.node "aten.ones.default" fwd () {name = "a"} : () -> tensor<4xf32>
  %1 = lethe.node "aten.ones.default" fwd () {name = "b"} : () -> tensor<4xf32>
  %2 = lethe.node "aten.ones.default" fwd () {name = "c"} : () -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

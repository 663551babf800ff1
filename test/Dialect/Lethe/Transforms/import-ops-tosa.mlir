// RUN: lethe-opt %s --lethe-import-ops | FileCheck %s
// RUN: lethe-opt %s --lethe-import-ops | lethe-opt | FileCheck %s
// RUN: lethe-opt %s --lethe-import-ops --test-lethe-lifetimes -o /dev/null | FileCheck %s --check-prefix=GRAPH

// TOSA (what torch-mlir's TOSA backend emits): value semantics, so no
// views; shapes (`tosa.const_shape`) fold into args, tensor constants (the
// zero points) are resident nodes, and what reads the tangent is backward.

// CHECK-LABEL: func.func @step(
// CHECK-NEXT: %[[ZP:.+]] = lethe.node "tosa.const" fwd () {lethe.attrs = {values = dense<0.000000e+00> : tensor<1xf32>}} : () -> tensor<1xf32>
// CHECK-NEXT: %[[MM:.+]] = lethe.node "tosa.matmul" fwd (%arg0, %arg1, %[[ZP]], %[[ZP]]) : (tensor<1x4x8xf32>, tensor<1x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[ADD:.+]] = lethe.node "tosa.add" fwd (%[[MM]], %arg2)
// CHECK-NEXT: %[[RELU:.+]] = lethe.node "tosa.clamp" fwd (%[[ADD]]) {lethe.attrs = {max_val = 3.400000e+38 : f32, min_val = 0.000000e+00 : f32, nan_mode = #tosa.nan_mode<PROPAGATE>}}
// CHECK-NEXT: %[[R:.+]] = lethe.node "tosa.reshape" fwd (%[[RELU]]) {args = [{in = 0 : i64}, dense<[4, 16]> : tensor<2xindex>]} : (tensor<1x4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[SHIFT:.+]] = lethe.node "tosa.const" fwd ()
// CHECK-NEXT: %[[G:.+]] = lethe.node "tosa.mul" bwd (%arg3, %[[R]], %[[SHIFT]])
// CHECK-NEXT: lethe.node "tosa.transpose" bwd ({{.*}}) {lethe.attrs = {perms = array<i32: 1, 0>}}
// CHECK-NEXT: lethe.node "tosa.reduce_sum" bwd
// CHECK-NEXT: %[[S2:.+]] = lethe.node "tosa.reshape" bwd
// CHECK-NEXT: return %[[S2]], %[[G]] : tensor<1x16xf32>, tensor<4x16xf32>

// GRAPH: lifetimes: 10 nodes

func.func @step(%x: tensor<1x4x8xf32>, %w: tensor<1x8x16xf32> {lethe.kind = "param"}, %b: tensor<1x1x16xf32> {lethe.kind = "param"}, %dy: tensor<4x16xf32> {lethe.kind = "tangent"}) -> (tensor<1x16xf32>, tensor<4x16xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %mm = tosa.matmul %x, %w, %zp, %zp : (tensor<1x4x8xf32>, tensor<1x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x16xf32>
  %add = tosa.add %mm, %b : (tensor<1x4x16xf32>, tensor<1x1x16xf32>) -> tensor<1x4x16xf32>
  %relu = tosa.clamp %add {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %shape = tosa.const_shape {values = dense<[4, 16]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %r = tosa.reshape %relu, %shape : (tensor<1x4x16xf32>, !tosa.shape<2>) -> tensor<4x16xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %g = tosa.mul %dy, %r, %shift : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<1xi8>) -> tensor<4x16xf32>
  %t = tosa.transpose %g {perms = array<i32: 1, 0>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %s = tosa.reduce_sum %t {axis = 1 : i32} : (tensor<16x4xf32>) -> tensor<16x1xf32>
  %shape2 = tosa.const_shape {values = dense<[1, 16]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s2 = tosa.reshape %s, %shape2 : (tensor<16x1xf32>, !tosa.shape<2>) -> tensor<1x16xf32>
  return %s2, %g : tensor<1x16xf32>, tensor<4x16xf32>
}

// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops -split-input-file | FileCheck %s

// jax.checkpoint's barrier passes its operands through: result i is
// operand i, no new memory.
// CHECK-LABEL: func.func @remat
// CHECK: lethe.node "stablehlo.optimization_barrier" fwd (%arg0, %arg1) {aliases = array<i64: 0, 1>}
func.func @remat(%a: tensor<4xf32>, %b: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %0:2 = "stablehlo.optimization_barrier"(%a, %b) : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<8xf32>
}

// -----

// torch-mlir's casts between its tensors and builtin tensors are views.
// CHECK-LABEL: func.func @casts
// CHECK: %[[B:.+]] = lethe.node "torch_c.to_builtin_tensor" fwd (%arg0) {aliases = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[S:.+]] = lethe.node "torch.tensor_static_info_cast" fwd (%arg0) {aliases = array<i64: 0>}
// CHECK: lethe.node "torch_c.from_builtin_tensor" fwd (%[[B]]) {aliases = array<i64: 0>}
func.func @casts(%a: !torch.vtensor<[4],f32>) -> (tensor<4xf32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) {
  %0 = "torch_c.to_builtin_tensor"(%a) : (!torch.vtensor<[4],f32>) -> tensor<4xf32>
  %1 = "torch.tensor_static_info_cast"(%a) : (!torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32>
  %2 = "torch_c.from_builtin_tensor"(%0) : (tensor<4xf32>) -> !torch.vtensor<[4],f32>
  return %0, %1, %2 : tensor<4xf32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}

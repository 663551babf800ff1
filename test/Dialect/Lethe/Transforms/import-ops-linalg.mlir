// RUN: lethe-opt %s --lethe-import-ops | FileCheck %s
// RUN: lethe-opt %s --lethe-import-ops | lethe-opt | FileCheck %s
// RUN: lethe-opt %s --lethe-import-ops --test-lethe-lifetimes -o /dev/null | FileCheck %s --check-prefix=GRAPH

// Upstream linalg-on-tensors (what torch-mlir's linalg backend emits):
// destination-passing results alias their `outs` init, tensor reshapes and
// slices are views, tensor.empty allocates, scalar constants fold into
// args and dense constants are resident nodes.

#map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %arg2: tensor<8x16xf32> {lethe.kind = "tangent"}
func.func @step(%x: tensor<8x32xf32>, %w: tensor<32x16xf32> {lethe.kind = "param"},
                %dy: tensor<8x16xf32> {lethe.kind = "tangent"},
                %img: tensor<1x8x8x3xf32>, %filter: tensor<3x3x3x4xf32>)
    -> (tensor<8x16xf32>, tensor<32x16xf32>, tensor<1x6x6x4xf32>, tensor<2x4x16xf32>) {
  // CHECK-NEXT: %[[E:.+]] = lethe.node "tensor.empty" fwd () : () -> tensor<8x16xf32>
  // CHECK-NEXT: %[[F:.+]] = lethe.node "linalg.fill" fwd (%[[E]]) {aliases = array<i64: 0>, args = [0.000000e+00 : f32, {in = 0 : i64}]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %[[MM:.+]] = lethe.node "linalg.matmul" fwd (%arg0, %arg1, %[[F]]) {aliases = array<i64: 2>, lethe.attrs = {indexing_maps = [{{.*}}]}} : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %[[E2:.+]] = lethe.node "tensor.empty" fwd ()
  // CHECK-NEXT: %[[RELU:.+]] = lethe.node "linalg.generic" fwd (%[[MM]], %[[E2]]) {aliases = array<i64: 1>, lethe.attrs = {indexing_maps = [#[[ID:map[0-9]*]], #[[ID]]], iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>]}}
  // CHECK-NEXT: %[[DW0:.+]] = lethe.node "tensor.empty" fwd ()
  // CHECK-NEXT: %[[DWF:.+]] = lethe.node "linalg.fill" fwd (%[[DW0]])
  // CHECK-NEXT: %[[DW:.+]] = lethe.node "linalg.matmul" bwd (%arg0, %arg2, %[[DWF]]) {aliases = array<i64: 2>
  // CHECK-NEXT: %[[C:.+]] = lethe.node "arith.constant" fwd () {lethe.attrs = {value = dense<1.000000e+00> : tensor<1x6x6x4xf32>}} : () -> tensor<1x6x6x4xf32>
  // CHECK-NEXT: %[[CONV:.+]] = lethe.node "linalg.conv_2d_nhwc_hwcf" fwd (%arg3, %arg4, %[[C]]) {aliases = array<i64: 2>, lethe.attrs = {dilations = dense<1> : tensor<2xi64>, {{.*}}strides = dense<1> : tensor<2xi64>}}
  // CHECK-NEXT: %[[EXP:.+]] = lethe.node "tensor.expand_shape" fwd (%[[RELU]]) {aliases = array<i64: 0>, lethe.attrs = {reassociation = {{\[}}[0, 1], [2]], static_output_shape = array<i64: 2, 4, 16>}} : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
  // CHECK-NEXT: %[[COL:.+]] = lethe.node "tensor.collapse_shape" fwd (%[[EXP]]) {aliases = array<i64: 0>
  // CHECK-NEXT: %[[SL:.+]] = lethe.node "tensor.extract_slice" fwd (%[[COL]]) {aliases = array<i64: 0>
  // CHECK-NEXT: %[[BMM0:.+]] = lethe.node "tensor.empty" fwd ()
  // CHECK-NEXT: lethe.node "tensor.expand_shape" fwd (%arg1) {aliases = array<i64: 0>
  // CHECK-NEXT: %[[BMM:.+]] = lethe.node "linalg.batch_matmul" fwd (%[[EXP]], {{.*}}, %[[BMM0]]) {aliases = array<i64: 2>
  // CHECK-NEXT: %[[INS:.+]] = lethe.node "tensor.insert_slice" fwd (%[[SL]], %[[RELU]]) {aliases = array<i64: 1>
  // CHECK-NEXT: return %[[INS]], %[[DW]], %[[CONV]], %[[BMM]]
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x32xf32>, tensor<32x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %relu = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<8x16xf32>) outs(%e2 : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<8x16xf32>
  %dw0 = tensor.empty() : tensor<32x16xf32>
  %dwf = linalg.fill ins(%zero : f32) outs(%dw0 : tensor<32x16xf32>) -> tensor<32x16xf32>
  %dw = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
      ins(%x, %dy : tensor<8x32xf32>, tensor<8x16xf32>) outs(%dwf : tensor<32x16xf32>) -> tensor<32x16xf32>
  %cst = arith.constant dense<1.0> : tensor<1x6x6x4xf32>
  %conv = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%img, %filter : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) outs(%cst : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  %exp = tensor.expand_shape %relu [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  %col = tensor.collapse_shape %exp [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %sl = tensor.extract_slice %col[0, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
  %b0 = tensor.empty() : tensor<2x4x16xf32>
  %wb = tensor.expand_shape %w [[0, 1], [2]] output_shape [2, 16, 16] : tensor<32x16xf32> into tensor<2x16x16xf32>
  %bmm = linalg.batch_matmul ins(%exp, %wb : tensor<2x4x16xf32>, tensor<2x16x16xf32>) outs(%b0 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %ins = tensor.insert_slice %sl into %relu[0, 0] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<8x16xf32>
  return %ins, %dw, %conv, %bmm : tensor<8x16xf32>, tensor<32x16xf32>, tensor<1x6x6x4xf32>, tensor<2x4x16xf32>
}

// GRAPH: lifetimes: 17 nodes

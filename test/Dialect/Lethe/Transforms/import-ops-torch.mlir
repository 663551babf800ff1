// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops | FileCheck %s
// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops | lethe-opt | FileCheck %s
// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops --test-lethe-lifetimes -o /dev/null | FileCheck %s --check-prefix=GRAPH

// torch-mlir's raw import of a joint graph (fx_importer, generic form):
// `torch.aten.*` ops on `!torch.vtensor`, Python scalars and lists as
// `torch.constant.*` / `torch.prim.ListConstruct` operands. Types become
// builtin tensors, scalars and lists fold into `args` ({in = k} is tensor
// input k), tensor literals stay as resident constants.

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %arg0: tensor<4x16xf32>, %arg1: tensor<8x16xf32> {lethe.kind = "param"}, %arg2: tensor<8xbf16> {lethe.kind = "param"}, %arg3: tensor<4x8xf32> {lethe.kind = "tangent"}, %arg4: tensor<4xi64>)
// CHECK-SAME: -> (tensor<f32>, tensor<8x8xf32>)
// CHECK-NEXT: %[[T:.+]] = lethe.node "aten.transpose.int" fwd (%arg1) {aliases = array<i64: 0>, args = [{in = 0 : i64}, 0, 1]} : (tensor<8x16xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[MM:.+]] = lethe.node "aten.mm" fwd (%arg0, %[[T]]) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[ADD:.+]] = lethe.node "aten.add.Tensor" fwd (%[[MM]], %arg2) {args = [{in = 0 : i64}, {in = 1 : i64}, 1]}
// CHECK-NEXT: %[[RELU:.+]] = lethe.node "aten.relu" fwd (%[[ADD]])
// CHECK-NEXT: lethe.node "aten.view" fwd (%[[RELU]]) {aliases = array<i64: 0>, args = [{in = 0 : i64}, [4, 2, 4]]} : (tensor<4x8xf32>) -> tensor<4x2x4xf32>
// CHECK-NEXT: %[[SUM:.+]] = lethe.node "aten.sum" fwd (%[[RELU]]) {args = [{in = 0 : i64}, unit]} : (tensor<4x8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[LIT:.+]] = lethe.node "torch.vtensor.literal" fwd () {lethe.attrs = {value = dense<1.000000e+00> : tensor<8xf32>}} : () -> tensor<8xf32>
// CHECK-NEXT: %[[SIZE:.+]] = lethe.node "aten.size.int" fwd (%[[RELU]]) {args = [{in = 0 : i64}, 0]} : (tensor<4x8xf32>) -> i64
// CHECK-NEXT: %[[MUL:.+]] = lethe.node "aten.mul.Tensor" bwd (%arg3, %[[LIT]])
// CHECK-NEXT: %[[TB:.+]] = lethe.node "aten.threshold_backward" bwd (%[[MUL]], %[[RELU]]) {args = [{in = 0 : i64}, {in = 1 : i64}, 0]}
// A list of tensors is spliced into the inputs.
// CHECK-NEXT: %[[CAT:.+]] = lethe.node "aten.cat" bwd (%[[TB]], %[[TB]]) {args = {{\[}}[{in = 0 : i64}, {in = 1 : i64}], 0]} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: lethe.node "aten.index.Tensor" fwd (%[[RELU]], %arg4) {args = [{in = 0 : i64}, [{in = 1 : i64}]]}
// CHECK-NEXT: return %[[SUM]], %[[CAT]] : tensor<f32>, tensor<8x8xf32>
// CHECK-NOT: torch.constant

// GRAPH: lifetimes: 12 nodes

"builtin.module"() ({
  "func.func"() <{arg_attrs = [{}, {lethe.kind = "param"}, {lethe.kind = "param"}, {lethe.kind = "tangent"}, {}], function_type = (!torch.vtensor<[4,16],f32>, !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],bf16>, !torch.vtensor<[4,8],f32>, !torch.vtensor<[4],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[8,8],f32>), sym_name = "main"}> ({
  ^bb0(%arg0: !torch.vtensor<[4,16],f32>, %arg1: !torch.vtensor<[8,16],f32>, %arg2: !torch.vtensor<[8],bf16>, %arg3: !torch.vtensor<[4,8],f32>, %arg4: !torch.vtensor<[4],si64>):
    %int0 = "torch.constant.int"() <{value = 0 : i64}> : () -> !torch.int
    %int1 = "torch.constant.int"() <{value = 1 : i64}> : () -> !torch.int
    %0 = "torch.aten.transpose.int"(%arg1, %int0, %int1) : (!torch.vtensor<[8,16],f32>, !torch.int, !torch.int) -> !torch.vtensor<[16,8],f32>
    %1 = "torch.aten.mm"(%arg0, %0) : (!torch.vtensor<[4,16],f32>, !torch.vtensor<[16,8],f32>) -> !torch.vtensor<[4,8],f32>
    %2 = "torch.aten.add.Tensor"(%1, %arg2, %int1) : (!torch.vtensor<[4,8],f32>, !torch.vtensor<[8],bf16>, !torch.int) -> !torch.vtensor<[4,8],f32>
    %3 = "torch.aten.relu"(%2) : (!torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32>
    %int2 = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.int
    %int4 = "torch.constant.int"() <{value = 4 : i64}> : () -> !torch.int
    %list = "torch.prim.ListConstruct"(%int4, %int2, %int4) : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %4 = "torch.aten.view"(%3, %list) : (!torch.vtensor<[4,8],f32>, !torch.list<int>) -> !torch.vtensor<[4,2,4],f32>
    %none = "torch.constant.none"() : () -> !torch.none
    %5 = "torch.aten.sum"(%3, %none) : (!torch.vtensor<[4,8],f32>, !torch.none) -> !torch.vtensor<[],f32>
    %lit = "torch.vtensor.literal"() <{value = dense<1.000000e+00> : tensor<8xf32>}> : () -> !torch.vtensor<[8],f32>
    %size = "torch.aten.size.int"(%3, %int0) : (!torch.vtensor<[4,8],f32>, !torch.int) -> !torch.int
    %6 = "torch.aten.mul.Tensor"(%arg3, %lit) : (!torch.vtensor<[4,8],f32>, !torch.vtensor<[8],f32>) -> !torch.vtensor<[4,8],f32>
    %7 = "torch.aten.threshold_backward"(%6, %3, %int0) : (!torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>, !torch.int) -> !torch.vtensor<[4,8],f32>
    %tensors = "torch.prim.ListConstruct"(%7, %7) : (!torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>) -> !torch.list<vtensor>
    %8 = "torch.aten.cat"(%tensors, %int0) : (!torch.list<vtensor>, !torch.int) -> !torch.vtensor<[8,8],f32>
    %indices = "torch.prim.ListConstruct"(%arg4) : (!torch.vtensor<[4],si64>) -> !torch.list<optional<vtensor>>
    %9 = "torch.aten.index.Tensor"(%3, %indices) : (!torch.vtensor<[4,8],f32>, !torch.list<optional<vtensor>>) -> !torch.vtensor<[4,8],f32>
    "func.return"(%5, %8) : (!torch.vtensor<[],f32>, !torch.vtensor<[8,8],f32>) -> ()
  }) : () -> ()
}) : () -> ()

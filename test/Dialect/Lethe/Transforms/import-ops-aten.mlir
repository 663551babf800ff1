// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops | FileCheck %s
// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops | lethe-opt | FileCheck %s
// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops --test-lethe-lifetimes -o /dev/null | FileCheck %s --check-prefix=GRAPH

// An AOTAutograd joint graph (forward + backward of a linear + relu layer),
// as a small FX exporter prints it in generic form: ATen ops with builtin
// tensor types, the overload and the node name as attributes, `is_view` on
// views, non-tensor arguments as attributes, a measured time and module
// scope on some ops, no phases. The backward is what depends on tangents_1.

// CHECK-LABEL: func.func @joint(
// CHECK-SAME: %arg0: tensor<16x8xf32> {lethe.name = "primals_1"}
// CHECK-SAME: %arg2: tensor<4x8xf32> {lethe.kind = "tangent", lethe.name = "tangents_1"}
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32>)
// CHECK-NEXT: %[[T:.+]] = lethe.node "aten.t.default" fwd (%arg0) {aliases = array<i64: 0>, name = "t", scope = "fc1", time_us = 1.250000e+00 : f64} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[MM:.+]] = lethe.node "aten.mm.default" fwd (%arg1, %[[T]]) {name = "mm", scope = "fc1", time_us = 3.000000e+00 : f64}
// CHECK-NEXT: %[[RELU:.+]] = lethe.node "aten.relu.default" fwd (%[[MM]]) {name = "relu"}
// A multi-result view: every result aliases the input.
// CHECK-NEXT: %[[SPLIT:.+]]:2 = lethe.node "aten.split.Tensor" fwd (%[[RELU]]) {aliases = array<i64: 0, 0>, lethe.attrs = {arg1 = 2 : i64}, name = "split"}
// An in-place op: its result is its first operand's storage.
// CHECK-NEXT: lethe.node "aten.add_.Tensor" fwd (%[[SPLIT]]#0, %[[SPLIT]]#1) {aliases = array<i64: 0>, name = "add_"}
// CHECK-NEXT: %[[SUM:.+]] = lethe.node "aten.sum.default" fwd (%[[RELU]])
// CHECK-NEXT: lethe.node "aten.max_pool2d_with_indices.default" fwd ({{.*}}) {{.*}} -> (tensor<4x8xf32>, none)
// Explicit phases win over the inference.
// CHECK-NEXT: lethe.node "aten.neg.default" bwd (%[[RELU]])
// CHECK-NEXT: %[[TB:.+]] = lethe.node "aten.threshold_backward.default" bwd (%arg2, %[[RELU]]) {lethe.attrs = {arg2 = 0.000000e+00 : f64}, name = "threshold_backward"}
// CHECK-NEXT: %[[T1:.+]] = lethe.node "aten.t.default" bwd (%[[TB]]) {aliases = array<i64: 0>
// CHECK-NEXT: %[[MM1:.+]] = lethe.node "aten.mm.default" bwd (%[[T1]], %arg1)
// CHECK-NEXT: %[[T2:.+]] = lethe.node "aten.t.default" bwd (%[[MM1]]) {aliases = array<i64: 0>
// CHECK-NEXT: lethe.node "aten.relu.default" fwd (%[[MM]]) {name = "relu_1", time_us = 2.000000e+00 : f64}
// CHECK-NEXT: return %[[SUM]], %[[T2]] : tensor<f32>, tensor<16x8xf32>

// GRAPH: lifetimes: 13 nodes

"builtin.module"() ({
  "func.func"() <{function_type = (tensor<16x8xf32>, tensor<4x16xf32>, tensor<4x8xf32>) -> (tensor<f32>, tensor<16x8xf32>), sym_name = "joint"}> ({
  ^bb0(%primals_1: tensor<16x8xf32> loc("primals_1"), %primals_2: tensor<4x16xf32> loc("primals_2"), %tangents_1: tensor<4x8xf32> loc("tangents_1")):
    %t = "aten.t"(%primals_1) {overload = "default", fx_name = "t", is_view, time_us = 1.25 : f64, scope = "L['self'].fc1"} : (tensor<16x8xf32>) -> tensor<8x16xf32> loc("t")
    %mm = "aten.mm"(%primals_2, %t) {overload = "default", fx_name = "mm", time_us = 3 : i64, scope = "L['self'].fc1"} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32> loc("mm")
    %relu = "aten.relu"(%mm) {overload = "default", fx_name = "relu"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("relu")
    %split:2 = "aten.split"(%relu) {overload = "Tensor", fx_name = "split", is_view, arg1 = 2 : i64} : (tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) loc("split")
    %add_ = "aten.add_"(%split#0, %split#1) {overload = "Tensor", fx_name = "add_"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> loc("add_")
    %sum = "aten.sum"(%relu) {overload = "default", fx_name = "sum"} : (tensor<4x8xf32>) -> tensor<f32> loc("sum")
    %pool:2 = "aten.max_pool2d_with_indices"(%relu) {overload = "default", fx_name = "pool", arg1 = array<i64: 1, 1>} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, none) loc("pool")
    %neg = "aten.neg"(%relu) {overload = "default", fx_name = "neg", phase = "bwd"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("neg")
    %tb = "aten.threshold_backward"(%tangents_1, %relu) {overload = "default", fx_name = "threshold_backward", arg2 = 0.000000e+00 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("threshold_backward")
    %t_1 = "aten.t"(%tb) {overload = "default", fx_name = "t_1", is_view} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("t_1")
    %mm_1 = "aten.mm"(%t_1, %primals_2) {overload = "default", fx_name = "mm_1"} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32> loc("mm_1")
    %t_2 = "aten.t"(%mm_1) {overload = "default", fx_name = "t_2", is_view} : (tensor<8x16xf32>) -> tensor<16x8xf32> loc("t_2")
    %relu_1 = "aten.relu"(%mm) {overload = "default", fx_name = "relu_1", phase = "fwd", time_us = 2.0 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("relu_1")
    "func.return"(%sum, %t_2) : (tensor<f32>, tensor<16x8xf32>) -> () loc(unknown)
  }) : () -> () loc(unknown)
}) : () -> () loc(unknown)

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

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

func.func @tensor_list(%a: !torch.vtensor<[4],f32>) {
  %int2 = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.int
  %int0 = "torch.constant.int"() <{value = 0 : i64}> : () -> !torch.int
  %0 = "torch.aten.split.Tensor"(%a, %int2, %int0) : (!torch.vtensor<[4],f32>, !torch.int, !torch.int) -> !torch.list<vtensor<[2],f32>>
  return
}

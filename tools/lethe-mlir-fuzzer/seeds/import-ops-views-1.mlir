func.func @casts(%a: !torch.vtensor<[4],f32>) -> (tensor<4xf32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) {
  %0 = "torch_c.to_builtin_tensor"(%a) : (!torch.vtensor<[4],f32>) -> tensor<4xf32>
  %1 = "torch.tensor_static_info_cast"(%a) : (!torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32>
  %2 = "torch_c.from_builtin_tensor"(%0) : (tensor<4xf32>) -> !torch.vtensor<[4],f32>
  return %0, %1, %2 : tensor<4xf32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}

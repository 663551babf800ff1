func.func @torch_nonvalue(%a: !torch.tensor<[4],f32>) {
  return
}

func.func @torch_dynamic(%a: !torch.vtensor<[?,4],f32>) {
  return
}

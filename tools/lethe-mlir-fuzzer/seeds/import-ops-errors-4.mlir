func.func @torch_unranked(%a: !torch.vtensor) {
  return
}

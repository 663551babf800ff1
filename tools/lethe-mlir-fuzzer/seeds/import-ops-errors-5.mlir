func.func @torch_dtype(%a: !torch.vtensor<[4],qint8>) {
  return
}

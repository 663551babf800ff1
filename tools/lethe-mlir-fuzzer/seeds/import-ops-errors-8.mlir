func.func @memref(%a: memref<4xf32>) {
  return
}

func.func @dynamic_argument(%a: tensor<?x4xf32>) {
  return
}

func.func @unranked(%a: tensor<*xf32>) {
  return
}

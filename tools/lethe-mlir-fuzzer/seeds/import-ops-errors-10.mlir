func.func @token(%a: tensor<4xf32>) {
  %0 = "stablehlo.create_token"() : () -> !stablehlo.token
  return
}

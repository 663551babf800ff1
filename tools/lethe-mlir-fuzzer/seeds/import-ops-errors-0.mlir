func.func @dynamic_result(%a: tensor<4xf32>, %s: tensor<1xi64>) -> tensor<?xf32> {
  %0 = "stablehlo.dynamic_reshape"(%a, %s) : (tensor<4xf32>, tensor<1xi64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @remat(%a: tensor<4xf32>, %b: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %0:2 = "stablehlo.optimization_barrier"(%a, %b) : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<8xf32>
}

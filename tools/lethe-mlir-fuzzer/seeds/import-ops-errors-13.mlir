func.func @bad_time(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "aten.relu"(%a) {time_us = -2.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

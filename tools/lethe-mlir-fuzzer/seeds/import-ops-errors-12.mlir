func.func @bad_phase(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "aten.relu"(%a) {phase = "sideways"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

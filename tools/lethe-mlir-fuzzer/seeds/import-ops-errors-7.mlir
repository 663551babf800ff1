func.func @element_type(%a: tensor<4xf32>) {
  %0 = "aten.quantize"(%a) : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.1>>
  return
}

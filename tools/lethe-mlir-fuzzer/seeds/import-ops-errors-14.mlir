func.func @blocks(%a: tensor<4xf32>) -> tensor<4xf32> {
  "cf.br"()[^bb1] : () -> ()
^bb1:
  return %a : tensor<4xf32>
}

func.func @control_flow(%a: tensor<i64>) -> tensor<i64> {
  %0 = "stablehlo.while"(%a) ({
  ^bb0(%x: tensor<i64>):
    %c = "stablehlo.compare"(%x, %x) <{comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i64>, tensor<i64>) -> tensor<i1>
    "stablehlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%x: tensor<i64>):
    "stablehlo.return"(%x) : (tensor<i64>) -> ()
  }) : (tensor<i64>) -> tensor<i64>
  return %0 : tensor<i64>
}

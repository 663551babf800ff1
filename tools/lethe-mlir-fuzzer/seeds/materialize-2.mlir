func.func @unplanned(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) : (tensor<16xf32>) -> tensor<16xf32>
  %1 = lethe.node "aten.view.default" fwd (%0) {aliases = array<i64: 0>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %2 = lethe.node "aten.neg.default" fwd (%1) : (tensor<4x4xf32>) -> tensor<16xf32>
  %3 = lethe.node "aten.neg.default" bwd (%2) : (tensor<16xf32>) -> tensor<16xf32>
  return %3 : tensor<16xf32>
}

func.func @step(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %y = lethe.node "aten.relu.default" fwd (%x) {time_us = 2.0 : f64} : (tensor<?x256xf32>) -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

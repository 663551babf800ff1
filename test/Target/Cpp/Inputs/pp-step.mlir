func.func @step(%x: tensor<2x4xf32> {lethe.kind = "input", lethe.name = "x"},
    %w0: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.0.fc.weight"},
    %w1: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.1.fc.weight"},
    %w2: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.2.fc.weight"},
    %w3: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.3.fc.weight"},
    %seed: tensor<f32> {lethe.kind = "tangent", lethe.name = "tangents_1"})
    -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %m = lethe.node "aten.ones_like.default" fwd (%x) {scope = "model", time_us = 1.0 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %e:2 = lethe.node "aten.native_dropout.default" fwd (%x) {scope = "model.drop", time_us = 2.0 : f64} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %h0 = lethe.node "aten.mm.default" fwd (%e#0, %w0) {scope = "h.0.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a0 = lethe.node "aten.mul.Tensor" fwd (%h0, %m) {scope = "h.0", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h1 = lethe.node "aten.mm.default" fwd (%a0, %w1) {scope = "h.1.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a1 = lethe.node "aten.mul.Tensor" fwd (%h1, %m) {scope = "h.1", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h2 = lethe.node "aten.mm.default" fwd (%a1, %w2) {scope = "h.2.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a2 = lethe.node "aten.mul.Tensor" fwd (%h2, %m) {scope = "h.2", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h3 = lethe.node "aten.mm.default" fwd (%a2, %w3) {scope = "h.3.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a3 = lethe.node "aten.mul.Tensor" fwd (%h3, %m) {scope = "h.3", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = lethe.node "aten.sum.default" fwd (%a3) {scope = "head", time_us = 1.0 : f64} : (tensor<2x4xf32>) -> tensor<f32>
  %g4 = lethe.node "aten.expand.default" bwd (%seed) {scope = "head", time_us = 1.0 : f64} : (tensor<f32>) -> tensor<2x4xf32>
  %gh3 = lethe.node "aten.mul.Tensor" bwd (%g4, %m) {scope = "h.3", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw3 = lethe.node "aten.mm.default" bwd (%a2, %gh3) {scope = "h.3.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g3 = lethe.node "aten.mm.default" bwd (%gh3, %w3) {scope = "h.3.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gh2 = lethe.node "aten.mul.Tensor" bwd (%g3, %m) {scope = "h.2", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw2 = lethe.node "aten.mm.default" bwd (%a1, %gh2) {scope = "h.2.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g2 = lethe.node "aten.mm.default" bwd (%gh2, %w2) {scope = "h.2.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gh1 = lethe.node "aten.mul.Tensor" bwd (%g2, %m) {scope = "h.1", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw1 = lethe.node "aten.mm.default" bwd (%a0, %gh1) {scope = "h.1.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g1 = lethe.node "aten.mm.default" bwd (%gh1, %w1) {scope = "h.1.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gh0 = lethe.node "aten.mul.Tensor" bwd (%g1, %m) {scope = "h.0", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw0 = lethe.node "aten.mm.default" bwd (%e#0, %gh0) {scope = "h.0.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g0 = lethe.node "aten.mm.default" bwd (%gh0, %w0) {scope = "h.0.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gx = lethe.node "aten.native_dropout_backward.default" bwd (%g0, %e#1) {scope = "model.drop", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xi1>) -> tensor<2x4xf32>
  return %loss, %gw0, %gw1, %gw2, %gw3 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

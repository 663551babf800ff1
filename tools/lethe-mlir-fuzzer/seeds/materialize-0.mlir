func.func @offload_and_recompute(%x: tensor<512x512xf32> {lethe.kind = "input"}, %w: tensor<512x512xf32> {lethe.kind = "param"}) -> tensor<512x512xf32> {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.decisions = [#lethe<decision offload>]} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %1 = lethe.node "aten.gelu.default" fwd (%0) {time_us = 20.0 : f64, lethe.decisions = [#lethe<decision recompute>]} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = lethe.node "aten.mm.default" fwd (%1, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %4 = lethe.node "aten.gelu_backward.default" bwd (%3, %0) {time_us = 20.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %5 = lethe.node "aten.mm.default" bwd (%4, %1) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %5 : tensor<512x512xf32>
}

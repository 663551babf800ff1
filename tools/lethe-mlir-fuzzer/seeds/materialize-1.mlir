func.func @placed(%x: tensor<512x512xf32>, %w: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.decisions = [#lethe<decision offload>], lethe.placement = [{nodes = array<i64>, prefetch_after = 0 : i64, release_after = 0 : i64, restore_before = 3 : i64}]} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %1 = lethe.node "aten.gelu.default" fwd (%x) {time_us = 20.0 : f64} : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = lethe.node "aten.mm.default" bwd (%1, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = lethe.node "aten.mm.default" bwd (%2, %0) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %3 : tensor<512x512xf32>
}

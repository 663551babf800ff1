module attributes {lethe.device_arena_bytes = 1024 : i64} {
func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  %a = lethe.node "aten.relu.default" fwd (%w) {time_us = 2.0 : f64} : (tensor<256xf32>) -> tensor<256xf32>
  return %a : tensor<256xf32>
}
}

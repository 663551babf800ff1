func.func @step(%w: tensor<256xf32>) -> tensor<256xf32> {
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  %h, %d = lethe.offload %a : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  %b = lethe.node "aten.gelu.default" fwd (%a) : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %a : tensor<256xf32>
  %g = lethe.collective all_reduce %b group [0, 1] bwd : tensor<256xf32> -> tensor<256xf32>
  %p, %pd = lethe.prefetch %h : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
  lethe.release %b : tensor<256xf32>
  %c = lethe.node "aten.add.Tensor" bwd (%g, %p) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %g : tensor<256xf32>
  lethe.release %p : tensor<256xf32>
  lethe.release %h : !lethe.host<tensor<256xf32>>
  return %c : tensor<256xf32>
}

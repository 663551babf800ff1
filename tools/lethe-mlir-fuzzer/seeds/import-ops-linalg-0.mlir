#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @step(%x: tensor<8x32xf32>, %w: tensor<32x16xf32> {lethe.kind = "param"},
                %dy: tensor<8x16xf32> {lethe.kind = "tangent"},
                %img: tensor<1x8x8x3xf32>, %filter: tensor<3x3x3x4xf32>)
    -> (tensor<8x16xf32>, tensor<32x16xf32>, tensor<1x6x6x4xf32>, tensor<2x4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x32xf32>, tensor<32x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %relu = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<8x16xf32>) outs(%e2 : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<8x16xf32>
  %dw0 = tensor.empty() : tensor<32x16xf32>
  %dwf = linalg.fill ins(%zero : f32) outs(%dw0 : tensor<32x16xf32>) -> tensor<32x16xf32>
  %dw = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
      ins(%x, %dy : tensor<8x32xf32>, tensor<8x16xf32>) outs(%dwf : tensor<32x16xf32>) -> tensor<32x16xf32>
  %cst = arith.constant dense<1.0> : tensor<1x6x6x4xf32>
  %conv = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%img, %filter : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) outs(%cst : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  %exp = tensor.expand_shape %relu [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  %col = tensor.collapse_shape %exp [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %sl = tensor.extract_slice %col[0, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
  %b0 = tensor.empty() : tensor<2x4x16xf32>
  %wb = tensor.expand_shape %w [[0, 1], [2]] output_shape [2, 16, 16] : tensor<32x16xf32> into tensor<2x16x16xf32>
  %bmm = linalg.batch_matmul ins(%exp, %wb : tensor<2x4x16xf32>, tensor<2x16x16xf32>) outs(%b0 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %ins = tensor.insert_slice %sl into %relu[0, 0] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<8x16xf32>
  return %ins, %dw, %conv, %bmm : tensor<8x16xf32>, tensor<32x16xf32>, tensor<1x6x6x4xf32>, tensor<2x4x16xf32>
}

func.func @step(%x: tensor<1x4x8xf32>, %w: tensor<1x8x16xf32> {lethe.kind = "param"}, %b: tensor<1x1x16xf32> {lethe.kind = "param"}, %dy: tensor<4x16xf32> {lethe.kind = "tangent"}) -> (tensor<1x16xf32>, tensor<4x16xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %mm = tosa.matmul %x, %w, %zp, %zp : (tensor<1x4x8xf32>, tensor<1x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x16xf32>
  %add = tosa.add %mm, %b : (tensor<1x4x16xf32>, tensor<1x1x16xf32>) -> tensor<1x4x16xf32>
  %relu = tosa.clamp %add {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %shape = tosa.const_shape {values = dense<[4, 16]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %r = tosa.reshape %relu, %shape : (tensor<1x4x16xf32>, !tosa.shape<2>) -> tensor<4x16xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %g = tosa.mul %dy, %r, %shift : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<1xi8>) -> tensor<4x16xf32>
  %t = tosa.transpose %g {perms = array<i32: 1, 0>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %s = tosa.reduce_sum %t {axis = 1 : i32} : (tensor<16x4xf32>) -> tensor<16x1xf32>
  %shape2 = tosa.const_shape {values = dense<[1, 16]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s2 = tosa.reshape %s, %shape2 : (tensor<16x1xf32>, !tosa.shape<2>) -> tensor<1x16xf32>
  return %s2, %g : tensor<1x16xf32>, tensor<4x16xf32>
}

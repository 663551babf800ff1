"builtin.module"() ({
  "func.func"() <{function_type = (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>, sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%w: tensor<64x64xf32> loc("w"), %x: tensor<64x64xf32> loc("x")):
    %0 = "stablehlo.dot_general"(%x, %w) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("jit(step)/jvp(f)/dot_general")
    %1 = "func.call"(%0) <{callee = @act}> : (tensor<64x64xf32>) -> tensor<64x64xf32> loc("jit(step)/jvp(f)/jit(act)")
    %2 = "stablehlo.multiply"(%1, %0) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("jit(step)/transpose(jvp(f))/mul")
    %3 = "stablehlo.dot_general"(%x, %2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>}> : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("jit(step)/transpose(jvp(f))/dot_general")
    "func.return"(%3) : (tensor<64x64xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<64x64xf32>) -> tensor<64x64xf32>, sym_name = "act", sym_visibility = "private"}> ({
  ^bb0(%a: tensor<64x64xf32>):
    %0 = "stablehlo.tanh"(%a) : (tensor<64x64xf32>) -> tensor<64x64xf32> loc("jit(step)/jvp(f)/jit(act)/tanh")
    "func.return"(%0) : (tensor<64x64xf32>) -> ()
  }) : () -> ()
}) : () -> ()

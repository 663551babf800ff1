// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops | FileCheck %s
// The result parses without --allow-unregistered-dialect.
// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops | lethe-opt | FileCheck %s
// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops --test-lethe-lifetimes -o /dev/null | FileCheck %s --check-prefix=GRAPH

// A JAX training step of a two-layer MLP with SGD, as
//   jax.jit(step).lower(params, x, y).compiler_ir('stablehlo')
//       .operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
// prints it: one function for forward, backward and update; relu behind a
// private function; no phase attributes. The backward is what the name
// stack marks `transpose(`, plus what depends on it (the update).
//
// def loss(p, x, y): return jnp.mean((jax.nn.relu(x @ p['w1'] + p['b1']) @ p['w2'] - y) ** 2)
// def step(p, x, y):
//   l, g = jax.value_and_grad(loss)(p, x, y)
//   return l, jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

// CHECK-LABEL: func.func public @main(
// CHECK-SAME: %arg0: tensor<16xf32> {lethe.name = "p['b1']", mhlo.layout_mode = "default"}
// CHECK-SAME: -> (tensor<f32> {jax.result_info = "[0]"}, tensor<16xf32> {{.*}}, tensor<4x16xf32> {{.*}}, tensor<16x2xf32> {{.*}})
// CHECK-NEXT: %[[H:.+]] = lethe.node "stablehlo.dot_general" fwd (%arg3, %arg1) {lethe.attrs = {dot_dimension_numbers = "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>", precision_config = "[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]"}, name = "jit(step)/jvp(loss)/dot_general"} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: lethe.node "stablehlo.broadcast_in_dim" fwd (%arg0) {lethe.attrs = {broadcast_dimensions = array<i64: 1>}
// CHECK-NEXT: %[[PRE:.+]] = lethe.node "stablehlo.add" fwd
// The private relu was inlined; its zero constant is a 4-byte resident node.
// CHECK-NEXT: %[[ZERO:.+]] = lethe.node "stablehlo.constant" fwd () {lethe.attrs = {value = dense<0.000000e+00> : tensor<f32>}
// CHECK-NEXT: lethe.node "stablehlo.broadcast_in_dim" fwd (%[[ZERO]])
// CHECK-NEXT: %[[RELU:.+]] = lethe.node "stablehlo.maximum" fwd
// CHECK: %[[MASK:.+]] = lethe.node "stablehlo.compare" fwd ({{.*}}) {lethe.attrs = {comparison_direction = "#stablehlo<comparison_direction GT>"}{{.*}} -> tensor<8x16xi1>
// CHECK: lethe.node "stablehlo.reduce" fwd ({{.*}}) {lethe.attrs = {dimensions = array<i64: 0, 1>}{{.*}} : (tensor<8x2xf32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[LOSS:.+]] = lethe.node "stablehlo.divide" fwd
// The gradient seed is a constant; what the name stack calls transpose(...)
// is backward.
// CHECK: lethe.node "stablehlo.divide" bwd
// CHECK: lethe.node "stablehlo.dot_general" bwd ({{.*}}) {{.*}}name = "jit(step)/transpose(jvp(loss))/dot_general"} : (tensor<8x2xf32>, tensor<16x2xf32>) -> tensor<8x16xf32>
// CHECK: lethe.node "stablehlo.select" bwd (%[[MASK]],
// The SGD update depends on the gradients: backward too.
// CHECK: %[[B1:.+]] = lethe.node "stablehlo.subtract" bwd (%arg0, {{.*}}) {name = "jit(step)/sub"}
// CHECK-NOT: stablehlo.return
// CHECK: return %[[LOSS]], %[[B1]], {{.*}} : tensor<f32>, tensor<16xf32>, tensor<4x16xf32>, tensor<16x2xf32>
// CHECK-NOT: func.func private @relu

// The result is a graph TrainingGraph reads: 35 ops + 3 inlined.
// GRAPH: lifetimes: 38 nodes

#loc1 = loc("/tmp/mlp.py":5:0)
#loc2 = loc("/tmp/mlp.py":8:0)
"builtin.module"() <{sym_name = "jit_step"}> ({
  "func.func"() <{arg_attrs = [{mhlo.layout_mode = "default"}, {mhlo.layout_mode = "default"}, {mhlo.layout_mode = "default"}, {mhlo.layout_mode = "default"}, {mhlo.layout_mode = "default"}], function_type = (tensor<16xf32>, tensor<4x16xf32>, tensor<16x2xf32>, tensor<8x4xf32>, tensor<8x2xf32>) -> (tensor<f32>, tensor<16xf32>, tensor<4x16xf32>, tensor<16x2xf32>), res_attrs = [{jax.result_info = "[0]"}, {jax.result_info = "[1]['b1']"}, {jax.result_info = "[1]['w1']"}, {jax.result_info = "[1]['w2']"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<16xf32> loc("p['b1']"), %arg1: tensor<4x16xf32> loc("p['w1']"), %arg2: tensor<16x2xf32> loc("p['w2']"), %arg3: tensor<8x4xf32> loc("x"), %arg4: tensor<8x2xf32> loc("y")):
    %0 = "stablehlo.dot_general"(%arg3, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32> loc(#loc10)
    %1 = "stablehlo.broadcast_in_dim"(%arg0) <{broadcast_dimensions = array<i64: 1>}> : (tensor<16xf32>) -> tensor<8x16xf32> loc(#loc11)
    %2 = "stablehlo.add"(%0, %1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> loc(#loc11)
    %3 = "func.call"(%2) <{callee = @relu}> : (tensor<8x16xf32>) -> tensor<8x16xf32> loc(#loc12)
    %4 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32> loc(#loc13)
    %5 = "stablehlo.broadcast_in_dim"(%4) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8x16xf32> loc(#loc13)
    %6 = "stablehlo.compare"(%2, %5) <{comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1> loc(#loc13)
    %7 = "stablehlo.dot_general"(%3, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x16xf32>, tensor<16x2xf32>) -> tensor<8x2xf32> loc(#loc14)
    %8 = "stablehlo.subtract"(%7, %arg4) : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32> loc(#loc15)
    %9 = "stablehlo.multiply"(%8, %8) : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32> loc(#loc16)
    %10 = "stablehlo.constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32> loc(#loc16)
    %11 = "stablehlo.broadcast_in_dim"(%10) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8x2xf32> loc(#loc16)
    %12 = "stablehlo.multiply"(%11, %8) : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32> loc(#loc16)
    %13 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32> loc(#loc17)
    %14 = "stablehlo.reduce"(%9, %13) <{dimensions = array<i64: 0, 1>}> ({
    ^bb0(%arg5: tensor<f32> loc("jit(step)/jvp(loss)/reduce_sum"(#loc2)), %arg6: tensor<f32> loc("jit(step)/jvp(loss)/reduce_sum"(#loc2))):
      %50 = "stablehlo.add"(%arg5, %arg6) : (tensor<f32>, tensor<f32>) -> tensor<f32> loc(#loc17)
      "stablehlo.return"(%50) : (tensor<f32>) -> () loc(#loc17)
    }) : (tensor<8x2xf32>, tensor<f32>) -> tensor<f32> loc(#loc17)
    %15 = "stablehlo.constant"() <{value = dense<1.600000e+01> : tensor<f32>}> : () -> tensor<f32> loc(#loc18)
    %16 = "stablehlo.divide"(%14, %15) : (tensor<f32>, tensor<f32>) -> tensor<f32> loc(#loc18)
    %17 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32> loc(#loc19)
    %18 = "stablehlo.divide"(%17, %15) : (tensor<f32>, tensor<f32>) -> tensor<f32> loc(#loc20)
    %19 = "stablehlo.broadcast_in_dim"(%18) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8x2xf32> loc(#loc21)
    %20 = "stablehlo.multiply"(%19, %12) : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32> loc(#loc22)
    %21 = "stablehlo.dot_general"(%20, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x2xf32>, tensor<16x2xf32>) -> tensor<8x16xf32> loc(#loc23)
    %22 = "stablehlo.dot_general"(%3, %20) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x16xf32>, tensor<8x2xf32>) -> tensor<16x2xf32> loc(#loc23)
    %23 = "stablehlo.select"(%6, %21, %5) : (tensor<8x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> loc(#loc24)
    %24 = "stablehlo.reduce"(%23, %13) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg5: tensor<f32> loc("jit(step)/transpose(jvp(loss))/reduce_sum"(#loc1)), %arg6: tensor<f32> loc("jit(step)/transpose(jvp(loss))/reduce_sum"(#loc1))):
      %50 = "stablehlo.add"(%arg5, %arg6) : (tensor<f32>, tensor<f32>) -> tensor<f32> loc(#loc25)
      "stablehlo.return"(%50) : (tensor<f32>) -> () loc(#loc25)
    }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<16xf32> loc(#loc25)
    %25 = "stablehlo.dot_general"(%arg3, %23) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc(#loc26)
    %26 = "stablehlo.constant"() <{value = dense<1.000000e-01> : tensor<f32>}> : () -> tensor<f32> loc(#loc27)
    %27 = "stablehlo.broadcast_in_dim"(%26) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<16xf32> loc(#loc27)
    %28 = "stablehlo.multiply"(%27, %24) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc(#loc27)
    %29 = "stablehlo.subtract"(%arg0, %28) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc(#loc28)
    %30 = "stablehlo.broadcast_in_dim"(%26) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x16xf32> loc(#loc27)
    %31 = "stablehlo.multiply"(%30, %25) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> loc(#loc27)
    %32 = "stablehlo.subtract"(%arg1, %31) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> loc(#loc28)
    %33 = "stablehlo.broadcast_in_dim"(%26) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<16x2xf32> loc(#loc27)
    %34 = "stablehlo.multiply"(%33, %22) : (tensor<16x2xf32>, tensor<16x2xf32>) -> tensor<16x2xf32> loc(#loc27)
    %35 = "stablehlo.subtract"(%arg2, %34) : (tensor<16x2xf32>, tensor<16x2xf32>) -> tensor<16x2xf32> loc(#loc28)
    "func.return"(%16, %29, %32, %35) : (tensor<f32>, tensor<16xf32>, tensor<4x16xf32>, tensor<16x2xf32>) -> () loc(#loc)
  }) : () -> () loc(#loc)
  "func.func"() <{function_type = (tensor<8x16xf32>) -> tensor<8x16xf32>, sym_name = "relu", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<8x16xf32> loc("jit(step)/jvp(loss)/jit(relu)"(#loc1))):
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32> loc(#loc29)
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8x16xf32> loc(#loc29)
    %2 = "stablehlo.maximum"(%arg0, %1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> loc(#loc29)
    "func.return"(%2) : (tensor<8x16xf32>) -> () loc(#loc)
  }) : () -> () loc(#loc)
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> () loc(#loc)
#loc = loc(unknown)
#loc10 = loc("jit(step)/jvp(loss)/dot_general"(#loc1))
#loc11 = loc("jit(step)/jvp(loss)/add"(#loc1))
#loc12 = loc("jit(step)/jvp(loss)/jit(relu)"(#loc1))
#loc13 = loc("jit(step)/jvp(loss)/jit(relu)/max"(#loc1))
#loc14 = loc("jit(step)/jvp(loss)/dot_general"(#loc1))
#loc15 = loc("jit(step)/jvp(loss)/sub"(#loc1))
#loc16 = loc("jit(step)/jvp(loss)/integer_pow"(#loc1))
#loc17 = loc("jit(step)/jvp(loss)/reduce_sum"(#loc1))
#loc18 = loc("jit(step)/jvp(loss)/div"(#loc1))
#loc19 = loc("jit(step)/broadcast_in_dim"(#loc2))
#loc20 = loc("jit(step)/transpose(jvp(loss))/div"(#loc1))
#loc21 = loc("jit(step)/transpose(jvp(loss))/reduce_sum"(#loc1))
#loc22 = loc("jit(step)/transpose(jvp(loss))/integer_pow"(#loc1))
#loc23 = loc("jit(step)/transpose(jvp(loss))/dot_general"(#loc1))
#loc24 = loc("jit(step)/transpose(jvp(loss))/jit(relu)/select_n"(#loc1))
#loc25 = loc("jit(step)/transpose(jvp(loss))/add"(#loc1))
#loc26 = loc("jit(step)/transpose(jvp(loss))/dot_general"(#loc1))
#loc27 = loc("jit(step)/mul"(#loc2))
#loc28 = loc("jit(step)/sub"(#loc2))
#loc29 = loc("jit(step)/jvp(loss)/jit(relu)/max"(#loc1))


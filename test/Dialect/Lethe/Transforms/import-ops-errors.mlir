// RUN: lethe-opt %s --allow-unregistered-dialect --lethe-import-ops -split-input-file -verify-diagnostics

// Lethe plans static shapes: a dynamic result is refused at the op.
func.func @dynamic_result(%a: tensor<4xf32>, %s: tensor<1xi64>) -> tensor<?xf32> {
  // expected-error @+1 {{cannot import result #0 of type 'tensor<?xf32>': a dynamic shape}}
  %0 = "stablehlo.dynamic_reshape"(%a, %s) : (tensor<4xf32>, tensor<1xi64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// expected-error @+1 {{cannot import argument #0 of type 'tensor<?x4xf32>': a dynamic shape}}
func.func @dynamic_argument(%a: tensor<?x4xf32>) {
  return
}

// -----

// expected-error @+1 {{cannot import argument #0 of type 'tensor<*xf32>': an unranked tensor}}
func.func @unranked(%a: tensor<*xf32>) {
  return
}

// -----

// expected-error @+1 {{cannot import argument #0 of type '!torch.vtensor<[?,4],f32>': a dynamic shape}}
func.func @torch_dynamic(%a: !torch.vtensor<[?,4],f32>) {
  return
}

// -----

// expected-error @+1 {{cannot import argument #0 of type '!torch.vtensor': an unranked torch tensor}}
func.func @torch_unranked(%a: !torch.vtensor) {
  return
}

// -----

// expected-error @+1 {{cannot import argument #0 of type '!torch.vtensor<[4],qint8>': unknown element type 'qint8'}}
func.func @torch_dtype(%a: !torch.vtensor<[4],qint8>) {
  return
}

// -----

// expected-error @+1 {{cannot import argument #0 of type '!torch.tensor<[4],f32>': a non-value torch tensor (export value tensors)}}
func.func @torch_nonvalue(%a: !torch.tensor<[4],f32>) {
  return
}

// -----

func.func @element_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{cannot import result #0 of type 'tensor<4x!quant.uniform<i8:f32, 0.1>>': an unsupported element type}}
  %0 = "aten.quantize"(%a) : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.1>>
  return
}

// -----

// expected-error @+1 {{cannot import argument #0 of type 'memref<4xf32>': a memref (import tensor-level IR, before bufferization)}}
func.func @memref(%a: memref<4xf32>) {
  return
}

// -----

func.func @tensor_list(%a: !torch.vtensor<[4],f32>) {
  %int2 = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.int
  %int0 = "torch.constant.int"() <{value = 0 : i64}> : () -> !torch.int
  // expected-error @+1 {{cannot import result #0 of type '!torch.list<vtensor<[2],f32>>': a list of tensors (export the tensors as separate values)}}
  %0 = "torch.aten.split.Tensor"(%a, %int2, %int0) : (!torch.vtensor<[4],f32>, !torch.int, !torch.int) -> !torch.list<vtensor<[2],f32>>
  return
}

// -----

func.func @token(%a: tensor<4xf32>) {
  // expected-error @+1 {{cannot import result #0 of type '!stablehlo.token': an unsupported type}}
  %0 = "stablehlo.create_token"() : () -> !stablehlo.token
  return
}

// -----

func.func @control_flow(%a: tensor<i64>) -> tensor<i64> {
  // expected-error @+1 {{cannot import control flow ('stablehlo.while'): the graph form is one straight-line step; unroll or inline it before exporting}}
  %0 = "stablehlo.while"(%a) ({
  ^bb0(%x: tensor<i64>):
    %c = "stablehlo.compare"(%x, %x) <{comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i64>, tensor<i64>) -> tensor<i1>
    "stablehlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%x: tensor<i64>):
    "stablehlo.return"(%x) : (tensor<i64>) -> ()
  }) : (tensor<i64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

func.func @bad_phase(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown phase "sideways" (expected "fwd", "bwd" or "opt")}}
  %0 = "aten.relu"(%a) {phase = "sideways"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @bad_time(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{time_us must be a non-negative number, got -2.000000e+00 : f64}}
  %0 = "aten.relu"(%a) {time_us = -2.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects a single-block function body (the graph form is one straight-line step)}}
func.func @blocks(%a: tensor<4xf32>) -> tensor<4xf32> {
  "cf.br"()[^bb1] : () -> ()
^bb1:
  return %a : tensor<4xf32>
}

// -----

func.func @recursive(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{calls nest deeper than 64 levels (recursion?)}}
  %0 = func.call @recursive(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

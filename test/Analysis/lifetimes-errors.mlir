// RUN: lethe-opt %s -test-lethe-lifetimes -split-input-file -verify-diagnostics -o /dev/null

// expected-error @+1 {{value of dynamic type 'tensor<?xf32>' has no static size}}
func.func @dynamic_argument(%x: tensor<?xf32>) {
  return
}

// -----

func.func @dynamic_result(%x: tensor<4xf32>, %n: index) {
  // expected-error @+1 {{value of dynamic type 'tensor<?xf32>' has no static size}}
  %0 = lethe.node "aten.resize.default" fwd (%x, %n) : (tensor<4xf32>, index) -> tensor<?xf32>
  return
}

// -----

func.func @foreign(%x: tensor<4xf32>) {
  // expected-error @+1 {{unexpected op in a training graph}}
  %0 = arith.addf %x, %x : tensor<4xf32>
  return
}

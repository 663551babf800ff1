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

// -----

// A memref or a vector has a static size but is not what Lethe plans:
// what it materializes (offloads, releases, buffers) holds tensors.
// expected-error @+1 {{value of type 'memref<4xf32>' is not a tensor: Lethe plans tensor-level IR (before bufferization)}}
func.func @memref_argument(%x: memref<4xf32>) {
  return
}

// -----

func.func @vector_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{value of type 'vector<4xf32>' is not a tensor: Lethe plans tensor-level IR (before bufferization)}}
  %0 = lethe.node "aten.relu.default" fwd (%x) : (tensor<4xf32>) -> vector<4xf32>
  return
}

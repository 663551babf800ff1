// RUN: lethe-opt %s -split-input-file -verify-diagnostics --lethe-materialize

// The shape of `lethe.decisions` and `lethe.placement` (an entry per
// result, of the right kind) is the dialect's to check
// (test/Dialect/Lethe/invalid-attrs.mlir); these are the plan's semantics.

func.func @not_an_activation(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error @+1 {{result #0 has a decision but is not an activation (a storage produced in the forward part and read later)}}
  %1 = lethe.node "aten.neg.default" bwd (%0) {lethe.decisions = [#lethe<decision recompute>]} : (tensor<16xf32>) -> tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

// expected-error @+1 {{lethe-materialize: the plan cannot be followed: value %1 is restored before node 0, outside its gap (after node 0, up to node 1)}}
func.func @outside_gap(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.decisions = [#lethe<decision recompute>], lethe.placement = [#lethe.placement<restore_before = 0, nodes = [0]>]} : (tensor<16xf32>) -> tensor<16xf32>
  %1 = lethe.node "aten.neg.default" bwd (%0) : (tensor<16xf32>) -> tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

// Only tensors move to the host. A graph whose activation is a memref (of
// static shape, so it has a size) was accepted by the analyses and the
// offload decided on it reached the materializer, which cast the memref to
// a tensor type: an assertion, found by the MLIR fuzzer after 43 minutes
// (its input is kept as tools/lethe-mlir-fuzzer/seeds/memref-offload.mlir).
// The graph is refused when it is read (TrainingGraph::fromFunction), for
// every pass and tool, at the value that is not a tensor.
func.func @offload_a_memref(%x: tensor<512x512xf32> {lethe.kind = "input"}, %w: tensor<512x512xf32> {lethe.kind = "param"}) -> tensor<512x512xf32> {
  // expected-error @+1 {{value of type 'memref<512x512xf32>' is not a tensor: Lethe plans tensor-level IR (before bufferization)}}
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64, lethe.decisions = [#lethe<decision offload>]} : (tensor<512x512xf32>, tensor<512x512xf32>) -> memref<512x512xf32>
  %1 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 100.0 : f64} : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = lethe.node "aten.mm.default" bwd (%1, %0) {time_us = 100.0 : f64} : (tensor<512x512xf32>, memref<512x512xf32>) -> tensor<512x512xf32>
  return %2 : tensor<512x512xf32>
}

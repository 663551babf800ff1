// RUN: lethe-opt %s --split-input-file --lethe-plan='budget=50% alignment=4294967296' -verify-diagnostics

// Sizes are int64 bytes. So that no sum the planner forms (live bytes, a
// peak plus a budget) can overflow, a graph's tensors may total at most
// 2^62 bytes (4 EiB), counted when the graph is read and again after the
// sizes are rounded up to the alignment.

// Two tensors of 2^62 bytes each: the second one is past the bound.
func.func @step(%x: tensor<288230376151711744xcomplex<f64>>) -> tensor<288230376151711744xcomplex<f64>> {
  // expected-error @+1 {{the graph's tensors total more than 4611686018427387904 bytes (4 EiB) with this one of 4611686018427387904 bytes}}
  %0 = lethe.node "aten.neg.default" fwd (%x) {time_us = 1.0 : f64} : (tensor<288230376151711744xcomplex<f64>>) -> tensor<288230376151711744xcomplex<f64>>
  return %0 : tensor<288230376151711744xcomplex<f64>>
}

// -----

// 16 + (2^62 - 16) bytes fit; rounded up to 4 GiB the second is 2^62 and
// the total is past the bound.
// expected-error @+1 {{lethe-plan: with alignment 4294967296 the graph's tensors total more than 4611686018427387904 bytes}}
func.func @step(%x: tensor<4xf32>) -> tensor<4611686018427387888xi8> {
  %0 = lethe.node "aten.ones.default" fwd (%x) {time_us = 1.0 : f64} : (tensor<4xf32>) -> tensor<4611686018427387888xi8>
  return %0 : tensor<4611686018427387888xi8>
}

// -----

// A size past int64 itself (2^62 x 4 bytes) is not wrapped to a negative
// number: it is past the bound too.
func.func @step(%x: tensor<4xf32>) -> tensor<4611686018427387904xf32> {
  // expected-error @+1 {{the graph's tensors total more than 4611686018427387904 bytes (4 EiB) with this one of 9223372036854775807 bytes}}
  %0 = lethe.node "aten.ones.default" fwd (%x) {time_us = 1.0 : f64} : (tensor<4xf32>) -> tensor<4611686018427387904xf32>
  return %0 : tensor<4611686018427387904xf32>
}

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

// The placement names nodes by `lethe.node_id` (10: the relu); the message
// by their position in the function.
// expected-error @+1 {{lethe-materialize: the plan cannot be followed: value node 10 (aten.relu.default) is restored before node 10 (aten.relu.default), outside its gap (after node 10 (aten.relu.default), up to node 11 (aten.neg.default))}}
func.func @outside_gap(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 10, lethe.decisions = [#lethe<decision recompute>], lethe.placement = [#lethe.placement<restore_before = 10, nodes = [10]>]} : (tensor<16xf32>) -> tensor<16xf32>
  %1 = lethe.node "aten.neg.default" bwd (%0) {lethe.node_id = 11} : (tensor<16xf32>) -> tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

// A placement names nodes by id, not by position: node 1 is the neg's
// position, and no node has id 1.
func.func @unknown_node(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{placement of result #0 names node 1 in 'restore_before', and no node of the function has that 'lethe.node_id'}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 10, lethe.decisions = [#lethe<decision recompute>], lethe.placement = [#lethe.placement<restore_before = 1, nodes = [10]>]} : (tensor<16xf32>) -> tensor<16xf32>
  %1 = lethe.node "aten.neg.default" bwd (%0) {lethe.node_id = 11} : (tensor<16xf32>) -> tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

func.func @unknown_recomputed_node(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{placement of result #0 names node 0 in 'nodes', and no node of the function has that 'lethe.node_id'}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 10, lethe.decisions = [#lethe<decision recompute>], lethe.placement = [#lethe.placement<restore_before = 11, nodes = [0]>]} : (tensor<16xf32>) -> tensor<16xf32>
  %1 = lethe.node "aten.neg.default" bwd (%0) {lethe.node_id = 11} : (tensor<16xf32>) -> tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

// Two nodes with one id would make a plan ambiguous.
func.func @repeated_id(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-note @+1 {{the earlier node}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 7} : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error @+1 {{node id 7 is also an earlier node's: a plan names nodes by their 'lethe.node_id', which must be unique in the function}}
  %1 = lethe.node "aten.neg.default" bwd (%0) {lethe.node_id = 7} : (tensor<16xf32>) -> tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

// Ids out of program order (kept apart from the sorted ones): a repeat of
// an earlier out-of-order id is found among them.
func.func @repeated_late_id(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 9} : (tensor<16xf32>) -> tensor<16xf32>
  // expected-note @+1 {{the earlier node}}
  %1 = lethe.node "aten.neg.default" fwd (%0) {lethe.node_id = 4} : (tensor<16xf32>) -> tensor<16xf32>
  %2 = lethe.node "aten.relu.default" fwd (%1) {lethe.node_id = 12} : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error @+1 {{node id 4 is also an earlier node's}}
  %3 = lethe.node "aten.neg.default" bwd (%2) {lethe.node_id = 4} : (tensor<16xf32>) -> tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----

// An id out of order that repeats one that came in order.
func.func @late_id_repeats_sorted(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-note @+1 {{the earlier node}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 3} : (tensor<16xf32>) -> tensor<16xf32>
  %1 = lethe.node "aten.neg.default" fwd (%0) {lethe.node_id = 8} : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error @+1 {{node id 3 is also an earlier node's}}
  %2 = lethe.node "aten.neg.default" bwd (%1) {lethe.node_id = 3} : (tensor<16xf32>) -> tensor<16xf32>
  return %2 : tensor<16xf32>
}

// -----

// A placement written by hand that restores a checkpoint no chain reads: %0
// (a layer input only the next layer's forward reads) offloaded while its
// reader %1 is retained. The prefetched copy would have no reader. (Nodes
// are named by their lethe.node_id, here their positions.)
// expected-error @+1 {{lethe-materialize: the plan cannot be followed: value node 0 (aten.relu.default) is a checkpoint no chain of the plan reads: it is freed after its last forward use and restoring it before node 4 (aten.threshold_backward.default) would make a copy nothing reads; retain it}}
func.func @unread_checkpoint(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 0, scope = "m.layers.0", lethe.decisions = [#lethe<decision offload>], lethe.placement = [#lethe.placement<restore_before = 4, release_after = 1, prefetch_after = 2, nodes = []>]} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %1 = lethe.node "aten.relu.default" fwd (%0) {lethe.node_id = 1, scope = "m.layers.1"} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %2 = lethe.node "aten.neg.default" fwd (%1) {lethe.node_id = 2, scope = "m.layers.1"} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %3 = lethe.node "aten.relu.default" fwd (%2) {lethe.node_id = 3, scope = "m.layers.2"} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %4 = lethe.node "aten.threshold_backward.default" bwd (%3, %1) {lethe.node_id = 4} : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  return %4 : tensor<1024x1024xf32>
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

//===- NodeIds.h - Every node's stable identity -----------------*- C++ -*-===//
//
// A plan names nodes by their `lethe.node_id`, never by their position, so
// that a plan stays true of a graph whose nodes are listed in another order.
// The JSON importer sets the exported node's id; every other node (imported
// from generic MLIR, written by hand, inserted by a pass) gets one here, once,
// before anything refers to it.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DIALECT_LETHE_IR_NODEIDS_H
#define LETHE_DIALECT_LETHE_IR_NODEIDS_H

namespace mlir {
class Operation;
} // namespace mlir

namespace lethe {

/// Gives every `lethe.node` and `lethe.collective` under `root` (a function)
/// without a `lethe.node_id` a fresh one: the ids above the largest in use,
/// in program order (0, 1, ... when none has one), so the same IR gets the
/// same ids. A node repeating an earlier node's id is left for
/// TrainingGraph::fromFunction to reject.
void assignNodeIds(mlir::Operation *root);

/// Gives every node under `root` that repeats the `lethe.node_id` of an
/// earlier node a fresh one (as assignNodeIds would), for a pass that copies
/// nodes (a pipeline's micro-batches); nodes without an id keep none.
void renumberRepeatedNodeIds(mlir::Operation *root);

} // namespace lethe

#endif // LETHE_DIALECT_LETHE_IR_NODEIDS_H

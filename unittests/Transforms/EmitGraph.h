//===- EmitGraph.h - A TrainingGraph written as IR, for tests ---*- C++ -*-===//
//
// The property tests plan random graphs (Planner/RandomGraph.h) and run the
// passes on them: this writes a graph in Lethe's canonical form.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_TRANSFORMS_EMITGRAPH_H
#define LETHE_UNITTESTS_TRANSFORMS_EMITGRAPH_H

#include "lethe/Analysis/TrainingGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace lethe::testing {

/// Writes `graph` as a function `@step` in Lethe's canonical form: inputs
/// as arguments, nodes as `lethe.node`, tensors as byte arrays. Node ids
/// (`lethe.node_id`) descend in program order, so they are never positions.
mlir::func::FuncOp emitGraph(const TrainingGraph &graph, mlir::ModuleOp module);

} // namespace lethe::testing

#endif // LETHE_UNITTESTS_TRANSFORMS_EMITGRAPH_H

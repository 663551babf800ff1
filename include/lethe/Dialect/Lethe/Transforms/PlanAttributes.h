//===- PlanAttributes.h - A plan on the IR, and back ------------*- C++ -*-===//
//
// The one encoding of a plan's decisions on the IR: `lethe.decisions` and
// `lethe.placement` on each producing node, with every node named by its
// `lethe.node_id` (never by its position), written by lethe-plan and read
// by lethe-materialize.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DIALECT_LETHE_TRANSFORMS_PLANATTRIBUTES_H
#define LETHE_DIALECT_LETHE_TRANSFORMS_PLANATTRIBUTES_H

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Plan.h"

#include "mlir/Support/LLVM.h"

#include <vector>

namespace lethe {

/// Sets `lethe.decisions` (and `lethe.placement` where a result is
/// recomputed or offloaded) on the node producing each of `plan`'s
/// activations. Every node must have its id (assignNodeIds; `graph` built
/// from the IR after that).
void writePlanAttributes(const TrainingGraph &graph, const Plan &plan);

/// What readPlanAttributes found.
struct PlanOnIR {
  /// One decision per activation of the analysis, in its order (retain
  /// where the IR says nothing).
  std::vector<ActivationDecision> decisions;
  /// How many results carry a decision.
  unsigned numPlanned = 0;
  /// False when a recomputed or offloaded value lacks its placement (or an
  /// offload its copies): completePlacement must fill them.
  bool complete = true;
};

/// The decisions `writePlanAttributes` left on `graph`'s nodes, with node
/// ids turned back into the graph's node indices. Fails, at the op, on a
/// decision about a value that is no activation of `analysis` and on a
/// placement naming an id no node of the function has.
mlir::FailureOr<PlanOnIR>
readPlanAttributes(const TrainingGraph &graph,
                   const ActivationAnalysis &analysis);

} // namespace lethe

#endif // LETHE_DIALECT_LETHE_TRANSFORMS_PLANATTRIBUTES_H

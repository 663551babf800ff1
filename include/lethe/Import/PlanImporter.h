//===- PlanImporter.h - Plans from elsewhere, read from JSON ----*- C++ -*-===//
//
// `--plan-file FILE` (lethe plan, simulate, compile; the lethe-plan pass's
// plan-file option) evaluates a plan made elsewhere (PyTorch SAC tags,
// another planner, by hand) instead of planning. The file names each
// decision the way the plan JSON does (docs/Planner.md, "Plans from
// elsewhere"):
//
//   {"decisions": [{"node_id": 12, "output": 0, "decision": "recompute"},
//                  {"node": "mm_3", "output": 0, "decision": "offload"}]}
//
// `values` is accepted for `decisions`, so `lethe plan --json` output reads
// back as is. Errors point at the entry (file:line:col).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_PLANIMPORTER_H
#define LETHE_IMPORT_PLANIMPORTER_H

#include "lethe/Planner/Plan.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/LogicalResult.h"

namespace lethe {

/// Reads the plan file at `path` (nothing to do when empty) into
/// `options.givenDecisions` for `graph`, whose activations are those of
/// ActivationAnalysis(graph, options). Emits located errors through
/// `context` for malformed JSON, an unknown node or decision, an output
/// index out of range, a value that is not an activation, and a decision
/// the value does not allow (recomputing an RNG op, offloading below
/// min-offload-bytes).
llvm::LogicalResult loadGivenPlan(llvm::StringRef path,
                                  const TrainingGraph &graph,
                                  PlanOptions &options,
                                  mlir::MLIRContext *context);

} // namespace lethe

#endif // LETHE_IMPORT_PLANIMPORTER_H

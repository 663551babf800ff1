//===- PlanAttributes.h - A plan on the IR, and back ------------*- C++ -*-===//
//
// The one encoding of a plan's decisions on the IR: `lethe.decisions` and
// `lethe.placement` on each producing node, with every node named by its
// `lethe.node_id` (never by its position), written by lethe-plan and read
// by lethe-materialize (readScheduledPlan: the plan read back under the
// planner's own options, placed where the IR leaves it unplaced, and
// written out as the schedule the planner simulated).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DIALECT_LETHE_TRANSFORMS_PLANATTRIBUTES_H
#define LETHE_DIALECT_LETHE_TRANSFORMS_PLANATTRIBUTES_H

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Plan.h"
#include "lethe/Simulator/Schedule.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <vector>

namespace lethe {

/// Sets `lethe.decisions` (and `lethe.placement` where a result is
/// recomputed or offloaded) on the node producing each of `plan`'s
/// activations. Every node must have its id (assignNodeIds; `graph` built
/// from the IR after that). With `ops`, on the ops it maps `graph`'s ops
/// to (those of a clone of the function `graph` was built from).
void writePlanAttributes(const TrainingGraph &graph, const Plan &plan,
                         const mlir::IRMapping *ops = nullptr);

struct PlannedStep;

/// What lethe-plan writes for `step`, the plan of `func` (or, with `ops`,
/// of the function `ops` maps to `func`'s clone): the decisions
/// (writePlanAttributes) and the function's `#lethe.plan`; with
/// `budgetGiven`, also the resolved budget on the module
/// (`lethe.budget_bytes`). The pass writes its plans through it, and the
/// pipeline a plan made already, so that it need not plan it again.
void writePlannedStep(mlir::func::FuncOp func, const PlannedStep &step,
                      bool budgetGiven, const mlir::IRMapping *ops = nullptr);

/// What writePlannedStep writes besides the decisions: the function's
/// `#lethe.plan` and, with `budgetGiven`, the module's `lethe.budget_bytes`.
void writePlanSummary(mlir::func::FuncOp func, const PlannedStep &step,
                      bool budgetGiven);

/// `step` (the plan of `func`) written out as lethe-plan then
/// lethe-materialize write it (writePlannedStep with `budgetGiven`, then
/// the pass), in a module as `func`'s with `func` alone, whose body is the
/// program; `func` stays as it is. The schedule is built from the planner's
/// own graph and decisions instead of from the IR (readScheduledPlan), so
/// that a caller that only measures the program (the pipeline's
/// feasibility check) need not clone the module, write the plan on the
/// clone and read it back. Null where the plan is not one the planner
/// returns (a decision unplaced or about no activation) or cannot be
/// followed: the attribute route says why.
mlir::OwningOpRef<mlir::ModuleOp>
materializePlannedStep(mlir::func::FuncOp func, const PlannedStep &step,
                       bool budgetGiven);

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

/// The planner's options a plan on `func` was made under, as far as they
/// decide what the plan may contain: which nodes may re-run (the
/// `replay_rng` of the function's `#lethe.plan`). Reading the plan under
/// other options would find other recompute chains and checkpoints than
/// the planner's. Without a `#lethe.plan` (decisions written by hand or by
/// another tool) RNG replay is accepted. The minimum offload size is not
/// read: it only narrows what a solver may choose, never what a plan means.
PlanOptions planReadOptions(mlir::func::FuncOp func);
/// The same for a plan made with `replayRng` (the planner's own, where it
/// is at hand: materializePlannedStep).
PlanOptions planReadOptions(bool replayRng);

/// A plan read back from the IR as the program will run it.
struct ScheduledPlan {
  /// The analysis under the planner's options (planReadOptions).
  std::unique_ptr<ActivationAnalysis> analysis;
  /// How many results carry a decision.
  unsigned numPlanned = 0;
  /// One placed decision per activation of `analysis`.
  std::vector<ActivationDecision> decisions;
  /// What the planner simulated: buildSchedule of `decisions`.
  Schedule schedule;
};

/// Reads the plan on `func` (whose graph is `graph`) under
/// planReadOptions(func), places the decisions the IR leaves unplaced with
/// the profile `device()` returns (called only then; null: it reported its
/// error) and builds the schedule. IR errors go to the context's
/// diagnostics; placement and schedule errors to `reportError`.
mlir::FailureOr<ScheduledPlan>
readScheduledPlan(mlir::func::FuncOp func, const TrainingGraph &graph,
                  llvm::function_ref<const DeviceProfile *()> device,
                  llvm::function_ref<void(const llvm::Twine &)> reportError);

} // namespace lethe

#endif // LETHE_DIALECT_LETHE_TRANSFORMS_PLANATTRIBUTES_H

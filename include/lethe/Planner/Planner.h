//===- Planner.h - Plan a training step under a memory budget ---*- C++ -*-===//
//
// The entry point the `lethe-plan` pass, the driver, the C API and the
// benchmarks call: runs a policy or the `auto` solver on a TrainingGraph,
// places the decisions, simulates the planned and the unplanned step on the
// device profile, and fills every field of a Plan.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_PLANNER_H
#define LETHE_PLANNER_PLANNER_H

#include "lethe/Planner/Plan.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace lethe {

class ActivationAnalysis;
class AutoFamily;

/// Plans `graph`. Errors are for input that cannot be planned at all (a
/// device profile without copy bandwidth when offloading is asked for, a
/// malformed graph); a budget the policy cannot meet gives a Plan with
/// `feasible == false` and `leastFeasibleBudget` set.
///
/// `family`: for `auto`'s fast solver, the ladder of earlier solves of this
/// graph with these options at other budgets (AutoSolverOptions::family).
///
/// `analysis`: where given, set to the ActivationAnalysis the plan was made
/// on (of `graph`, under `options`), for a caller that builds the plan's
/// schedule again (materializePlannedStep) without analysing the graph a
/// second time.
llvm::Expected<Plan>
planTrainingStep(const TrainingGraph &graph, const DeviceProfile &device,
                 const PlanOptions &options, AutoFamily *family = nullptr,
                 std::shared_ptr<const ActivationAnalysis> *analysis = nullptr);

/// Simulates a plan made for `graph` with `options` (the same options: they
/// decide what may be recomputed or offloaded), with a timeline. Plans whose
/// decisions give only retain / recompute / offload are placed first. The
/// schedule simulated is returned in `schedule` when given.
llvm::Expected<SimResult> simulatePlan(const TrainingGraph &graph,
                                       const DeviceProfile &device,
                                       const PlanOptions &options,
                                       const Plan &plan,
                                       Schedule *schedule = nullptr);

/// Whether the planner simulates copies that yield to collectives for this
/// graph and device (PlanOptions::copyModel; Auto: the profile says copies
/// and collectives contend and the graph has a collective). Under it, auto
/// also starts from its own recompute-only plan, so it never returns a plan
/// slower in this model than the best plan without offload at the budget.
bool planCopiesYield(const TrainingGraph &graph, const DeviceProfile &device,
                     const PlanOptions &options);

/// The error message for an infeasible plan: "budget B is below the least
/// budget policy P can meet on this graph (L)".
std::string infeasibleMessage(const Plan &plan);

} // namespace lethe

#endif // LETHE_PLANNER_PLANNER_H

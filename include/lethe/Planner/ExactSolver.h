//===- ExactSolver.h - The exact `auto` solver (MILP, CBC) ------*- C++ -*-===//
//
// Finds the plan of least predicted step time under the device-memory
// budget by solving a mixed-integer program with COIN-OR CBC. The model it
// optimises is ExactModel (docs/ExactSolver.md): it is the oracle the fast
// solver, the property tests and the benchmarks compare against. Usable up
// to a few hundred ops within PlanOptions::exactTimeLimitSec.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_EXACTSOLVER_H
#define LETHE_PLANNER_EXACTSOLVER_H

#include "lethe/Planner/Plan.h"

#include "llvm/Support/Error.h"

namespace lethe {

struct DeviceProfile;

/// Solves `auto` exactly. Reads budgetBytes, hostBudgetBytes,
/// minOffloadBytes, replayRng and exactTimeLimitSec from `options`.
/// `planTrainingStep` calls it for solver=exact and simulates the plan.
///
/// - Feasible budget: a Plan with `feasible`, one decision per activation,
///   fully placed (restore points, chains, releases, prefetches: the
///   simulator runs it as is), the model's peak and step time, and
///   `exactReport` saying whether CBC proved it optimal or stopped at the
///   time limit (gap).
/// - Budget below what any plan can meet: a Plan with `feasible == false`,
///   `leastFeasibleBudget` (the least peak CBC found; proven least when
///   `exactReport->provenOptimal`) and the decisions of that least-peak
///   plan.
/// - An error when CBC fails, or finds no plan and no proof of infeasibility
///   within the time limit.
///
/// `start`, when given, is a plan to start the search from (the fast
/// solver's): its decisions, with each prefetch moved into the model's
/// rules. It is used when it fits the budget by the model; the answer is
/// then never slower than it by the model.
///
/// Deterministic: CBC runs on one thread with fixed seeds, so the same
/// input gives the same plan whenever the search ends before the time
/// limit (`exactReport->hitTimeLimit` is false).
llvm::Expected<Plan>
solveExact(const TrainingGraph &graph, const DeviceProfile &device,
           const PlanOptions &options,
           llvm::ArrayRef<ActivationDecision> start = {});

} // namespace lethe

#endif // LETHE_PLANNER_EXACTSOLVER_H

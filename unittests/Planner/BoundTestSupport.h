//===- BoundTestSupport.h - What the bound's tests share ---------*- C++
//-*-===//
//
// The bound's tests (BoundTest.cpp: hand-built and random graphs;
// BoundCorpusTest.cpp: the graphs in graphs/) check it against plans with
// these.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_PLANNER_BOUNDTESTSUPPORT_H
#define LETHE_UNITTESTS_PLANNER_BOUNDTESTSUPPORT_H

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Bound.h"
#include "lethe/Planner/Planner.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <gtest/gtest.h>

#include <string>

namespace lethe::testing {

/// Relative slack for comparing simulated step times with the LP's answer
/// (both in double precision).
constexpr double kTolerance = 1e-9;

inline OverheadBound boundAt(const TrainingGraph &g,
                             const DeviceProfile &device, int64_t budget,
                             const Plan &unplanned) {
  PlanOptions options;
  options.budgetBytes = budget;
  llvm::Expected<OverheadBound> bound =
      boundStepTime(g, device, options, unplanned.stepUs, unplanned.peakBytes);
  EXPECT_TRUE(bool(bound)) << llvm::toString(bound.takeError());
  return bound ? *bound : OverheadBound{};
}

inline Plan unplannedPlan(const TrainingGraph &g, const DeviceProfile &device) {
  PlanOptions none;
  none.policy = Policy::None;
  llvm::Expected<Plan> plan = planTrainingStep(g, device, none);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  return plan ? *plan : Plan{};
}

/// Checks `plan` against `bound`: a plan that fits is never faster than the
/// bound, and when the bound says nothing fits, the plan does not.
inline void expectAbove(const Plan &plan, const OverheadBound &bound,
                        const std::string &what) {
  if (!plan.feasible)
    return;
  EXPECT_TRUE(bound.feasible) << what << " fits a budget the bound calls "
                              << "infeasible";
  if (bound.feasible) {
    EXPECT_LE(bound.stepUs, plan.stepUs * (1 + kTolerance))
        << what << ": bound " << bound.stepUs << " us above the plan's "
        << plan.stepUs << " us (unplanned " << plan.baselineStepUs << " us)";
  }
}

/// Plans `g` at `budget` with the fast and the exact solver; each plan must
/// exist, fit and be above `bound`; `check` sees each.
inline void expectBothSolversAbove(
    const TrainingGraph &g, const DeviceProfile &device, int64_t budget,
    const OverheadBound &bound,
    llvm::function_ref<void(const Plan &)> check = [](const Plan &) {}) {
  PlanOptions options;
  options.budgetBytes = budget;
  for (SolverKind solver : {SolverKind::Fast, SolverKind::Exact}) {
    options.solver = solver;
    llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    EXPECT_TRUE(plan->feasible);
    check(*plan);
    expectAbove(*plan, bound, solver == SolverKind::Fast ? "auto" : "exact");
  }
}

/// docs/Bound.md, §2: a plan's own values satisfy every row, so with its
/// decisions fixed (boundStepTime's `fixed`) the relaxation is feasible and
/// prices it at most at its simulated step: a stronger check than the bound
/// below the plan, since it also catches a row that cuts off plans the LP
/// does not pick.
inline void expectPricedAbove(const TrainingGraph &g,
                              const DeviceProfile &device,
                              const PlanOptions &options, const Plan &unplanned,
                              const Plan &plan, const std::string &what) {
  if (!plan.feasible)
    return;
  ActivationAnalysis analysis(g, options);
  std::vector<Decision> decisions(analysis.getActivations().size(),
                                  Decision::Retain);
  for (const ActivationDecision &d : plan.decisions)
    if (int32_t a = analysis.activationIndex(d.value); a >= 0)
      decisions[a] = d.decision;
  llvm::Expected<OverheadBound> priced = boundStepTime(
      g, device, options, unplanned.stepUs, unplanned.peakBytes, decisions);
  ASSERT_TRUE(bool(priced)) << llvm::toString(priced.takeError());
  expectAbove(plan, *priced, what + " at its own decisions");
}

/// The bound at `share` of the unplanned peak lies more than `minOverUs` over
/// the unplanned step (the rows a test guards lift it past that) and under
/// auto's plan at that budget.
inline void expectBoundOverAt(const TrainingGraph &g,
                              const DeviceProfile &device, double share,
                              double minOverUs) {
  Plan unplanned = unplannedPlan(g, device);
  PlanOptions options;
  options.budgetBytes = static_cast<int64_t>(share * unplanned.peakBytes);
  OverheadBound bound = boundAt(g, device, options.budgetBytes, unplanned);
  ASSERT_TRUE(bound.feasible);
  EXPECT_GT(bound.stepUs - unplanned.stepUs, minOverUs);
  llvm::Expected<Plan> autoPlan = planTrainingStep(g, device, options);
  ASSERT_TRUE(bool(autoPlan)) << llvm::toString(autoPlan.takeError());
  expectAbove(*autoPlan, bound, "auto");
}

/// The one result of a new node of `g` (`bytes`, in `scope`).
inline ValueId addOp(TrainingGraph &g, const char *kind, Phase phase, double us,
                     llvm::ArrayRef<ValueId> inputs, int64_t bytes,
                     llvm::StringRef scope = {}) {
  return g.getNode(g.addNode(kind, phase, us, inputs, {bytes}, {}, 0, scope))
      .results[0];
}

/// The same with node `flags` (e.g. NodeFlagMatrix).
inline ValueId addOp(TrainingGraph &g, const char *kind, Phase phase, double us,
                     llvm::ArrayRef<ValueId> inputs, int64_t bytes,
                     uint32_t flags, llvm::StringRef scope = {}) {
  return g
      .getNode(g.addNode(kind, phase, us, inputs, {bytes}, {}, flags, scope))
      .results[0];
}

} // namespace lethe::testing

#endif // LETHE_UNITTESTS_PLANNER_BOUNDTESTSUPPORT_H

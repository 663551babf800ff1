//===- ExactPropertyTest.cpp - The exact solver against the simulator -----===//
//
// On small seeded random layered graphs (RandomGraph.h), at budgets spread
// between the least budget the exact solver meets and the unplanned peak:
// - an exact plan (solver=exact) that fits by the exact model fits in the
//   simulator too, whose peak never exceeds the model's;
// - the fast `auto` solver is within 2% of the exact optimum, both plans
//   measured by the simulator, wherever CBC proves the optimum.
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"

#include "lethe/Planner/ExactModel.h"
#include "lethe/Planner/ExactSolver.h"
#include "lethe/Planner/Planner.h"

#include <gtest/gtest.h>

#include <iostream>

using namespace lethe;
using namespace lethe::testing;

namespace {

RandomGraphOptions smallGraph(uint64_t seed) {
  RandomGraphOptions options;
  options.minLayers = 1;
  options.maxLayers = 2;
  options.minOpsPerLayer = 3;
  options.maxOpsPerLayer = 5;
  options.unitBytes = (seed % 2 ? 4 : 1) << 20;
  return options;
}

PlanOptions autoOptions(int64_t budget, SolverKind solver) {
  PlanOptions options;
  options.policy = Policy::Auto;
  options.solver = solver;
  options.budgetBytes = budget;
  options.exactTimeLimitSec = 60;
  return options;
}

/// Calls `check(graph, budget, seed, fraction)` for small random graphs at
/// budgets from the exact solver's least feasible budget (fraction 0) to
/// just below the unplanned peak.
template <typename Check>
void forSmallGraphsAndBudgets(uint64_t numGraphs, Check check) {
  const DeviceProfile device = testDeviceProfile();
  for (uint64_t seed = 0; seed < numGraphs; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(5000 + seed, smallGraph(seed));
    PlanOptions none;
    none.policy = Policy::None;
    llvm::Expected<Plan> unplanned = planTrainingStep(g, device, none);
    ASSERT_TRUE(bool(unplanned)) << llvm::toString(unplanned.takeError());
    llvm::Expected<Plan> least =
        solveExact(g, device, autoOptions(0, SolverKind::Exact));
    ASSERT_TRUE(bool(least)) << llvm::toString(least.takeError());
    ASSERT_TRUE(least->leastFeasibleBudget.has_value());
    int64_t lo = *least->leastFeasibleBudget, hi = unplanned->peakBytes;
    for (double fraction : {0.0, 0.25, 0.5, 0.75}) {
      SCOPED_TRACE("budget " + std::to_string(fraction));
      check(g, lo + static_cast<int64_t>(fraction * (hi - lo)), seed,
            fraction);
    }
  }
}

TEST(ExactPropertyTest, ExactPlansFitInTheSimulator) {
  const DeviceProfile device = testDeviceProfile();
  int checked = 0;
  forSmallGraphsAndBudgets(20, [&](const TrainingGraph &g, int64_t budget,
                                   uint64_t, double) {
    PlanOptions options = autoOptions(budget, SolverKind::Exact);
    llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    ASSERT_TRUE(plan->exactReport.has_value());
    EXPECT_TRUE(plan->feasible);
    EXPECT_LE(plan->peakBytes, budget);
    // The simulator's peak (in the plan) never exceeds the model's.
    ExactModel model(g, device, options);
    ExactModel::Evaluation eval = model.evaluate(plan->decisions);
    ASSERT_TRUE(eval.valid) << eval.error;
    EXPECT_TRUE(eval.fitsBudget);
    EXPECT_LE(plan->peakBytes, eval.peakBytes);
    ++checked;
  });
  EXPECT_EQ(checked, 80);
}

// Issue 20's target for the fast solver, on 60 graphs at 4 budgets (240
// cases, all proven optimal by CBC within the limit on the development
// machine): within 2% of the exact optimum in every one (since 2026-11-27).
// The last miss was seed 56 at 0.25 (+4.1%): the exact plan is a member's
// decisions with a recompute offloaded instead and another offload's
// prefetch after the ops it overfilled; refining found it (an overfilling
// move tries other offloads widened) but its floor, the unrefined step of
// the member above (704 us), turned it down (687 us); refining now floors at
// the plan the next budget up gets (docs/Planner.md, "Refining and
// monotonicity"). Before that, seed 43 at 0.5 and 27 at 0 (pairs of changes
// between members, a later prefetch in swapBelow); before the plans between
// distant ladder members and the swaps where the ladder ends
// (docs/Planner.md, "Between members") 9 (also seeds 0 and 43 at fraction 0,
// 2 at 0.75, 27 at 0.5 and 40 at 0.25, by +3.2% to +17.5%: a budget under a
// member met by the next member, far below or slower, where one decision
// more on the upper member fits; and seed 33 at fraction 0 with no plan);
// before the trade, widening and swap moves of docs/Planner.md 35 (20 with
// no plan, worst +92.8%); before the flips (flipCostly) 11.
TEST(ExactPropertyTest, FastSolverWithinTwoPercentOfExact) {
  const DeviceProfile device = testDeviceProfile();
  int checked = 0, missed = 0;
  forSmallGraphsAndBudgets(60, [&](const TrainingGraph &g, int64_t budget,
                                   uint64_t, double) {
    llvm::Expected<Plan> exact =
        planTrainingStep(g, device, autoOptions(budget, SolverKind::Exact));
    ASSERT_TRUE(bool(exact)) << llvm::toString(exact.takeError());
    if (!exact->feasible || !exact->exactReport->provenOptimal)
      return;
    llvm::Expected<Plan> fast =
        planTrainingStep(g, device, autoOptions(budget, SolverKind::Fast));
    ASSERT_TRUE(bool(fast)) << llvm::toString(fast.takeError());
    ++checked;
    missed += !fast->feasible || fast->stepUs > 1.02 * exact->stepUs;
    EXPECT_TRUE(fast->feasible);
    EXPECT_LE(fast->stepUs, 1.02 * exact->stepUs)
        << "fast " << fast->stepUs << " us, exact " << exact->stepUs
        << " us (unplanned " << exact->baselineStepUs << " us)";
  });
  // A case proven optimal on a faster machine may not be on a slower one;
  // most must be.
  EXPECT_GT(checked, 200);
  std::cout << "[ note     ] fast solver more than 2% slower than exact in "
            << missed << " of " << checked << " cases\n";
}

} // namespace

//===- ExactPropertyTest.cpp - The exact solver against the simulator -----===//
//
// On small seeded random layered graphs (RandomGraph.h), at budgets spread
// between the least budget the exact solver meets and the unplanned peak:
// - an exact plan (solver=exact) that fits by the exact model fits in the
//   simulator too, whose peak never exceeds the model's;
// - the fast `auto` solver is within 2% of the exact optimum, both plans
//   measured by the simulator, wherever CBC proves the optimum (disabled:
//   see the test).
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"

#include "lethe/Planner/ExactModel.h"
#include "lethe/Planner/ExactSolver.h"
#include "lethe/Planner/Planner.h"

#include <gtest/gtest.h>

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

/// Calls `check(graph, budget)` for small random graphs at budgets from the
/// exact solver's least feasible budget to just below the unplanned peak.
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
      check(g, lo + static_cast<int64_t>(fraction * (hi - lo)));
    }
  }
}

TEST(ExactPropertyTest, ExactPlansFitInTheSimulator) {
  const DeviceProfile device = testDeviceProfile();
  int checked = 0;
  forSmallGraphsAndBudgets(20, [&](const TrainingGraph &g, int64_t budget) {
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

// The target for the fast solver. Disabled because the fast solver
// does not meet it yet: on these graphs (seeds 5000-5059, 156 cases solved
// to optimality) it is more than 2% slower than the exact plan in 45 cases,
// 28 of them because it finds no plan within a budget the exact solver
// meets. Enable it once the fast solver improves.
TEST(ExactPropertyTest, DISABLED_FastSolverWithinTwoPercentOfExact) {
  const DeviceProfile device = testDeviceProfile();
  forSmallGraphsAndBudgets(60, [&](const TrainingGraph &g, int64_t budget) {
    llvm::Expected<Plan> exact =
        planTrainingStep(g, device, autoOptions(budget, SolverKind::Exact));
    ASSERT_TRUE(bool(exact)) << llvm::toString(exact.takeError());
    if (!exact->feasible || !exact->exactReport->provenOptimal)
      return;
    llvm::Expected<Plan> fast =
        planTrainingStep(g, device, autoOptions(budget, SolverKind::Fast));
    ASSERT_TRUE(bool(fast)) << llvm::toString(fast.takeError());
    EXPECT_TRUE(fast->feasible);
    EXPECT_LE(fast->stepUs, 1.02 * exact->stepUs)
        << "fast " << fast->stepUs << " us, exact " << exact->stepUs
        << " us (unplanned " << exact->baselineStepUs << " us)";
  });
}

} // namespace

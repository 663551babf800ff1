//===- GivenPlanReplayTest.cpp - A plan read back is the same plan --------===//
//
// `lethe plan --json` writes each offload's copy placement (release_after,
// prefetch_after) and `--plan FILE` reads it back as the solver's copy
// hints, so auto's plan given back (Policy::Given) places, schedules and
// simulates to the same peak and step time. Over random graphs at budgets
// from the least up, where the least often needs copies later than the
// placement's default (late prefetches, copy-time trades).
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"

#include "lethe/Planner/Planner.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(GivenPlanReplayTest, AutoPlanGivenBackHasTheSamePeakAndStep) {
  const DeviceProfile device = testDeviceProfile();
  unsigned hinted = 0;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(9300 + seed);
    PlanOptions options;
    options.solver = SolverKind::Fast;
    options.budgetBytes = 1;
    llvm::Expected<Plan> least = planTrainingStep(g, device, options);
    ASSERT_TRUE(static_cast<bool>(least));
    ASSERT_TRUE(least->leastFeasibleBudget.has_value());
    for (double fraction : {0.0, 0.1, 0.3}) {
      PlanOptions at = options;
      at.budgetBytes =
          *least->leastFeasibleBudget +
          static_cast<int64_t>(
              fraction * static_cast<double>(least->baselinePeakBytes -
                                             *least->leastFeasibleBudget));
      llvm::Expected<Plan> plan = planTrainingStep(g, device, at);
      ASSERT_TRUE(static_cast<bool>(plan));
      ASSERT_TRUE(plan->feasible);
      // The plan as a file gives it: decisions, and the offloads' release
      // and prefetch nodes; nothing else of the placement.
      PlanOptions given = at;
      given.policy = Policy::Given;
      for (const ActivationDecision &d : plan->decisions) {
        ActivationDecision entry;
        entry.value = d.value;
        entry.decision = d.decision;
        if (d.decision == Decision::Offload) {
          entry.releaseAfter = d.releaseAfter;
          entry.prefetchAfter = d.prefetchAfter;
        }
        given.givenDecisions.push_back(entry);
      }
      llvm::Expected<Plan> back = planTrainingStep(g, device, given);
      ASSERT_TRUE(static_cast<bool>(back));
      EXPECT_EQ(back->peakBytes, plan->peakBytes);
      EXPECT_DOUBLE_EQ(back->stepUs, plan->stepUs);
      EXPECT_TRUE(back->feasible);
      // Without the copy placement (older files) the plan may differ: count
      // the plans where it did, i.e. where the replay needs it.
      PlanOptions bare = given;
      for (ActivationDecision &d : bare.givenDecisions)
        d.releaseAfter = d.prefetchAfter = -1;
      llvm::Expected<Plan> old = planTrainingStep(g, device, bare);
      ASSERT_TRUE(static_cast<bool>(old));
      hinted +=
          old->peakBytes != plan->peakBytes || old->stepUs != plan->stepUs;
    }
  }
  std::printf("the copy placement was needed to replay %u of 72 plans\n",
              hinted);
}

} // namespace

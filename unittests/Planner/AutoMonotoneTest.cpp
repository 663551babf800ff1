//===- AutoMonotoneTest.cpp - More budget never makes auto slower ---------===//
//
// A plan that fits a budget fits every larger one, so the best plan's step
// time can only fall as the budget grows; `auto` should behave the same:
// over random graphs and the real graphs in graphs/, at budgets rising in
// steps of 5% of the unplanned peak, its overhead never rises and a budget
// it meets is met at every larger one.
//
//===----------------------------------------------------------------------===//

#include "GraphFile.h"
#include "RandomGraph.h"

#include "lethe/Planner/Planner.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// Step times are compared to a relative 1e-9: equal plans simulate alike.
constexpr double kTolerance = 1e-9;

void expectMonotone(const TrainingGraph &g, const DeviceProfile &device,
                    double from, double by = 0.05) {
  PlanOptions none;
  none.policy = Policy::None;
  llvm::Expected<Plan> unplanned = planTrainingStep(g, device, none);
  ASSERT_TRUE(bool(unplanned)) << llvm::toString(unplanned.takeError());
  std::optional<Plan> previous;
  for (double fraction = from; fraction < 1.0001; fraction += by) {
    PlanOptions options;
    options.budgetBytes =
        static_cast<int64_t>(fraction * unplanned->peakBytes);
    options.solver = SolverKind::Fast;
    llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    if (previous && previous->feasible) {
      EXPECT_TRUE(plan->feasible)
          << "feasible at " << previous->budgetBytes << " B, not at "
          << plan->budgetBytes << " B";
      if (plan->feasible)
        EXPECT_LE(plan->stepUs, previous->stepUs * (1 + kTolerance))
            << "overhead " << 100 * (plan->stepUs / plan->baselineStepUs - 1)
            << "% at " << plan->budgetBytes << " B, "
            << 100 * (previous->stepUs / previous->baselineStepUs - 1)
            << "% at the smaller " << previous->budgetBytes << " B";
    }
    previous = std::move(*plan);
  }
}

// Was disabled with 6 of graphs 9000-9099 failing (by up to 17.2 points);
// each failure was a plan a few ladder levels down that the greedy found
// and a larger budget did not see (docs/Planner.md, "Restarts, trades and
// the levels below"). Graphs 9100-9399 are in since the look-below window
// took in the plans between members and went 4 members deep; graphs 9108
// and 9311, which rose by up to 4.7 points (a seed restart where the greedy
// was stuck, 5 and 6 members below the plan chosen), since the ladder
// restarts from the seeds where its plans are slower (restartWhereSlower).
// Strict: no graph is left out.
TEST(AutoMonotoneTest, RandomGraphs) {
  const DeviceProfile device = testDeviceProfile();
  for (uint64_t seed = 0; seed < 400; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    expectMonotone(randomLayeredGraph(9000 + seed), device, 0.3);
  }
}

// Budgets that choose the same plan refine it alike: refine's evaluations
// and whether it widens copies are read kRefineBelow ladder members below
// the plan chosen, not where each budget's ladder ends. Read there (at
// e62b162; it fails so at 3a452ef too), this graph got 4,008 us up to
// 118.3 MB and 4,065 us from 119.4 MB, the same plan chosen (peak
// 114,294,784 B). (Graph 9311 at 73.5-81.5 MB, tested
// here before, chooses four plans there since the ladder restarts from the
// seeds where its plans are slower: restartWhereSlower.)
TEST(AutoMonotoneTest, BudgetsChoosingOnePlanRefineItAlike) {
  const DeviceProfile device = testDeviceProfile();
  TrainingGraph g = randomLayeredGraph(9056);
  std::optional<Plan> previous;
  for (int64_t budget = 115'500'000; budget <= 121'500'000; budget += 500'000) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    PlanOptions options;
    options.budgetBytes = budget;
    options.solver = SolverKind::Fast;
    llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    ASSERT_TRUE(plan->feasible);
    if (previous) {
      EXPECT_EQ(plan->peakBytes, previous->peakBytes);
      EXPECT_EQ(plan->stepUs, previous->stepUs);
    }
    previous = std::move(*plan);
  }
}

/// A random graph and two budgets, the larger of which once got the
/// slower plan.
struct BudgetPair {
  uint64_t seed;
  int64_t smaller, larger;
};

/// At each pair's larger budget `auto` is no slower than at its smaller.
void expectLargerNoSlower(llvm::ArrayRef<BudgetPair> pairs) {
  const DeviceProfile device = testDeviceProfile();
  for (const BudgetPair &pair : pairs) {
    SCOPED_TRACE("graph " + std::to_string(pair.seed));
    TrainingGraph g = randomLayeredGraph(pair.seed);
    double steps[2];
    for (int i = 0; i < 2; ++i) {
      PlanOptions options;
      options.budgetBytes = i == 0 ? pair.smaller : pair.larger;
      options.solver = SolverKind::Fast;
      llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
      ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
      ASSERT_TRUE(plan->feasible);
      steps[i] = plan->stepUs;
    }
    EXPECT_LE(steps[1], steps[0] * (1 + kTolerance));
  }
}

// A plan faster than the member a budget chooses, found below the member's
// look-below window, was returned only at the smaller budgets that reach
// it: on graph 9005 one found between two members (2441 us, one decision
// below a member of 2566 us), on graph 9100 a ladder plan four members down
// (1335 us against 1361 us). Each pair failed before the window took in
// the plans between members and went 4 members deep instead of 3
// (docs/Planner.md, "Restarts, trades and the levels below").
TEST(AutoMonotoneTest, FasterPlansDeeperDownAreSeenFromAbove) {
  expectLargerNoSlower(
      {{9005, 39'639'859, 40'520'744}, {9100, 101'930'803, 113'256'447}});
}

// A level's plan slower than a seed that fits the level (graph 9545: 3,154
// us where the seed `full` improved at the level gives 2,779), or 2% slower
// than the member above (graph 9641: 3,607 -> 3,802 us), restarts the
// ladder from the seeds there; before, it restarted only where the greedy
// was stuck, a few levels further down, and the larger budget of each pair,
// whose ladder ended above that, was slower than the smaller (2,783 against
// 2,764 us; 3,706 against 3,649 us). Each pair fails without its half.
TEST(AutoMonotoneTest, RestartsWhereTheGreedyIsSlowerAreSeenFromAbove) {
  expectLargerNoSlower(
      {{9545, 129'607'680, 151'208'960}, {9641, 64'178'380, 71'309'311}});
}

// Further than CI runs it: LETHE_MONOTONE_SEEDS=FIRST-LAST (random graph
// seeds) and LETHE_MONOTONE_STEP (a fraction of the unplanned peak).
TEST(AutoMonotoneTest, DISABLED_RandomGraphsWide) {
  const DeviceProfile device = testDeviceProfile();
  uint64_t first = 9000, last = 9099;
  if (const char *seeds = std::getenv("LETHE_MONOTONE_SEEDS"))
    std::sscanf(seeds, "%lu-%lu", &first, &last);
  double by = 0.05;
  if (const char *step = std::getenv("LETHE_MONOTONE_STEP"))
    by = std::atof(step);
  for (uint64_t seed = first; seed <= last; ++seed) {
    SCOPED_TRACE("graph " + std::to_string(seed));
    expectMonotone(randomLayeredGraph(seed), device, 0.3, by);
  }
}

class AutoMonotoneOnSharedGraphs : public lethe::testing::CorpusGraphTest {};

TEST_P(AutoMonotoneOnSharedGraphs, OverheadNeverRises) {
  expectMonotone(*graph, *device, 0.4);
}

// Every graph of graphs/ (the ten after the first six since 2026-11-27).
INSTANTIATE_TEST_SUITE_P(
    Graphs, AutoMonotoneOnSharedGraphs,
    ::testing::Values("graph_gpt2.json", "graph_resnet50.json",
                      "graph_llama8l.json", "graph_bert_base.json",
                      "graph_vit_b16.json", "graph_unet.json",
                      "graph_convnext_t.json", "graph_dit_b2.json",
                      "graph_gpt2_medium.json", "graph_llama8l_timed.json",
                      "graph_mamba.json", "graph_mixtral_moe.json",
                      "graph_mobilenet_v3.json", "graph_qwen2_gqa.json",
                      "graph_swin_t.json", "graph_t5_base.json"));

} // namespace

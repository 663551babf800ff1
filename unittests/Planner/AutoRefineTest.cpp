//===- AutoRefineTest.cpp - Refining never makes auto's plan worse --------===//
//
// auto ends with a bounded local search on the plan it chose
// (AutoSolverRefine.cpp). Over random graphs and the real graphs in graphs/,
// at budgets from 40% to 90% of the unplanned peak: the refined plan is
// never slower than the plan without it and never above the budget (device
// or host).
//
//===----------------------------------------------------------------------===//

#include "GraphFile.h"
#include "RandomGraph.h"

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Planner.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// auto's inputs at `fraction` of `g`'s unplanned peak (no budget where
/// that is under the least), and the solver's options without refining.
struct RefineCase {
  RefineCase(const TrainingGraph &g, const DeviceProfile &device,
             double fraction)
      : analysis(g, options), evaluator(analysis, device),
        budget(budgetAtFraction(evaluator, analysis, fraction)) {
    if (budget)
      options.budgetBytes = *budget;
    off.refine = false;
  }
  PlanOptions options;
  ActivationAnalysis analysis;
  Evaluator evaluator;
  std::optional<int64_t> budget;
  AutoSolverOptions off;
};

/// Returns whether refining changed the plan.
bool expectRefinedNoWorse(const TrainingGraph &g, const DeviceProfile &device,
                          double fraction) {
  RefineCase c(g, device, fraction);
  if (!c.budget)
    return false;
  const PlanOptions &options = c.options;
  llvm::Expected<AutoSolution> with = solveAuto(c.evaluator, options, {});
  llvm::Expected<AutoSolution> without =
      solveAuto(c.evaluator, options, {}, c.off);
  EXPECT_TRUE(with && without);
  if (!with || !without)
    return false;
  EXPECT_EQ(with->feasible, without->feasible);
  if (!with->feasible)
    return false;
  EXPECT_LE(with->evaluation.peakBytes, options.budgetBytes);
  EXPECT_LE(with->evaluation.hostPeakBytes, options.hostBudgetBytes);
  EXPECT_LE(with->evaluation.stepUs, without->evaluation.stepUs);
  return with->evaluation.stepUs < without->evaluation.stepUs;
}

TEST(AutoRefineTest, NeverWorseOnRandomGraphs) {
  const DeviceProfile device = testDeviceProfile();
  unsigned faster = 0, cases = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(11000 + seed);
    for (double fraction : {0.4, 0.5, 0.6, 0.75, 0.9}) {
      SCOPED_TRACE("fraction " + std::to_string(fraction));
      faster += expectRefinedNoWorse(g, device, fraction);
      ++cases;
    }
  }
  std::printf("refining made %u of %u random-graph plans faster\n", faster,
              cases);
}

class AutoRefineOnSharedGraphs : public lethe::testing::CorpusGraphTest {};

TEST_P(AutoRefineOnSharedGraphs, NeverWorse) {
  unsigned faster = 0;
  for (double fraction : {0.5, 0.6, 0.7}) {
    SCOPED_TRACE("fraction " + std::to_string(fraction));
    faster += expectRefinedNoWorse(*graph, *device, fraction);
  }
  std::printf("refining made %u of 3 plans faster\n", faster);
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoRefineOnSharedGraphs,
                         ::testing::Values("graph_gpt2.json",
                                           "graph_llama8l.json",
                                           "graph_bert_base.json",
                                           "graph_unet.json"));

} // namespace

namespace {

/// auto's plan at 60% of the unplanned peak, which must fit (`plan`), and
/// its overhead over the unplanned step, printed.
void planAt60(const TrainingGraph &graph, const DeviceProfile &device,
              std::optional<Plan> &plan, double &overhead) {
  PlanOptions none;
  none.policy = Policy::None;
  llvm::Expected<Plan> unplanned = planTrainingStep(graph, device, none);
  ASSERT_TRUE(bool(unplanned)) << llvm::toString(unplanned.takeError());
  PlanOptions options;
  options.policy = Policy::Auto;
  options.budgetBytes =
      static_cast<int64_t>(0.6 * static_cast<double>(unplanned->peakBytes));
  llvm::Expected<Plan> planned = planTrainingStep(graph, device, options);
  ASSERT_TRUE(bool(planned)) << llvm::toString(planned.takeError());
  ASSERT_TRUE(planned->feasible);
  EXPECT_LE(planned->peakBytes, options.budgetBytes);
  overhead = planned->stepUs / unplanned->stepUs - 1.0;
  std::printf("overhead %.4f%%\n", 100.0 * overhead);
  plan = std::move(*planned);
}

} // namespace

namespace {

class AutoRefineWidensOthers : public lethe::testing::CorpusGraphTest {};

// A move that overfills ops its own offloads do not reach (its copies delay
// another offload's release or bring its prefetch forward there) is tried
// with each of the three largest such offloads widened over those ops, one
// at a time. On the Llama-style graph with measured times at 60% the
// largest one's widening leaves the step at 8.07% overhead; another's gets
// 8.00% (bench/results/bound.md, 2026-11-27 04:20).
TEST_P(AutoRefineWidensOthers, AnotherOffloadThanTheLargest) {
  std::optional<Plan> plan;
  double overhead = 0.0;
  planAt60(*graph, *device, plan, overhead);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_LT(overhead, 0.0804);
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoRefineWidensOthers,
                         ::testing::Values("graph_llama8l_timed.json"));

} // namespace

namespace {

class AutoRefineSwitchesDrops : public lethe::testing::CorpusGraphTest {};

// A recompute whose offload the estimate prices a little above its re-run
// is tried as an offload (refine's switches): the estimate prices copies at
// the step's average contention. On DiT-B/2 at 60% the ladder offloads
// nothing (6.01% overhead); switched MLP outputs' offloads take it to 5.36%
// (bench/results/bound.md, 2026-11-27 08:30).
TEST_P(AutoRefineSwitchesDrops, RecomputesTriedAsOffloads) {
  std::optional<Plan> plan;
  double overhead = 0.0;
  planAt60(*graph, *device, plan, overhead);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_LT(overhead, 0.056);
  EXPECT_TRUE(llvm::any_of(plan->decisions, [](const ActivationDecision &d) {
    return d.decision == Decision::Offload;
  }));
  // Its remark says what it was (checked by plan-refine.mlir until the
  // ladder found that test's plan itself).
  EXPECT_TRUE(llvm::any_of(plan->decisions, [](const ActivationDecision &d) {
    return d.decision == Decision::Offload &&
           llvm::StringRef(d.reason).contains(
               "[refined: was recomputed in the plan chosen; the change saves");
  }));
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoRefineSwitchesDrops,
                         ::testing::Values("graph_dit_b2.json"));

} // namespace

namespace {

class AutoRefineMovesOffloads : public lethe::testing::CorpusGraphTest {};

// An offload moved to a sibling (refine's swaps): the offloaded activation
// retained and a retained one of at least its bytes offloaded instead, at
// the same peak. On ConvNeXt-T at 60% a layer norm's offload moved to its
// block's residual add takes the plan from 5.05% to under 5.00%; with the
// other swaps the refine takes, 4.65% (bench/results/bound.md, 2026-11-27
// 09:00).
TEST_P(AutoRefineMovesOffloads, ToASibling) {
  std::optional<Plan> plan;
  double overhead = 0.0;
  planAt60(*graph, *device, plan, overhead);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_LT(overhead, 0.0500);
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoRefineMovesOffloads,
                         ::testing::Values("graph_convnext_t.json"));

} // namespace

namespace {

/// The evaluations refining adds to auto's solve at `fraction` of the
/// unplanned peak (those of the solve with refine less those without).
size_t refineEvaluations(const TrainingGraph &g, const DeviceProfile &device,
                         double fraction) {
  RefineCase c(g, device, fraction);
  if (!c.budget)
    return 0;
  size_t before = c.evaluator.getEvaluations();
  llvm::Expected<AutoSolution> without =
      solveAuto(c.evaluator, c.options, {}, c.off);
  EXPECT_TRUE(static_cast<bool>(without));
  const size_t withoutCount = c.evaluator.getEvaluations() - before;
  before = c.evaluator.getEvaluations();
  llvm::Expected<AutoSolution> with = solveAuto(c.evaluator, c.options, {});
  EXPECT_TRUE(static_cast<bool>(with));
  const size_t withCount = c.evaluator.getEvaluations() - before;
  if (!with || !without)
    return 0;
  EXPECT_GE(withCount, withoutCount);
  return withCount - withoutCount;
}

class AutoRefineFloorFollowsCost : public lethe::testing::CorpusGraphTest {};

// The returned plan's refine gets at least 32 evaluations on a graph of up
// to 4,096 nodes, fewer in proportion on larger ones (kFloorFullNodes): on
// DiT-B/2 (1,582 nodes) at 90% the solve makes too few evaluations for its
// eighth to reach 32, and refine makes the 32; on Mamba (18,254 nodes) at
// 70% it makes 7 (it made 32 before 2026-11-27 13:20, for 0.001 points of
// overhead and ~40 ms of the solve).
TEST_P(AutoRefineFloorFollowsCost, InProportionAboveItsSize) {
  const size_t made = refineEvaluations(*graph, *device,
                                        graph->numNodes() > 4096 ? 0.7 : 0.9);
  std::printf("%zu nodes: refine made %zu evaluations\n", graph->numNodes(),
              made);
  if (graph->numNodes() > 4096)
    EXPECT_LE(made, 32u * 4096 / graph->numNodes() + 1);
  else
    EXPECT_GE(made, 32u);
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoRefineFloorFollowsCost,
                         ::testing::Values("graph_dit_b2.json",
                                           "graph_mamba.json"));

} // namespace

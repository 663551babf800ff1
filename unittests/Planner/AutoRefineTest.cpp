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

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// Returns whether refining changed the plan.
bool expectRefinedNoWorse(const TrainingGraph &g, const DeviceProfile &device,
                          double fraction) {
  PlanOptions options;
  ActivationAnalysis analysis(g, options);
  Evaluator evaluator(analysis, device);
  llvm::Expected<Evaluation> unplanned =
      evaluator.evaluate(std::vector<Decision>(analysis.getActivations().size(),
                                               Decision::Retain));
  EXPECT_TRUE(static_cast<bool>(unplanned));
  if (!unplanned)
    return false;
  options.budgetBytes = static_cast<int64_t>(
      fraction * static_cast<double>(unplanned->peakBytes));
  AutoSolverOptions off;
  off.refine = false;
  llvm::Expected<AutoSolution> with = solveAuto(evaluator, options, {});
  llvm::Expected<AutoSolution> without = solveAuto(evaluator, options, {}, off);
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

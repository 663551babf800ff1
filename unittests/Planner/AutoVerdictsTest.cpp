//===- AutoVerdictsTest.cpp - Trials asked for again, not evaluated -------===//
//
// auto's searches ask for many trial plans again: the solves nested for
// refine's floor refine the plan the caller's solve refines, and a probe
// polishes plans an earlier level polished. Verdicts (AutoSolverImpl.h)
// turn such a trial down from what its first evaluation told, without
// evaluating it again. Over random graphs at four budgets and two corpus
// graphs at two, the plans are the same with and without, and trials are
// answered so.
//
//===----------------------------------------------------------------------===//

#include "GraphFile.h"
#include "RandomGraph.h"
#include "SameSolution.h"

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Evaluator.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// Solves `g` at `fraction` of its unplanned peak with and without verdicts;
/// the plans must be the same. Returns the trials the verdicts answered.
size_t expectSamePlans(const TrainingGraph &g, const DeviceProfile &device,
                       double fraction) {
  PlanOptions options;
  ActivationAnalysis analysis(g, options);
  Evaluator evaluator(analysis, device);
  std::optional<int64_t> budget =
      budgetAtFraction(evaluator, analysis, fraction);
  if (!budget)
    return 0;
  options.budgetBytes = *budget;
  AutoSolverOptions off;
  off.verdicts = false;
  llvm::Expected<AutoSolution> with = solveAuto(evaluator, options, {});
  llvm::Expected<AutoSolution> without =
      solveAuto(evaluator, options, {}, off);
  EXPECT_TRUE(with && without);
  if (!with || !without)
    return 0;
  expectSameSolution(*with, *without);
  EXPECT_EQ(without->knownTrials, 0u);
  return with->knownTrials;
}

TEST(AutoVerdictsTest, SamePlansOnRandomGraphs) {
  const DeviceProfile device = testDeviceProfile();
  size_t known = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(13000 + seed);
    for (double fraction : {0.3, 0.5, 0.7, 0.9}) {
      SCOPED_TRACE("fraction " + std::to_string(fraction));
      known += expectSamePlans(g, device, fraction);
    }
  }
  std::printf("%zu trials answered over 120 random-graph solves\n", known);
  EXPECT_GT(known, 0u);
}

class AutoVerdictsOnSharedGraphs : public CorpusGraphTest {};

// Without seeds, BERT at 30% answers 18 trials (its probes' polish asks
// again), DiT-B/2 at 60% 24 (the refine's nested solves ask again).
TEST_P(AutoVerdictsOnSharedGraphs, SamePlans) {
  size_t known = 0;
  for (double fraction : {0.3, 0.6}) {
    SCOPED_TRACE("fraction " + std::to_string(fraction));
    known += expectSamePlans(*graph, *device, fraction);
  }
  std::printf("%zu trials answered\n", known);
  EXPECT_GT(known, 0u);
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoVerdictsOnSharedGraphs,
                         ::testing::Values("graph_bert_base.json",
                                           "graph_dit_b2.json"));

} // namespace

//===- AutoFamilyTest.cpp - A ladder reused at another budget -------------===//
//
// `auto`'s ladder does not depend on the budget, so a solve of the same step
// at another budget may take the ladder an earlier solve built
// (AutoSolverOptions::family: the pipeline's search plans one step again at
// lower budgets until a plan packs). Over random graphs and corpus graphs,
// solved through one family at budgets in an order that both reuses and
// extends its ladder, every plan is the one a solve without the family
// makes: the same decisions, step, peak, member and ladder length.
//
//===----------------------------------------------------------------------===//

#include "GraphFile.h"
#include "RandomGraph.h"

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Evaluator.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// Solves `g` at each fraction of its unplanned peak through `family` and
/// afresh; the plans must be the same. Returns the solves that took members
/// from the family.
unsigned expectSamePlans(const TrainingGraph &g, const DeviceProfile &device,
                         llvm::ArrayRef<double> fractions, AutoFamily &family) {
  PlanOptions options;
  ActivationAnalysis analysis(g, options);
  Evaluator evaluator(analysis, device);
  llvm::Expected<Evaluation> unplanned =
      evaluator.evaluate(std::vector<Decision>(analysis.getActivations().size(),
                                               Decision::Retain));
  EXPECT_TRUE(static_cast<bool>(unplanned));
  if (!unplanned)
    return 0;
  unsigned reused = 0;
  for (double fraction : fractions) {
    SCOPED_TRACE("fraction " + std::to_string(fraction));
    options.budgetBytes = static_cast<int64_t>(
        fraction * static_cast<double>(unplanned->peakBytes));
    AutoSolverOptions through;
    through.family = &family;
    llvm::Expected<AutoSolution> kept =
        solveAuto(evaluator, options, {}, through);
    llvm::Expected<AutoSolution> fresh = solveAuto(evaluator, options, {});
    EXPECT_TRUE(kept && fresh);
    if (!kept || !fresh)
      return reused;
    reused += kept->reusedMembers > 0;
    EXPECT_EQ(fresh->reusedMembers, 0u);
    EXPECT_EQ(kept->decisions, fresh->decisions);
    EXPECT_EQ(kept->evaluation.stepUs, fresh->evaluation.stepUs);
    EXPECT_EQ(kept->evaluation.peakBytes, fresh->evaluation.peakBytes);
    EXPECT_EQ(kept->feasible, fresh->feasible);
    EXPECT_EQ(kept->leastPeakBytes, fresh->leastPeakBytes);
    EXPECT_EQ(kept->chosen, fresh->chosen);
    EXPECT_EQ(kept->levels, fresh->levels);
    EXPECT_EQ(kept->reasons, fresh->reasons);
  }
  return reused;
}

// High, then lower (the ladder built on), then between (taken), then below
// anything (built to its end), then anything (taken).
constexpr double kFractions[] = {0.8, 0.5, 0.9, 0.65, 0.2, 0.4, 0.55, 0.7};

TEST(AutoFamilyTest, SamePlansOnRandomGraphs) {
  const DeviceProfile device = testDeviceProfile();
  unsigned reused = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(12000 + seed);
    AutoFamilies families;
    reused += expectSamePlans(g, device, kFractions, families.get("step"));
  }
  // Every solve after a graph's first takes its ladder, or the start of it,
  // from the family.
  EXPECT_EQ(reused, 7u * 30u);
}

TEST(AutoFamilyTest, AnotherGraphIsNotServed) {
  // A family filled by one graph, asked by another (a caller's mistake):
  // the inputs differ, so the second is solved afresh, and fills it anew.
  const DeviceProfile device = testDeviceProfile();
  AutoFamilies families;
  AutoFamily &family = families.get("step");
  TrainingGraph first = randomLayeredGraph(12100);
  TrainingGraph second = randomLayeredGraph(12101);
  expectSamePlans(first, device, {0.2}, family);
  EXPECT_EQ(expectSamePlans(second, device, {0.5}, family), 0u);
  EXPECT_EQ(expectSamePlans(second, device, {0.6}, family), 1u);
}

TEST(AutoFamilyTest, SameBudgetAgainIsNotSolvedAgain) {
  // The pipeline plans the budget its walk down kept a second time: the
  // family answers with its last solution, the plan a solve without the
  // family makes (expectSamePlans), evaluating only the unplanned step that
  // checks its inputs.
  const DeviceProfile device = testDeviceProfile();
  for (uint64_t seed = 0; seed < 10; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(12200 + seed);
    AutoFamilies families;
    AutoFamily &family = families.get("step");
    expectSamePlans(g, device, {0.6, 0.3, 0.3, 0.45, 0.45, 0.6}, family);

    PlanOptions options;
    ActivationAnalysis analysis(g, options);
    Evaluator evaluator(analysis, device);
    llvm::Expected<Evaluation> unplanned =
        evaluator.evaluate(std::vector<Decision>(
            analysis.getActivations().size(), Decision::Retain));
    ASSERT_TRUE(static_cast<bool>(unplanned));
    options.budgetBytes =
        static_cast<int64_t>(0.5 * static_cast<double>(unplanned->peakBytes));
    AutoSolverOptions through;
    through.family = &family;
    llvm::Expected<AutoSolution> first =
        solveAuto(evaluator, options, {}, through);
    ASSERT_TRUE(static_cast<bool>(first));
    const size_t before = evaluator.getEvaluations();
    llvm::Expected<AutoSolution> again =
        solveAuto(evaluator, options, {}, through);
    ASSERT_TRUE(static_cast<bool>(again));
    EXPECT_EQ(evaluator.getEvaluations() - before, 1u);
    EXPECT_EQ(again->decisions, first->decisions);
    EXPECT_EQ(again->reasons, first->reasons);
    EXPECT_EQ(again->chosen, first->chosen);
  }
}

class AutoFamilyOnSharedGraphs : public lethe::testing::CorpusGraphTest {};

TEST_P(AutoFamilyOnSharedGraphs, SamePlans) {
  AutoFamilies families;
  EXPECT_GE(expectSamePlans(*graph, *device, {0.7, 0.5, 0.6, 0.3, 0.8},
                            families.get("step")),
            2u);
}

INSTANTIATE_TEST_SUITE_P(Corpus, AutoFamilyOnSharedGraphs,
                         ::testing::Values("graph_gpt2.json",
                                           "graph_mobilenet_v3.json",
                                           "graph_t5_base.json"));

} // namespace

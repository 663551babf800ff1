//===- AutoLadderMemoTest.cpp - Trials skipped where they failed above ---===//
//
// The ladder skips a flip not kept at one of the two levels above, and the
// replacement of copy-time trades where it was far slower at the level
// above (LadderMemo, docs/Planner.md). Those skips may change plans: over
// random graphs the plans must fit as before and be no slower than a small
// margin in total, with fewer evaluations; on BERT at its least budget and
// at 40%, where the replacement is skipped, the plans are those without
// the memo and the evaluations fewer.
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

struct Solved {
  AutoSolution solution;
  size_t evaluations = 0;
};

/// `auto` at `budget` (no seeds) with or without the memo, and the
/// evaluations it made.
std::optional<Solved> solve(const Evaluator &evaluator,
                            const PlanOptions &options, bool memo) {
  AutoSolverOptions solver;
  solver.ladderMemo = memo;
  const size_t before = evaluator.getEvaluations();
  llvm::Expected<AutoSolution> solution =
      solveAuto(evaluator, options, {}, solver);
  EXPECT_TRUE(static_cast<bool>(solution));
  if (!solution) {
    llvm::consumeError(solution.takeError());
    return std::nullopt;
  }
  return Solved{std::move(*solution), evaluator.getEvaluations() - before};
}

TEST(AutoLadderMemoTest, FewerEvaluationsOnRandomGraphs) {
  const DeviceProfile device = testDeviceProfile();
  size_t with = 0, without = 0, faster = 0, slower = 0;
  double withUs = 0.0, withoutUs = 0.0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(27000 + seed);
    PlanOptions options;
    ActivationAnalysis analysis(g, options);
    Evaluator evaluator(analysis, device);
    for (double fraction : {0.3, 0.5, 0.7, 0.9}) {
      SCOPED_TRACE("fraction " + std::to_string(fraction));
      std::optional<int64_t> budget =
          budgetAtFraction(evaluator, analysis, fraction);
      if (!budget)
        continue;
      options.budgetBytes = *budget;
      std::optional<Solved> on = solve(evaluator, options, true);
      std::optional<Solved> off = solve(evaluator, options, false);
      if (!on || !off)
        continue;
      // A skipped trial is one the ladder would have made: never more.
      EXPECT_LE(on->evaluations, off->evaluations);
      with += on->evaluations;
      without += off->evaluations;
      ASSERT_EQ(on->solution.feasible, off->solution.feasible);
      if (!on->solution.feasible)
        continue;
      EXPECT_LE(on->solution.evaluation.peakBytes, *budget);
      const double a = on->solution.evaluation.stepUs;
      const double b = off->solution.evaluation.stepUs;
      faster += a < b;
      slower += a > b;
      withUs += a;
      withoutUs += b;
    }
  }
  std::printf("ladder memo on 160 random-graph solves: %zu -> %zu "
              "evaluations, %zu plans faster, %zu slower, step sum %.1f -> "
              "%.1f us\n",
              without, with, faster, slower, withoutUs, withUs);
  EXPECT_LT(with, without);
  // The plans change little: in total no slower than 0.1%.
  EXPECT_LE(withUs, withoutUs * 1.001);
}

class AutoLadderMemoOnBert : public CorpusGraphTest {};

// BERT (no seeds) at about its least budget and at 40%: the replacement of
// copy-time trades is far slower than the plan at the lowest levels and is
// skipped there, and a flip that failed at the level above is not tried;
// neither would have been kept.
TEST_P(AutoLadderMemoOnBert, SamePlansFewerEvaluations) {
  PlanOptions options;
  ActivationAnalysis analysis(*graph, options);
  Evaluator evaluator(analysis, *device);
  for (double fraction : {0.27, 0.4}) {
    SCOPED_TRACE("fraction " + std::to_string(fraction));
    std::optional<int64_t> budget =
        budgetAtFraction(evaluator, analysis, fraction);
    ASSERT_TRUE(budget);
    options.budgetBytes = *budget;
    std::optional<Solved> on = solve(evaluator, options, true);
    std::optional<Solved> off = solve(evaluator, options, false);
    ASSERT_TRUE(on && off);
    expectSameSolution(on->solution, off->solution);
    std::printf("%.2f: %zu -> %zu evaluations\n", fraction, off->evaluations,
                on->evaluations);
    EXPECT_LT(on->evaluations, off->evaluations);
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoLadderMemoOnBert,
                         ::testing::Values("graph_bert_base.json"));

} // namespace

//===- ChainReadersTest.cpp - Chain-reader moves only lower the least -----===//
//
// Where auto's ladder is stuck and no late prefetch lowers the peak, it keeps
// off the peak op a value a recompute chain before the peak node read early
// (the chain's values offloaded instead, the value prefetched after the peak
// node, then the greedy). Over random graphs, with no seeds to fall back on
// (so the move is reached at every stuck ladder): the least peak is never
// higher with it, and at every budget from that least up the plan fits;
// nor with the move's second form (its input recomputed).
//
//===----------------------------------------------------------------------===//

#include "LeastMove.h"

#include <cstdio>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(ChainReadersTest, NeverRaisesTheLeastOnRandomGraphs) {
  AutoSolverOptions off;
  off.chainReaders = false;
  unsigned lower = 0;
  expectLeastNeverRises(
      9100, off, lower,
      [](Evaluator &evaluator, const ActivationAnalysis &analysis,
         const PlanOptions &options, const AutoSolution &with) {
        // From the least up to the unplanned peak the plan fits.
        const int64_t least = with.leastPeakBytes;
        llvm::Expected<Evaluation> unplanned =
            evaluator.evaluate(std::vector<Decision>(
                analysis.getActivations().size(), Decision::Retain));
        ASSERT_TRUE(static_cast<bool>(unplanned));
        for (int step = 0; step <= 4; ++step) {
          PlanOptions at = options;
          at.budgetBytes = least + (unplanned->peakBytes - least) * step / 4;
          llvm::Expected<AutoSolution> fit = solveAuto(evaluator, at, {});
          ASSERT_TRUE(static_cast<bool>(fit));
          EXPECT_TRUE(fit->feasible) << "budget " << at.budgetBytes;
          EXPECT_LE(fit->evaluation.peakBytes, at.budgetBytes);
        }
      });
  std::printf("chain-reader moves lowered the least on %u of 60 graphs\n",
              lower);
}

// The move tried again with its input recomputed instead of prefetched late
// (where that failed) never raises the least either.
TEST(ChainReadersTest, RecomputedInputNeverRaisesTheLeast) {
  AutoSolverOptions off;
  off.recomputeChainInput = false;
  unsigned lower = 0;
  expectLeastNeverRises(9200, off, lower,
                        [](Evaluator &, const ActivationAnalysis &,
                           const PlanOptions &, const AutoSolution &) {});
  std::printf("recomputed chain inputs lowered the least on %u of 60 "
              "graphs\n",
              lower);
}

} // namespace

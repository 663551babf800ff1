//===- LatePrefetchTest.cpp - Late prefetches only lower the least --------===//
//
// Where auto's ladder is stuck, it keeps values needed only after the peak
// op off it (a prefetch issued after the peak node, a retained value
// offloaded with one). Over random graphs, with no seeds to fall back on
// (so the move is reached at every stuck ladder), the least peak is never
// higher with it, and the plan it returns simulates to the peak it states.
//
//===----------------------------------------------------------------------===//

#include "LeastMove.h"

#include <cstdio>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(LatePrefetchTest, NeverRaisesTheLeastOnRandomGraphs) {
  AutoSolverOptions off;
  off.latePrefetch = false;
  unsigned lower = 0;
  expectLeastNeverRises(
      7000, off, lower,
      [](Evaluator &evaluator, const ActivationAnalysis &,
         const PlanOptions &options, const AutoSolution &with) {
        // At its own least the plan fits, as simulated again from its
        // decisions and copy placements.
        PlanOptions atLeast = options;
        atLeast.budgetBytes = with.leastPeakBytes;
        llvm::Expected<AutoSolution> fit = solveAuto(evaluator, atLeast, {});
        ASSERT_TRUE(static_cast<bool>(fit));
        EXPECT_TRUE(fit->feasible);
        EXPECT_LE(fit->evaluation.peakBytes, with.leastPeakBytes);
      });
  std::printf("late prefetches lowered the least on %u of 60 graphs\n", lower);
}

} // namespace

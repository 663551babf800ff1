//===- LatePrefetchTest.cpp - Late prefetches only lower the least --------===//
//
// Where auto's ladder is stuck, it keeps values needed only after the peak
// op off it (a prefetch issued after the peak node, a retained value
// offloaded with one). Over random graphs, with no seeds to fall back on
// (so the move is reached at every stuck ladder), the least peak is never
// higher with it, and the plan it returns simulates to the peak it states.
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Evaluator.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(LatePrefetchTest, NeverRaisesTheLeastOnRandomGraphs) {
  const DeviceProfile device = testDeviceProfile();
  unsigned lower = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(7000 + seed);
    PlanOptions options;
    options.budgetBytes = 1;
    ActivationAnalysis analysis(g, options);
    Evaluator evaluator(analysis, device);
    AutoSolverOptions off;
    off.latePrefetch = false;
    llvm::Expected<AutoSolution> with = solveAuto(evaluator, options, {});
    llvm::Expected<AutoSolution> without =
        solveAuto(evaluator, options, {}, off);
    ASSERT_TRUE(with && without);
    EXPECT_LE(with->leastPeakBytes, without->leastPeakBytes);
    lower += with->leastPeakBytes < without->leastPeakBytes;
    // At its own least the plan fits, as simulated again from its
    // decisions and copy placements.
    PlanOptions atLeast = options;
    atLeast.budgetBytes = with->leastPeakBytes;
    llvm::Expected<AutoSolution> fit = solveAuto(evaluator, atLeast, {});
    ASSERT_TRUE(static_cast<bool>(fit));
    EXPECT_TRUE(fit->feasible);
    EXPECT_LE(fit->evaluation.peakBytes, with->leastPeakBytes);
  }
  std::printf("late prefetches lowered the least on %u of 60 graphs\n", lower);
}

} // namespace

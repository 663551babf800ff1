//===- LeastMove.h - A stuck-ladder move never raises the least -*- C++ -*-===//
//
// The property the tests of auto's stuck-ladder moves share (late
// prefetches, chain readers): over seeded random layered graphs, searched
// for their least (budget 1 B, no seeds to fall back on), the least peak
// with the move on (the default options) is never above the least with it
// off.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_PLANNER_LEASTMOVE_H
#define LETHE_UNITTESTS_PLANNER_LEASTMOVE_H

#include "RandomGraph.h"

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Evaluator.h"

#include <gtest/gtest.h>

#include <string>

namespace lethe::testing {

/// Graphs `firstSeed` .. `firstSeed + 59`, each solved with the move and
/// with `off`; `check(evaluator, analysis, options, with)` tests the
/// solution with the move further. `lower` counts the graphs whose least
/// the move lowered.
template <typename Check>
void expectLeastNeverRises(uint64_t firstSeed, const AutoSolverOptions &off,
                           unsigned &lower, Check check) {
  const DeviceProfile device = testDeviceProfile();
  lower = 0;
  for (uint64_t seed = firstSeed; seed < firstSeed + 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(seed);
    PlanOptions options;
    options.budgetBytes = 1;
    ActivationAnalysis analysis(g, options);
    Evaluator evaluator(analysis, device);
    llvm::Expected<AutoSolution> with = solveAuto(evaluator, options, {});
    llvm::Expected<AutoSolution> without =
        solveAuto(evaluator, options, {}, off);
    ASSERT_TRUE(with && without);
    EXPECT_LE(with->leastPeakBytes, without->leastPeakBytes);
    lower += with->leastPeakBytes < without->leastPeakBytes;
    check(evaluator, analysis, options, *with);
  }
}

} // namespace lethe::testing

#endif // LETHE_UNITTESTS_PLANNER_LEASTMOVE_H

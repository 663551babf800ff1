//===- SameSolution.h - Two auto solutions, compared ------------*- C++ -*-===//
//
// What makes two `auto` solutions the same plan, for the tests that run the
// solver two ways that must not change its result (verdicts on or off, one
// thread or several): the decisions and what they evaluate to, the least
// peak, the ladder and the reasons.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_PLANNER_SAMESOLUTION_H
#define LETHE_UNITTESTS_PLANNER_SAMESOLUTION_H

#include "lethe/Planner/AutoSolver.h"
#include <gtest/gtest.h>

namespace lethe {

inline void expectSameSolution(const AutoSolution &a, const AutoSolution &b) {
  EXPECT_EQ(a.decisions, b.decisions);
  EXPECT_EQ(a.evaluation.stepUs, b.evaluation.stepUs);
  EXPECT_EQ(a.evaluation.peakBytes, b.evaluation.peakBytes);
  EXPECT_EQ(a.feasible, b.feasible);
  EXPECT_EQ(a.leastPeakBytes, b.leastPeakBytes);
  EXPECT_EQ(a.chosen, b.chosen);
  EXPECT_EQ(a.levels, b.levels);
  EXPECT_EQ(a.reasons, b.reasons);
}

} // namespace lethe

#endif // LETHE_UNITTESTS_PLANNER_SAMESOLUTION_H

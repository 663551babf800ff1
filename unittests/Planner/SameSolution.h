//===- SameSolution.h - Two auto solutions, compared ------------*- C++ -*-===//
//
// What makes two `auto` solutions the same plan, for the tests that run the
// solver two ways that must not change its result (verdicts on or off, one
// thread or several): the decisions and what they evaluate to, the least
// peak, the ladder and the reasons; and two plans' decisions, placement and
// reasons, activation by activation.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_PLANNER_SAMESOLUTION_H
#define LETHE_UNITTESTS_PLANNER_SAMESOLUTION_H

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Plan.h"
#include <gtest/gtest.h>
#include <string>

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

inline void expectSameDecisions(const Plan &a, const Plan &b) {
  ASSERT_EQ(a.decisions.size(), b.decisions.size());
  for (size_t i = 0; i < a.decisions.size(); ++i) {
    const ActivationDecision &x = a.decisions[i], &y = b.decisions[i];
    SCOPED_TRACE("activation " + std::to_string(i));
    EXPECT_EQ(x.value, y.value);
    EXPECT_EQ(x.decision, y.decision);
    EXPECT_EQ(x.releaseAfter, y.releaseAfter);
    EXPECT_EQ(x.prefetchAfter, y.prefetchAfter);
    EXPECT_EQ(x.firstBackwardUse, y.firstBackwardUse);
    EXPECT_EQ(x.recomputeNodes, y.recomputeNodes);
    EXPECT_EQ(x.reason, y.reason);
  }
}

} // namespace lethe

#endif // LETHE_UNITTESTS_PLANNER_SAMESOLUTION_H

//===- EvaluationLimitsTest.cpp - Evaluations stopped early decide alike --===//
//
// EvaluationLimits (Evaluator.h) lets a caller skip the simulation of a plan
// whose peak is over its cap and stop the one whose step is past its limit.
// Property test: over random graphs and decisions, at caps and limits around
// each plan's own figures, a limited evaluation has the whole one's memory,
// is simulated (bit for bit the whole figures) wherever the plan is within
// both, and where it is not simulated the plan is over the cap or slower
// than the limit; simulating it afterwards gives the whole figures.
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"

#include <gtest/gtest.h>

#include <random>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(EvaluationLimitsTest, LimitedEvaluationsDecideAsWholeOnes) {
  size_t stopped = 0, skipped = 0, simulated = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    std::mt19937_64 &rng = step.rng;
    llvm::ArrayRef<ActivationInfo> acts = step.analysis.getActivations();
    Evaluator evaluator(step.analysis, testDeviceProfile());
    for (int v = 0; v < 6; ++v) {
      std::vector<Decision> decisions(acts.size(), Decision::Retain);
      for (size_t a = 0; a < acts.size(); ++a) {
        unsigned r = rng() % 3;
        if (r == 1 && acts[a].recomputable)
          decisions[a] = Decision::Recompute;
        else if (r == 2 && acts[a].offloadable)
          decisions[a] = Decision::Offload;
      }
      llvm::Expected<Evaluation> whole = evaluator.evaluate(decisions);
      if (!whole) {
        llvm::consumeError(whole.takeError());
        continue;
      }
      ASSERT_TRUE(whole->simulated);
      const int64_t peak = whole->peakBytes;
      const double step = whole->stepUs;
      for (int64_t cap : {peak - 1, peak, peak + 1})
        for (double limit : {0.5 * step, step * (1 - 1e-6), step,
                             step * (1 + 1e-6), 2.0 * step}) {
          llvm::Expected<Evaluation> limited =
              evaluator.evaluate(decisions, {}, {cap, limit});
          ASSERT_TRUE(static_cast<bool>(limited))
              << llvm::toString(limited.takeError());
          EXPECT_EQ(limited->peakBytes, peak);
          EXPECT_EQ(limited->hostPeakBytes, whole->hostPeakBytes);
          EXPECT_EQ(limited->memory.deviceAtOp, whole->memory.deviceAtOp);
          EXPECT_EQ(limited->memory.peakOp, whole->memory.peakOp);
          const bool within = peak <= cap && step <= limit;
          if (within) {
            // A plan the caller could keep is always simulated.
            EXPECT_TRUE(limited->simulated) << cap << " " << limit;
          }
          if (limited->simulated) {
            ++simulated;
            EXPECT_EQ(limited->stepUs, step);
            EXPECT_EQ(limited->exposedCopyUs, whole->exposedCopyUs);
            continue;
          }
          EXPECT_FALSE(within);
          EXPECT_EQ(limited->stepUs, std::numeric_limits<double>::infinity());
          ++(peak > cap ? skipped : stopped);
          // Simulated afterwards, it is the whole evaluation.
          ASSERT_FALSE(static_cast<bool>(evaluator.simulate(*limited)));
          EXPECT_TRUE(limited->simulated);
          EXPECT_EQ(limited->stepUs, step);
          EXPECT_EQ(limited->exposedCopyUs, whole->exposedCopyUs);
        }
      llvm::Expected<Evaluation> memory =
          evaluator.evaluate(decisions, {}, EvaluationLimits::memoryOnly());
      ASSERT_TRUE(static_cast<bool>(memory));
      EXPECT_FALSE(memory->simulated);
      EXPECT_EQ(memory->memory.deviceAtOp, whole->memory.deviceAtOp);
    }
  }
  // The test exercises every path: plans skipped, stopped and simulated.
  EXPECT_GT(skipped, 100u);
  EXPECT_GT(stopped, 100u);
  EXPECT_GT(simulated, 100u);
}

} // namespace

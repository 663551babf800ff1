//===- RetainedPeakBoundTest.cpp - unexposeOffloads' bound is a bound -----===//
//
// unexposeOffloads (AutoSolverSearch.cpp) skips retaining an offloaded
// activation where retainedPeakBound proves the plan's peak over the level,
// counting the trial as evaluated: the plans are the same only if the bound
// never exceeds the peak the evaluation would have found. Property test:
// over random graphs and random plans with offloads (hidden copies and
// copy-time trades), for every offloaded activation the bound is at most
// the evaluated peak of the plan with it retained, and it proves something
// (is above the current plan's peak less the activation) often enough to
// matter.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Planner/AutoSolverImpl.h"
#include "RandomGraph.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(RetainedPeakBoundTest, NeverAboveTheRetainedPlansPeak) {
  size_t checked = 0, proving = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    const TrainingGraph &g = step.graph;
    const ActivationAnalysis &analysis = step.analysis;
    std::mt19937_64 &rng = step.rng;
    llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
    Evaluator evaluator(analysis, testDeviceProfile());
    for (int v = 0; v < 4; ++v) {
      std::optional<RandomPlan> plan =
          randomPlan(analysis, g.numNodes(), evaluator, rng);
      if (!plan)
        continue;
      for (size_t a = 0; a < acts.size(); ++a) {
        if (plan->eval.placement->decisions[a].decision != Decision::Offload)
          continue;
        int64_t bound = autosolver::retainedPeakBound(
            analysis, plan->eval, plan->nodeOp, plan->regionStart,
            static_cast<int32_t>(a));
        if (bound == std::numeric_limits<int64_t>::min())
          continue;
        std::vector<Decision> trial = plan->decisions;
        std::vector<CopyHint> trialHints = plan->hints;
        trial[a] = Decision::Retain;
        trialHints[a] = CopyHint();
        llvm::Expected<Evaluation> retained = evaluator.evaluate(
            trial, trialHints, EvaluationLimits::memoryOnly());
        ASSERT_TRUE(static_cast<bool>(retained))
            << llvm::toString(retained.takeError());
        ++checked;
        EXPECT_LE(bound, retained->peakBytes) << "activation " << a;
        proving += bound > plan->eval.peakBytes - acts[a].bytes;
      }
    }
  }
  // The bound is only worth its time where it proves something.
  EXPECT_GT(checked, 500u);
  EXPECT_GT(proving, checked / 10);
  std::cerr << checked << " bounds checked, " << proving << " above the "
            << "current peak less the activation\n";
}

} // namespace

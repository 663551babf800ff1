//===- CopyOnlyPeakTest.cpp - copyOnlyPeak is the evaluated peak ----------===//
//
// polish and unexposeOffloads (AutoSolverSearch.cpp) skip a trial that
// changes only copies (copy hints, an offload retained) where copyOnlyPeak
// puts it over the level, counting it as evaluated: the plans are the same
// only if it is the peak the evaluation would find. Property test: over
// random graphs and random plans with offloads (hidden copies and
// copy-time trades), the peak of every such trial (its trades' copies
// hidden, half of them, a random hint moved, each offload retained) is
// exactly the evaluated one wherever copyOnlyPeak gives one.
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

TEST(CopyOnlyPeakTest, IsTheEvaluatedPeak) {
  size_t checked = 0, retains = 0, moved = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    const TrainingGraph &g = step.graph;
    const ActivationAnalysis &analysis = step.analysis;
    std::mt19937_64 &rng = step.rng;
    llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
    const DeviceProfile device = testDeviceProfile();
    Evaluator evaluator(analysis, device);
    for (int v = 0; v < 4; ++v) {
      std::optional<RandomPlan> plan =
          randomPlan(analysis, g.numNodes(), evaluator, rng);
      if (!plan)
        continue;
      // Nothing changed: the plan's own peak.
      EXPECT_EQ(autosolver::copyOnlyPeak(analysis, device, plan->eval,
                                         plan->nodeOp, plan->regionStart, {},
                                         plan->hints),
                plan->eval.peakBytes);
      auto check = [&](llvm::ArrayRef<int32_t> retained,
                       llvm::ArrayRef<CopyHint> trialHints) {
        int64_t peak =
            autosolver::copyOnlyPeak(analysis, device, plan->eval, plan->nodeOp,
                                     plan->regionStart, retained, trialHints);
        if (peak == std::numeric_limits<int64_t>::min())
          return;
        std::vector<Decision> trial = plan->decisions;
        for (int32_t a : retained)
          trial[a] = Decision::Retain;
        llvm::Expected<Evaluation> changed = evaluator.evaluate(
            trial, trialHints, EvaluationLimits::memoryOnly());
        ASSERT_TRUE(static_cast<bool>(changed))
            << llvm::toString(changed.takeError());
        ++checked;
        EXPECT_EQ(peak, changed->peakBytes);
      };
      // Every trade's copies hidden, then the first half's (polish).
      std::vector<int32_t> trades;
      for (size_t a = 0; a < acts.size(); ++a)
        if (plan->decisions[a] == Decision::Offload &&
            !(plan->hints[a] == CopyHint()))
          trades.push_back(static_cast<int32_t>(a));
      for (size_t count = trades.size(); count > 0; count /= 2) {
        std::vector<CopyHint> trialHints = plan->hints;
        for (size_t i = 0; i < count; ++i)
          trialHints[trades[i]] = CopyHint();
        check({}, trialHints);
      }
      for (size_t a = 0; a < acts.size(); ++a) {
        if (plan->eval.placement->decisions[a].decision != Decision::Offload)
          continue;
        // Retained (unexposeOffloads).
        std::vector<CopyHint> trialHints = plan->hints;
        trialHints[a] = CopyHint();
        size_t before = checked;
        check({static_cast<int32_t>(a)}, trialHints);
        retains += checked - before;
        // Released and prefetched at random nodes of its gap.
        const ActivationDecision &d = plan->eval.placement->decisions[a];
        NodeId span = d.firstBackwardUse - acts[a].lastForwardUse;
        trialHints[a] = {
            acts[a].lastForwardUse + static_cast<NodeId>(rng() % span),
            acts[a].lastForwardUse + static_cast<NodeId>(rng() % span)};
        before = checked;
        check({}, trialHints);
        moved += checked - before;
      }
    }
  }
  EXPECT_GT(retains, 500u);
  EXPECT_GT(moved, 500u);
  std::cerr << checked << " peaks checked (" << retains << " retains, "
            << moved << " moved copies)\n";
}

} // namespace

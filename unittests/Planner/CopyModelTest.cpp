//===- CopyModelTest.cpp - whatIf is the queues run again -----------------===//
//
// CopyModel::whatIf places a new offload's copies without copying the
// queues, placing each copy again only where what decides its place moved
// (AutoSolver's candidates read its answers, so the plans are the same only
// if they are those of the queues run whole). Property test: over random
// plans of random graphs and of BERT, for every offloadable activation the
// plan retains, at its restore point and at one drawn in its gap, with no
// hint and with random ones, whatIf gives to the bit what add() and update()
// on a copy of the model give: the new copy's release, prefetch, D2H end
// and H2D start, every other copy that moves, and the extra wait.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Planner/CopyModel.h"
#include "GraphFile.h"
#include "RandomGraph.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace lethe;
using namespace lethe::testing;

namespace {

struct Checked {
  size_t whatIfs = 0, withMoves = 0, withExtra = 0;
};

/// Compares whatIf with the model run again for offloadable activations
/// that `plan` retains, in `rng`'s order (at most `limit` of them).
void checkWhatIfs(const ActivationAnalysis &analysis,
                  const DeviceProfile &device, const RandomPlan &plan,
                  std::mt19937_64 &rng, size_t limit, Checked &checked) {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  const Placement &placement = *plan.eval.placement;
  planner::CopyModel model(analysis, device, placement, plan.hints);
  std::vector<int32_t> retained;
  for (size_t a = 0; a < acts.size(); ++a)
    if (plan.decisions[a] == Decision::Retain && acts[a].offloadable &&
        acts[a].firstBackwardUse > acts[a].lastForwardUse + 1)
      retained.push_back(static_cast<int32_t>(a));
  std::shuffle(retained.begin(), retained.end(), rng);
  retained.resize(std::min(retained.size(), limit));
  for (int32_t a : retained) {
    const ActivationInfo &act = acts[a];
    // Its restore point, and one drawn in its gap.
    NodeId gap = act.firstBackwardUse - act.lastForwardUse - 1;
    for (NodeId restore :
         {act.firstBackwardUse,
          act.lastForwardUse + 2 + static_cast<NodeId>(rng() % gap)}) {
      if (restore > act.firstBackwardUse)
        continue;
      CopyHint none, drawn;
      drawn.releaseBy = act.lastForwardUse + static_cast<NodeId>(rng() % 3);
      if (rng() % 2)
        drawn.prefetchNotBefore =
            act.lastForwardUse + static_cast<NodeId>(rng() % gap);
      for (CopyHint hint : {none, drawn}) {
        SCOPED_TRACE("activation " + std::to_string(a) + " restored before " +
                     std::to_string(restore));
        planner::CopyWhatIf w = model.whatIf(a, restore, hint);
        planner::CopyModel ran = model;
        ran.add(a, restore, hint);
        ran.update();
        llvm::ArrayRef<planner::CopyEntry> before = model.getEntries();
        llvm::ArrayRef<planner::CopyEntry> after = ran.getEntries();
        ASSERT_EQ(after.size(), before.size() + 1);
        const planner::CopyEntry &mine = after.back();
        EXPECT_EQ(w.release, mine.release);
        EXPECT_EQ(w.prefetch, mine.prefetch);
        // Bit for bit: the solver compares these with others.
        EXPECT_EQ(w.d2hEnd, mine.d2hEnd);
        EXPECT_EQ(w.h2dStart, mine.h2dStart);
        EXPECT_EQ(w.extraUs,
                  std::max(0.0, ran.exposureUs() - model.exposureUs()));
        std::vector<planner::CopyWhatIf::Move> moves;
        for (uint32_t i = 0; i < before.size(); ++i)
          if (after[i].release != before[i].release ||
              after[i].prefetch != before[i].prefetch)
            moves.push_back({i, before[i].release, before[i].prefetch,
                             after[i].release, after[i].prefetch});
        ASSERT_EQ(w.moved.size(), moves.size());
        for (size_t k = 0; k < moves.size(); ++k) {
          EXPECT_EQ(w.moved[k].entry, moves[k].entry);
          EXPECT_EQ(w.moved[k].oldRelease, moves[k].oldRelease);
          EXPECT_EQ(w.moved[k].oldPrefetch, moves[k].oldPrefetch);
          EXPECT_EQ(w.moved[k].newRelease, moves[k].newRelease);
          EXPECT_EQ(w.moved[k].newPrefetch, moves[k].newPrefetch);
        }
        ++checked.whatIfs;
        checked.withMoves += !moves.empty();
        checked.withExtra += w.extraUs > 0.0;
      }
    }
  }
}

TEST(CopyModelTest, WhatIfIsTheQueuesRunAgain) {
  Checked checked;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    const DeviceProfile device = testDeviceProfile();
    Evaluator evaluator(step.analysis, device);
    for (int v = 0; v < 3; ++v) {
      std::optional<RandomPlan> plan =
          randomPlan(step.analysis, step.graph.numNodes(), evaluator, step.rng);
      if (plan)
        checkWhatIfs(step.analysis, device, *plan, step.rng, 24, checked);
    }
  }
  // The property was exercised where copies move and where the step waits.
  EXPECT_GT(checked.whatIfs, 1000u);
  EXPECT_GT(checked.withMoves, 50u);
  EXPECT_GT(checked.withExtra, 50u);
}

class CopyModelOnBert : public CorpusGraphTest {};

TEST_P(CopyModelOnBert, WhatIfIsTheQueuesRunAgain) {
  PlanOptions options;
  ActivationAnalysis analysis(*graph, options);
  Evaluator evaluator(analysis, *device);
  std::mt19937_64 rng(31);
  Checked checked;
  for (int v = 0; v < 4; ++v) {
    std::optional<RandomPlan> plan =
        randomPlan(analysis, graph->numNodes(), evaluator, rng);
    if (plan)
      checkWhatIfs(analysis, *device, *plan, rng, 60, checked);
  }
  EXPECT_GT(checked.whatIfs, 400u);
  EXPECT_GT(checked.withMoves, 20u);
  EXPECT_GT(checked.withExtra, 20u);
}

INSTANTIATE_TEST_SUITE_P(Graphs, CopyModelOnBert,
                         ::testing::Values("graph_bert_base.json"));

} // namespace

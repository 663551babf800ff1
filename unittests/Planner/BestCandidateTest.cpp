//===- BestCandidateTest.cpp - bestCandidate's keyed scores ---------------===//
//
// The greedy picks with bestCandidate(cands, &batch), which reads the score
// and ties of the batch's recompute candidates from Batch::recomputeKey
// instead of the Candidates: the pick is the same only if the keys order
// them as betterCandidate does. Property test: random candidate lists,
// most scores tied (a step of repeated layers), recomputes of a batch mixed
// with offloads judged apart; the keyed pick is the reference pick. And
// Batch::bestRecomputeAt, which the greedy asks instead of listing every
// recompute candidate at each pick, is the reference pick of that list.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Planner/AutoSolverImpl.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

using namespace lethe;
using namespace lethe::autosolver;

namespace {

TEST(BestCandidateTest, KeyedPickIsTheReferencePick) {
  std::mt19937_64 rng(20);
  for (int trial = 0; trial < 500; ++trial) {
    // Few distinct costs, bytes and difficulties, so that ties reach every
    // test of betterCandidate.
    auto pickOf = [&](int n) {
      return static_cast<int>(rng() % static_cast<uint64_t>(n));
    };
    const int numActs = 1 + pickOf(60);
    Batch batch;
    batch.recompute.resize(numActs);
    batch.recomputeKey.resize(numActs);
    std::vector<const Candidate *> cands;
    for (int a = 0; a < numActs; ++a) {
      if (pickOf(4) == 0)
        continue; // not a candidate here
      Candidate &c = batch.recompute[a];
      c.act = a;
      c.decision = Decision::Recompute;
      c.bytes = c.benefit = 1 + pickOf(3);
      c.costUs = static_cast<double>(pickOf(3)) * static_cast<double>(c.bytes);
      c.difficulty = static_cast<double>(pickOf(2));
      batch.setRecomputeKey(c);
      cands.push_back(&c);
    }
    std::vector<Candidate> offloads(pickOf(6));
    for (Candidate &c : offloads) {
      c.act = pickOf(numActs);
      c.decision = Decision::Offload;
      c.bytes = c.benefit = 1 + pickOf(3);
      c.costUs = static_cast<double>(pickOf(3)) * static_cast<double>(c.bytes);
      c.difficulty = static_cast<double>(pickOf(2));
      cands.push_back(&c);
    }
    if (cands.empty())
      continue;
    std::shuffle(cands.begin(), cands.end(), rng);
    const Candidate *reference = bestCandidate(cands);
    ASSERT_EQ(bestCandidate(cands, &batch), reference) << "trial " << trial;
  }
}

/// The keys are what the candidates say: a key left stale gives another
/// pick.
TEST(BestCandidateTest, StaleKeyChangesThePick) {
  Batch batch;
  batch.recompute.resize(2);
  batch.recomputeKey.resize(2);
  for (int a = 0; a < 2; ++a) {
    Candidate &c = batch.recompute[a];
    c.act = a;
    c.decision = Decision::Recompute;
    c.bytes = c.benefit = 10;
    c.costUs = a == 0 ? 5.0 : 1.0;
    batch.setRecomputeKey(c);
  }
  std::vector<const Candidate *> cands = {&batch.recompute[0],
                                          &batch.recompute[1]};
  EXPECT_EQ(bestCandidate(cands, &batch), &batch.recompute[1]);
  batch.recompute[0].costUs = 0.5; // cheaper now, its key not updated
  EXPECT_EQ(bestCandidate(cands), &batch.recompute[0]);
  EXPECT_EQ(bestCandidate(cands, &batch), &batch.recompute[1]);
  batch.setRecomputeKey(batch.recompute[0]);
  EXPECT_EQ(bestCandidate(cands, &batch), &batch.recompute[0]);
}

/// bestRecomputeAt(op) is bestCandidate of the recompute candidates that
/// free `op` (live there, in their gap, not picked), while picks are made
/// and keys move (better and worse, many tied, enough to sort again).
TEST(BestCandidateTest, BestRecomputeAtIsTheListsPick) {
  std::mt19937_64 rng(21);
  auto pickOf = [&](int n) {
    return static_cast<int>(rng() % static_cast<uint64_t>(n));
  };
  int found = 0, none = 0, resorted = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int numActs = 1 + pickOf(300);
    const int numOps = 1 + pickOf(100);
    Batch batch;
    batch.recompute.assign(numActs, Candidate());
    batch.recomputeKey.assign(numActs, {});
    batch.picked.assign(numActs, 0);
    batch.liveIndex.assign(numActs, -1);
    auto setCost = [&](Candidate &c) {
      c.costUs = static_cast<double>(pickOf(3)) * static_cast<double>(c.bytes);
      batch.setRecomputeKey(c);
    };
    for (int a = 0; a < numActs; ++a) {
      if (pickOf(5) == 0)
        continue; // not live: no entry
      int begin = pickOf(numOps), end = begin + pickOf(numOps - begin);
      batch.liveIndex[a] = static_cast<int32_t>(batch.liveAct.size());
      batch.liveAct.push_back(a);
      batch.liveBegin.push_back(begin);
      batch.liveEnd.push_back(end);
      batch.liveGapBegin.push_back(std::numeric_limits<size_t>::max());
      batch.liveGapEnd.push_back(0);
      if (pickOf(4) == 0)
        continue; // not recomputable
      size_t gapBegin = pickOf(numOps);
      batch.liveGapBegin.back() = gapBegin;
      batch.liveGapEnd.back() = gapBegin + pickOf(numOps);
      Candidate &c = batch.recompute[a];
      c.act = a;
      c.decision = Decision::Recompute;
      c.bytes = c.benefit = 1 + pickOf(3);
      c.difficulty = static_cast<double>(pickOf(2));
      setCost(c);
      batch.byRestore.push_back({static_cast<NodeId>(pickOf(10)), a});
    }
    llvm::sort(batch.byRestore);
    batch.sortRecomputes();
    for (int step = 0; step < 60; ++step) {
      size_t op = pickOf(numOps);
      std::vector<const Candidate *> listed;
      for (size_t k = 0; k < batch.liveAct.size(); ++k) {
        int32_t a = batch.liveAct[k];
        if (!batch.picked[a] && op >= static_cast<size_t>(batch.liveBegin[k]) &&
            op <= static_cast<size_t>(batch.liveEnd[k]) &&
            op >= batch.liveGapBegin[k] && op <= batch.liveGapEnd[k])
          listed.push_back(&batch.recompute[a]);
      }
      const Candidate *expected =
          listed.empty() ? nullptr : bestCandidate(listed);
      size_t movedBefore = batch.movedKeys.size();
      ASSERT_EQ(batch.bestRecomputeAt(op), expected)
          << "trial " << trial << ", step " << step;
      resorted += batch.movedKeys.size() < movedBefore;
      (expected ? found : none)++;
      // Pick the best (as the greedy does) or another, and move keys.
      if (expected && pickOf(2) == 0)
        batch.picked[expected->act] = 1;
      for (int moves = pickOf(8); moves > 0; --moves) {
        int a = pickOf(numActs);
        if (batch.recompute[a].act >= 0 && !batch.picked[a])
          setCost(batch.recompute[a]);
      }
    }
  }
  EXPECT_GT(found, 0);
  EXPECT_GT(none, 0);
  EXPECT_GT(resorted, 0);
}

} // namespace

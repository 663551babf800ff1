//===- BestCandidateTest.cpp - bestCandidate's keyed scores ---------------===//
//
// The greedy picks with bestCandidate(cands, &batch), which reads the score
// and ties of the batch's recompute candidates from Batch::recomputeKey
// instead of the Candidates: the pick is the same only if the keys order
// them as betterCandidate does. Property test: random candidate lists,
// most scores tied (a step of repeated layers), recomputes of a batch mixed
// with offloads judged apart; the keyed pick is the reference pick.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Planner/AutoSolverImpl.h"

#include <gtest/gtest.h>

#include <algorithm>
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

} // namespace

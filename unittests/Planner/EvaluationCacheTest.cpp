//===- EvaluationCacheTest.cpp - Reused evaluations are the evaluations ---===//
//
// The Evaluator keeps evaluations and answers repeated requests from them
// (Evaluator.h, EvaluationCache). Property tests that this changes nothing
// but the time:
// - on random graphs, random decision vectors asked for in a random order
//   (repeats, and evictions from a small cache) give, field by field and to
//   the bit, what an evaluator that keeps nothing gives;
// - `auto` plans (decisions, placements, peak, step time) are the same
//   with the cache and without, on random graphs and on corpus graphs;
// - an evaluator that writes each evaluation into the storage of one it
//   let go (placements and schedules recycled, the memory read off the
//   builder's buffers) gives, along a walk of trials a few decisions
//   apart as the `auto` solver makes them, what placing, building,
//   walking and simulating each from scratch gives.
//
//===----------------------------------------------------------------------===//

#include "GraphFile.h"
#include "RandomGraph.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Simulator/Simulator.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// A cache that holds every evaluation of these solves.
constexpr int64_t kManyEvaluations = int64_t(256) << 20;

void expectSameDecisions(llvm::ArrayRef<ActivationDecision> x,
                         llvm::ArrayRef<ActivationDecision> y) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t a = 0; a < x.size(); ++a) {
    SCOPED_TRACE("activation " + std::to_string(a));
    EXPECT_EQ(x[a].value, y[a].value);
    EXPECT_EQ(x[a].decision, y[a].decision);
    EXPECT_EQ(x[a].firstBackwardUse, y[a].firstBackwardUse);
    EXPECT_EQ(x[a].releaseAfter, y[a].releaseAfter);
    EXPECT_EQ(x[a].prefetchAfter, y[a].prefetchAfter);
    EXPECT_EQ(x[a].recomputeNodes, y[a].recomputeNodes);
  }
}

void expectSameEvaluation(const Evaluation &x, const Evaluation &y) {
  // Bit for bit: the same operations in the same order.
  EXPECT_EQ(x.stepUs, y.stepUs);
  EXPECT_EQ(x.exposedCopyUs, y.exposedCopyUs);
  EXPECT_EQ(x.peakBytes, y.peakBytes);
  EXPECT_EQ(x.hostPeakBytes, y.hostPeakBytes);
  EXPECT_EQ(x.memory.deviceAtOp, y.memory.deviceAtOp);
  EXPECT_EQ(x.memory.peakOp, y.memory.peakOp);
  EXPECT_EQ(x.memory.peakBytes, y.memory.peakBytes);
  EXPECT_EQ(x.placement->chainUs, y.placement->chainUs);
  EXPECT_EQ(x.placement->nodeEndUs, y.placement->nodeEndUs);
  EXPECT_EQ(x.placement->recomputeUs, y.placement->recomputeUs);
  expectSameDecisions(x.placement->decisions, y.placement->decisions);
  ASSERT_EQ(x.schedule->ops.size(), y.schedule->ops.size());
  for (size_t k = 0; k < x.schedule->ops.size(); ++k) {
    const ScheduleOp &a = x.schedule->ops[k], &b = y.schedule->ops[k];
    EXPECT_TRUE(a.kind == b.kind && a.node == b.node &&
                a.storage == b.storage && a.deps == b.deps &&
                a.allocs == b.allocs && a.frees == b.frees)
        << "op " << k;
  }
}

/// Every field of two placements, to the bit.
void expectSamePlacement(const Placement &x, const Placement &y) {
  expectSameDecisions(x.decisions, y.decisions);
  for (size_t a = 0; a < x.decisions.size() && a < y.decisions.size(); ++a)
    EXPECT_EQ(x.decisions[a].reason, y.decisions[a].reason);
  EXPECT_EQ(x.chainUs, y.chainUs);
  EXPECT_EQ(x.chainBegin, y.chainBegin);
  EXPECT_EQ(x.chainNodes, y.chainNodes);
  EXPECT_EQ(x.chainStartUs, y.chainStartUs);
  EXPECT_EQ(x.nodeEndUs, y.nodeEndUs);
  EXPECT_EQ(x.d2hEndUs, y.d2hEndUs);
  EXPECT_EQ(x.h2dStartUs, y.h2dStartUs);
  EXPECT_EQ(x.recomputeUs, y.recomputeUs);
}

void expectSamePlan(const Plan &x, const Plan &y) {
  EXPECT_EQ(x.feasible, y.feasible);
  EXPECT_EQ(x.peakBytes, y.peakBytes);
  EXPECT_EQ(x.stepUs, y.stepUs);
  EXPECT_EQ(x.baselineStepUs, y.baselineStepUs);
  EXPECT_EQ(x.leastFeasibleBudget, y.leastFeasibleBudget);
  expectSameDecisions(x.decisions, y.decisions);
  ASSERT_EQ(x.decisions.size(), y.decisions.size());
  for (size_t a = 0; a < x.decisions.size(); ++a)
    EXPECT_EQ(x.decisions[a].reason, y.decisions[a].reason);
}

TEST(EvaluationCacheTest, ReusedEvaluationsAreBitIdentical) {
  size_t hits = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    const ActivationAnalysis &analysis = step.analysis;
    std::mt19937_64 &rng = step.rng;
    llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
    // A pool of decision vectors, some with copy hints.
    std::vector<std::pair<std::vector<Decision>, std::vector<CopyHint>>> pool;
    for (int v = 0; v < 8; ++v) {
      std::vector<Decision> decisions(acts.size(), Decision::Retain);
      std::vector<CopyHint> hints;
      for (size_t a = 0; a < acts.size(); ++a) {
        unsigned r = rng() % 3;
        if (r == 1 && acts[a].recomputable)
          decisions[a] = Decision::Recompute;
        else if (r == 2 && acts[a].offloadable)
          decisions[a] = Decision::Offload;
      }
      if (v % 2)
        hints.assign(acts.size(), CopyHint());
      pool.push_back({std::move(decisions), std::move(hints)});
    }
    // A cache that holds a few evaluations, so that some are evicted.
    Evaluator kept(analysis, testDeviceProfile(), /*copiesYield=*/false,
                   /*cacheBytes=*/int64_t(3) << 20);
    Evaluator fresh(analysis, testDeviceProfile(), /*copiesYield=*/false,
                    /*cacheBytes=*/0);
    for (int request = 0; request < 40; ++request) {
      const auto &[decisions, hints] = pool[rng() % pool.size()];
      llvm::Expected<Evaluation> x = kept.evaluate(decisions, hints);
      llvm::Expected<Evaluation> y = fresh.evaluate(decisions, hints);
      ASSERT_EQ(static_cast<bool>(x), static_cast<bool>(y));
      if (!x) {
        EXPECT_EQ(llvm::toString(x.takeError()), llvm::toString(y.takeError()));
        continue;
      }
      expectSameEvaluation(*x, *y);
    }
    EXPECT_EQ(fresh.getCache().getHits(), 0u);
    hits += kept.getCache().getHits();
  }
  // The test exercises the cache.
  EXPECT_GT(hits, 100u);
}

TEST(EvaluationCacheTest, RecycledEvaluationsAreFromScratch) {
  const DeviceProfile device = testDeviceProfile();
  size_t trials = 0, offloads = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    const ActivationAnalysis &analysis = step.analysis;
    std::mt19937_64 &rng = step.rng;
    llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
    Evaluator evaluator(analysis, device, /*copiesYield=*/false,
                        /*cacheBytes=*/0);
    std::vector<Decision> decisions(acts.size(), Decision::Retain);
    std::vector<CopyHint> hints(acts.size());
    // Evaluations still held when the next is made, let go in any order:
    // the spares then come from any of them.
    std::deque<Evaluation> held;
    for (int trial = 0; trial < 60; ++trial) {
      changeSomeDecisions(analysis, rng, decisions, hints);
      llvm::Expected<Evaluation> got = evaluator.evaluate(decisions, hints);
      llvm::Expected<Placement> placed =
          placeDecisions(analysis, device, decisions, hints);
      ASSERT_EQ(static_cast<bool>(got), static_cast<bool>(placed));
      if (!placed) {
        EXPECT_EQ(llvm::toString(got.takeError()),
                  llvm::toString(placed.takeError()));
        decisions.assign(acts.size(), Decision::Retain);
        continue;
      }
      llvm::Expected<Schedule> schedule =
          buildSchedule(analysis, placed->decisions);
      ASSERT_TRUE(static_cast<bool>(schedule));
      SimOptions options;
      options.recordTimeline = false;
      llvm::Expected<SimResult> sim = simulate(*schedule, device, options);
      ASSERT_TRUE(static_cast<bool>(sim));
      Evaluation want;
      want.memory = walkMemory(*schedule);
      want.peakBytes = want.memory.peakBytes;
      want.hostPeakBytes = want.memory.hostPeakBytes;
      want.stepUs = sim->stepUs;
      want.exposedCopyUs = sim->exposedCopyUs;
      want.placement = std::make_shared<const Placement>(std::move(*placed));
      want.schedule = std::make_shared<const Schedule>(std::move(*schedule));
      expectSameEvaluation(*got, want);
      expectSamePlacement(*got->placement, *want.placement);
      EXPECT_EQ(got->memory.hostPeakBytes, want.memory.hostPeakBytes);
      ++trials;
      offloads += llvm::count(decisions, Decision::Offload) > 0;
      held.push_back(std::move(*got));
      if (held.size() > 3 || rng() % 2)
        held.erase(held.begin() + rng() % held.size());
    }
  }
  // The walk evaluates plans with offloads and copies.
  EXPECT_GT(trials, 3000u);
  EXPECT_GT(offloads, 1000u);
}

TEST(EvaluationCacheTest, AutoPlansAreTheSameWithoutTheCache) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomGraphOptions graphOptions;
    graphOptions.unitBytes = (seed % 2 ? 4 : 1) << 20;
    TrainingGraph g = randomLayeredGraph(seed, graphOptions);
    PlanOptions options;
    options.policy = Policy::None;
    llvm::Expected<Plan> none =
        planTrainingStep(g, testDeviceProfile(), options);
    ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
    options.policy = Policy::Auto;
    for (double fraction : {0.9, 0.6, 0.4, 0.25}) {
      options.budgetBytes =
          static_cast<int64_t>(fraction * static_cast<double>(none->peakBytes));
      options.evaluationCacheBytes = kManyEvaluations;
      llvm::Expected<Plan> x =
          planTrainingStep(g, testDeviceProfile(), options);
      options.evaluationCacheBytes = 0;
      llvm::Expected<Plan> y =
          planTrainingStep(g, testDeviceProfile(), options);
      ASSERT_TRUE(x && y);
      expectSamePlan(*x, *y);
    }
  }
}

class CorpusEvaluationCache : public lethe::testing::CorpusGraphTest {};

TEST_P(CorpusEvaluationCache, AutoPlansAreTheSameWithoutTheCache) {
  PlanOptions options;
  options.policy = Policy::None;
  llvm::Expected<Plan> none = planTrainingStep(*graph, *device, options);
  ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
  options.policy = Policy::Auto;
  for (double fraction : {0.7, 0.4}) {
    options.budgetBytes =
        static_cast<int64_t>(fraction * static_cast<double>(none->peakBytes));
    options.evaluationCacheBytes = kManyEvaluations;
    llvm::Expected<Plan> x = planTrainingStep(*graph, *device, options);
    options.evaluationCacheBytes = 0;
    llvm::Expected<Plan> y = planTrainingStep(*graph, *device, options);
    ASSERT_TRUE(x && y);
    expectSamePlan(*x, *y);
  }
}

// Graphs whose solves ask again for many evaluations (BERT at 40%: a fifth;
// Mixtral's MoE routing; a vision model), of a few seconds' test time.
INSTANTIATE_TEST_SUITE_P(Corpus, CorpusEvaluationCache,
                         ::testing::Values("graph_bert_base.json",
                                           "graph_mixtral_moe.json",
                                           "graph_resnet50.json"));

} // namespace

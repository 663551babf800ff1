//===- ExactSolverTest.cpp - The exact `auto` solver ----------------------===//
//
// Hand-computed optima on tiny graphs, determinism, and a brute-force
// cross-check: on random graphs with at most 8 activations, every plan is
// enumerated and measured with ExactModel::evaluate, and the MILP must find
// the least step time (or, when none fits, the least peak).
//
//===----------------------------------------------------------------------===//

#include "lethe/Planner/ExactModel.h"
#include "lethe/Planner/ExactSolver.h"
#include "lethe/Support/DeviceProfile.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace lethe;

namespace {

constexpr int64_t kMB = 1000 * 1000;

/// 50 GB/s each way: one MB copies in 20 us.
DeviceProfile testDevice() {
  DeviceProfile device;
  device.name = "test";
  device.d2hBytesPerSec = 50e9;
  device.h2dBytesPerSec = 50e9;
  device.hbmBytesPerSec = 3e12;
  return device;
}

PlanOptions optionsFor(int64_t budget) {
  PlanOptions options;
  options.budgetBytes = budget;
  options.minOffloadBytes = 1;
  options.solver = SolverKind::Exact;
  options.exactTimeLimitSec = 20;
  return options;
}

const ActivationDecision &decisionFor(const Plan &plan, ValueId value) {
  for (const ActivationDecision &d : plan.decisions)
    if (d.value == value)
      return d;
  ADD_FAILURE() << "no decision for value " << value;
  return plan.decisions.front();
}

/// a = n0(x); b = n1(a); c = n2(b); g3 = n3(c, b); g4 = n4(g3, a).
/// Unplanned peak: a, b, c, g3 = 4 MB at n3; step 50 us.
struct Chain {
  TrainingGraph graph;
  ValueId a, b, c;
};

Chain makeChain(llvm::StringRef firstKind, llvm::ArrayRef<double> times) {
  Chain chain;
  TrainingGraph &g = chain.graph;
  ValueId x = g.addInput(kMB, InputKind::Input);
  chain.a = g.getNode(g.addNode(firstKind, Phase::Fwd, times[0], {x}, {kMB}))
                .results[0];
  chain.b = g.getNode(g.addNode("aten.mm", Phase::Fwd, times[1], {chain.a},
                                {kMB}))
                .results[0];
  chain.c = g.getNode(g.addNode("aten.mm", Phase::Fwd, times[2], {chain.b},
                                {kMB}))
                .results[0];
  ValueId g3 = g.getNode(g.addNode("aten.mm", Phase::Bwd, times[3],
                                   {chain.c, chain.b}, {kMB}))
                   .results[0];
  ValueId g4 = g.getNode(g.addNode("aten.mm", Phase::Bwd, times[4],
                                   {g3, chain.a}, {kMB}))
                   .results[0];
  g.addOutput(g4);
  return chain;
}

TEST(ExactSolverTest, RetainsEverythingWhenTheBudgetAllows) {
  Chain chain = makeChain("aten.relu", {10, 10, 10, 10, 10});
  llvm::Expected<Plan> plan =
      solveExact(chain.graph, testDevice(), optionsFor(4 * kMB));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_TRUE(plan->feasible);
  EXPECT_EQ(plan->baselinePeakBytes, 4 * kMB);
  EXPECT_DOUBLE_EQ(plan->baselineStepUs, 50.0);
  ASSERT_EQ(plan->decisions.size(), 3u);
  for (const ActivationDecision &d : plan->decisions)
    EXPECT_EQ(d.decision, Decision::Retain);
  ASSERT_TRUE(plan->exactReport.has_value());
  EXPECT_TRUE(plan->exactReport->provenOptimal);
}

// At 3 MB, a must leave the device during n3. Recomputing it costs n0's
// 10 us; offloading it would stall n4 for its 20 us prefetch, which cannot
// start before n3 ends (its buffer does not fit beside n3's). Nothing else
// fits: b and c are read by n3 itself.
TEST(ExactSolverTest, RecomputesWhenCheaperThanOffload) {
  Chain chain = makeChain("aten.relu", {10, 10, 10, 10, 10});
  llvm::Expected<Plan> plan =
      solveExact(chain.graph, testDevice(), optionsFor(3 * kMB));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  EXPECT_EQ(decisionFor(*plan, chain.a).decision, Decision::Recompute);
  EXPECT_EQ(decisionFor(*plan, chain.a).recomputeNodes,
            (std::vector<NodeId>{0}));
  EXPECT_EQ(decisionFor(*plan, chain.a).firstBackwardUse, 4);
  EXPECT_EQ(decisionFor(*plan, chain.b).decision, Decision::Retain);
  EXPECT_EQ(decisionFor(*plan, chain.c).decision, Decision::Retain);
  EXPECT_DOUBLE_EQ(plan->stepUs, 60.0);
  EXPECT_EQ(plan->peakBytes, 3 * kMB);
  EXPECT_TRUE(plan->exactReport->provenOptimal);
}

// The same graph with a dropout producing a: it may not be recomputed, so a
// is offloaded and n4 waits 20 us for it.
TEST(ExactSolverTest, NeverRecomputesRandomOps) {
  Chain chain = makeChain("aten.native_dropout", {10, 10, 10, 10, 10});
  ExactModel model(chain.graph, testDevice(), optionsFor(3 * kMB));
  ASSERT_FALSE(model.activations()[model.getAnalysis().activationIndex(chain.a)].canRecompute);
  llvm::Expected<Plan> plan =
      solveExact(chain.graph, testDevice(), optionsFor(3 * kMB));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  const ActivationDecision &a = decisionFor(*plan, chain.a);
  EXPECT_EQ(a.decision, Decision::Offload);
  EXPECT_EQ(a.prefetchAfter, 3);
  EXPECT_DOUBLE_EQ(plan->stepUs, 70.0);
  for (const ActivationDecision &d : plan->decisions)
    EXPECT_TRUE(llvm::find(d.recomputeNodes, 0) == d.recomputeNodes.end());

  // The model itself refuses a plan that re-runs the dropout.
  std::vector<ActivationDecision> decisions = model.retainAll();
  decisions[model.getAnalysis().activationIndex(chain.a)].decision = Decision::Recompute;
  ExactModel::Evaluation eval = model.evaluate(decisions);
  EXPECT_FALSE(eval.valid);
  EXPECT_NE(eval.error.find("cannot be recomputed"), std::string::npos);
}

// With long forward and backward nodes, a's copies hide behind compute:
// D2H (20 us) ends during n1; the prefetch issued after n3 ends during
// n4 (500 us). The plan costs nothing over the unplanned step, whereas
// recomputing a would cost 10 us.
TEST(ExactSolverTest, OffloadHidesBehindCompute) {
  Chain chain;
  TrainingGraph &g = chain.graph;
  ValueId x = g.addInput(kMB, InputKind::Input);
  chain.a = g.getNode(g.addNode("aten.relu", Phase::Fwd, 10, {x}, {kMB}))
                .results[0];
  chain.b =
      g.getNode(g.addNode("aten.mm", Phase::Fwd, 100, {chain.a}, {kMB}))
          .results[0];
  chain.c =
      g.getNode(g.addNode("aten.mm", Phase::Fwd, 100, {chain.b}, {kMB}))
          .results[0];
  ValueId g3 = g.getNode(g.addNode("aten.mm", Phase::Bwd, 10,
                                   {chain.c, chain.b}, {kMB}))
                   .results[0];
  ValueId g4 =
      g.getNode(g.addNode("aten.mm", Phase::Bwd, 500, {g3}, {kMB})).results[0];
  ValueId g5 = g.getNode(g.addNode("aten.mm", Phase::Bwd, 10, {g4, chain.a},
                                   {kMB}))
                   .results[0];
  g.addOutput(g5);

  llvm::Expected<Plan> plan = solveExact(g, testDevice(), optionsFor(3 * kMB));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  EXPECT_EQ(plan->baselinePeakBytes, 4 * kMB);
  const ActivationDecision &a = decisionFor(*plan, chain.a);
  EXPECT_EQ(a.decision, Decision::Offload);
  EXPECT_EQ(a.prefetchAfter, 3);
  EXPECT_EQ(a.firstBackwardUse, 5);
  EXPECT_DOUBLE_EQ(plan->stepUs, plan->baselineStepUs);
  EXPECT_DOUBLE_EQ(plan->stepUs, 730.0);
  EXPECT_LE(plan->peakBytes, 3 * kMB);
}

// t = n0(x) is a forward temporary (a checkpoint: see below); a = n1(t). At 3 MB, a cannot stay
// through n4 (b, c, g4 fill it), and offload is off: a is recomputed
// before n5, which re-runs n1 and, to re-create t, n0. The segment holds t
// and a at once beside g4: 3 MB.
TEST(ExactSolverTest, RecomputeReRunsTheTemporariesItNeeds) {
  TrainingGraph g;
  ValueId x = g.addInput(kMB, InputKind::Input);
  ValueId t = g.getNode(g.addNode("aten.relu", Phase::Fwd, 7, {x}, {kMB}))
                  .results[0];
  ValueId a = g.getNode(g.addNode("aten.mm", Phase::Fwd, 11, {t}, {kMB}))
                  .results[0];
  ValueId b = g.getNode(g.addNode("aten.mm", Phase::Fwd, 10, {a}, {kMB}))
                  .results[0];
  ValueId c = g.getNode(g.addNode("aten.mm", Phase::Fwd, 10, {b}, {kMB}))
                  .results[0];
  ValueId g4 = g.getNode(g.addNode("aten.mm", Phase::Bwd, 10, {c, b}, {kMB}))
                   .results[0];
  ValueId g5 = g.getNode(g.addNode("aten.mm", Phase::Bwd, 10, {g4, a}, {1}))
                   .results[0];
  g.addOutput(g5);
  PlanOptions options = optionsFor(3 * kMB);
  options.minOffloadBytes = 100 * kMB;
  llvm::Expected<Plan> plan = solveExact(g, testDevice(), options);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  const ActivationDecision &d = decisionFor(*plan, a);
  EXPECT_EQ(d.decision, Decision::Recompute);
  EXPECT_EQ(d.firstBackwardUse, 5);
  // The repeated mm ops are layers (found from structure), so t, the input
  // of the first, is a checkpoint: a's chain stops at it and t is
  // recomputed at the same point, the two chains running as one (n0, n1).
  const ActivationDecision &dt = decisionFor(*plan, t);
  EXPECT_EQ(dt.decision, Decision::Recompute);
  EXPECT_EQ(dt.firstBackwardUse, 5);
  std::vector<NodeId> chain = d.recomputeNodes;
  llvm::append_range(chain, dt.recomputeNodes);
  llvm::sort(chain);
  EXPECT_EQ(chain, (std::vector<NodeId>{0, 1}));
  EXPECT_EQ(decisionFor(*plan, b).decision, Decision::Retain);
  EXPECT_DOUBLE_EQ(plan->stepUs, plan->baselineStepUs + 18);
  EXPECT_EQ(plan->peakBytes, 3 * kMB);

  // A budget a byte smaller does not fit the segment.
  options.budgetBytes = 3 * kMB - 1;
  llvm::Expected<Plan> tight = solveExact(g, testDevice(), options);
  ASSERT_TRUE(bool(tight)) << llvm::toString(tight.takeError());
  EXPECT_FALSE(tight->feasible);
  EXPECT_EQ(tight->leastFeasibleBudget, 3 * kMB);
}

// A starting plan (the fast solver's, in planTrainingStep) is only a
// starting point: a slower one that fits does not stop the search, one that
// does not fit or names no activation is ignored.
TEST(ExactSolverTest, StartsFromAGivenPlan) {
  Chain chain = makeChain("aten.relu", {10, 10, 10, 10, 10});
  ExactModel model(chain.graph, testDevice(), optionsFor(3 * kMB));
  std::vector<ActivationDecision> offloadA = model.retainAll();
  int a = model.getAnalysis().activationIndex(chain.a);
  offloadA[a].decision = Decision::Offload;
  offloadA[a].prefetchAfter = 3;
  std::vector<ActivationDecision> retainAll = model.retainAll();
  std::vector<ActivationDecision> notAnActivation(1);
  notAnActivation[0].value = 0;
  for (llvm::ArrayRef<ActivationDecision> start :
       {llvm::ArrayRef<ActivationDecision>(offloadA),
        llvm::ArrayRef<ActivationDecision>(retainAll),
        llvm::ArrayRef<ActivationDecision>(notAnActivation)}) {
    llvm::Expected<Plan> plan =
        solveExact(chain.graph, testDevice(), optionsFor(3 * kMB), start);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    ASSERT_TRUE(plan->feasible);
    EXPECT_EQ(decisionFor(*plan, chain.a).decision, Decision::Recompute);
    EXPECT_DOUBLE_EQ(plan->stepUs, 60.0);
  }
}

// n4 reads a, g3 and writes g4: 3 MB whatever the plan.
TEST(ExactSolverTest, InfeasibleBudgetReportsTheLeastFeasibleBudget) {
  Chain chain = makeChain("aten.relu", {10, 10, 10, 10, 10});
  llvm::Expected<Plan> plan =
      solveExact(chain.graph, testDevice(), optionsFor(5 * kMB / 2));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_FALSE(plan->feasible);
  ASSERT_TRUE(plan->leastFeasibleBudget.has_value());
  EXPECT_EQ(*plan->leastFeasibleBudget, 3 * kMB);
  EXPECT_TRUE(plan->exactReport->provenOptimal);

  // The least feasible budget is feasible.
  llvm::Expected<Plan> atLeast = solveExact(
      chain.graph, testDevice(), optionsFor(*plan->leastFeasibleBudget));
  ASSERT_TRUE(bool(atLeast)) << llvm::toString(atLeast.takeError());
  EXPECT_TRUE(atLeast->feasible);
}

TEST(ExactSolverTest, HostBudgetLimitsOffload) {
  Chain chain = makeChain("aten.native_dropout", {10, 10, 10, 10, 10});
  PlanOptions options = optionsFor(3 * kMB);
  options.hostBudgetBytes = kMB / 2;
  llvm::Expected<Plan> plan = solveExact(chain.graph, testDevice(), options);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_FALSE(plan->feasible);
  EXPECT_EQ(plan->leastFeasibleBudget, 4 * kMB);
}

TEST(ExactSolverTest, RejectsForwardNodesAfterTheBackwardPart) {
  TrainingGraph g;
  ValueId x = g.addInput(kMB, InputKind::Input);
  ValueId a = g.getNode(g.addNode("aten.relu", Phase::Fwd, 1, {x}, {kMB}))
                  .results[0];
  ValueId b = g.getNode(g.addNode("aten.mm", Phase::Bwd, 1, {a}, {kMB}))
                  .results[0];
  g.addNode("aten.mm", Phase::Fwd, 1, {b}, {kMB});
  llvm::Expected<Plan> plan = solveExact(g, testDevice(), optionsFor(kMB));
  ASSERT_FALSE(bool(plan));
  std::string message = llvm::toString(plan.takeError());
  // A graph built without IR has no node ids: nodes by position.
  EXPECT_NE(message.find("forward node #2 (aten.mm) comes after the first "
                         "backward node #1 (aten.mm)"),
            std::string::npos)
      << message;
}

//===----------------------------------------------------------------------===//
// Random graphs
//===----------------------------------------------------------------------===//

/// A random training step: forward nodes over earlier values (with views,
/// multi-result nodes, dropouts), then one backward node per forward node
/// in reverse, reading the gradient and some forward values.
TrainingGraph randomGraph(std::mt19937 &rng, int forwardNodes) {
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  TrainingGraph g;
  ValueId x = g.addInput(kMB, InputKind::Input);
  ValueId w = g.addInput(kMB, InputKind::Param);
  std::vector<ValueId> forward{x};
  for (int i = 0; i < forwardNodes; ++i) {
    int kindRoll = pick(0, 9);
    std::vector<ValueId> operands{forward[pick(
        std::max(0, static_cast<int>(forward.size()) - 3),
        static_cast<int>(forward.size()) - 1)]};
    if (kindRoll == 0) {
      NodeId n = g.addNode("aten.view", Phase::Fwd, pick(0, 1), operands,
                           {0}, {0});
      forward.push_back(g.getNode(n).results[0]);
      continue;
    }
    if (pick(0, 2) == 0)
      operands.push_back(forward[pick(0, static_cast<int>(forward.size()) - 1)]);
    if (pick(0, 2) == 0)
      operands.push_back(w);
    std::vector<int64_t> bytes{pick(1, 4) * kMB};
    if (pick(0, 4) == 0)
      bytes.push_back(pick(1, 2) * kMB / 2);
    llvm::StringRef kind = kindRoll == 1 ? "aten.native_dropout" : "aten.mm";
    NodeId n = g.addNode(kind, Phase::Fwd, pick(5, 120), operands, bytes);
    llvm::append_range(forward, g.getNode(n).results);
  }
  ValueId grad = g.addInput(kMB, InputKind::Tangent);
  for (int i = 0; i < forwardNodes; ++i) {
    std::vector<ValueId> operands{grad};
    for (int k = pick(1, 2); k > 0; --k)
      operands.push_back(forward[pick(1, static_cast<int>(forward.size()) - 1)]);
    NodeId n = g.addNode("aten.mm_backward", Phase::Bwd, pick(5, 120),
                         operands, {pick(1, 3) * kMB});
    grad = g.getNode(n).results[0];
  }
  g.addOutput(grad);
  return g;
}

/// Peak, host bytes and step time of every valid plan of a model.
struct PlanPoint {
  int64_t peakBytes, hostBytes;
  double stepUs;
};

/// Every decision vector, and for offloads every prefetch placement,
/// measured by the model.
std::vector<PlanPoint> enumeratePlans(const ExactModel &model) {
  std::vector<PlanPoint> plans;
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  std::vector<ActivationDecision> decisions = model.retainAll();
  std::vector<int> offloaded;
  std::function<void(size_t)> place = [&](size_t t) {
    if (t == offloaded.size()) {
      ExactModel::Evaluation eval = model.evaluate(decisions);
      if (eval.valid)
        plans.push_back({eval.peakBytes, eval.hostBytes, eval.stepUs});
      return;
    }
    int a = offloaded[t];
    for (NodeId j = model.earliestPrefetchAfter();
         j < acts[a].firstBackwardUse; ++j) {
      decisions[a].prefetchAfter = j;
      place(t + 1);
    }
  };
  std::function<void(size_t)> choose = [&](size_t a) {
    if (a == acts.size()) {
      offloaded.clear();
      for (size_t q = 0; q < acts.size(); ++q)
        if (decisions[q].decision == Decision::Offload)
          offloaded.push_back(q);
      place(0);
      return;
    }
    decisions[a].decision = Decision::Retain;
    choose(a + 1);
    if (acts[a].canRecompute) {
      decisions[a].decision = Decision::Recompute;
      choose(a + 1);
    }
    if (acts[a].canOffload) {
      decisions[a].decision = Decision::Offload;
      choose(a + 1);
    }
    decisions[a].decision = Decision::Retain;
  };
  choose(0);
  return plans;
}

TEST(ExactSolverTest, MatchesBruteForceOnRandomGraphs) {
  std::mt19937 rng(20240611);
  int checked = 0, infeasible = 0, recomputes = 0, offloads = 0, mixed = 0;
  for (int trial = 0; checked < 40 && trial < 400; ++trial) {
    TrainingGraph graph = randomGraph(rng, 3 + trial % 4);
    PlanOptions options = optionsFor(std::numeric_limits<int64_t>::max());
    // Some activations are too small to offload.
    options.minOffloadBytes = 2 * kMB;
    if (trial % 5 == 0)
      options.hostBudgetBytes = 3 * kMB;
    ExactModel unbounded(graph, testDevice(), options);
    size_t numActs = unbounded.activations().size();
    if (numActs < 2 || numActs > 8)
      continue;
    std::vector<PlanPoint> plans = enumeratePlans(unbounded);
    int64_t baselinePeak =
        unbounded.evaluate(unbounded.retainAll()).peakBytes;
    int64_t leastPeak = std::numeric_limits<int64_t>::max();
    for (const PlanPoint &p : plans)
      if (p.hostBytes <= options.hostBudgetBytes)
        leastPeak = std::min(leastPeak, p.peakBytes);
    if (leastPeak >= baselinePeak)
      continue;
    // Mostly budgets between the least peak and the unplanned one; one in
    // eight below the least peak.
    options.budgetBytes =
        trial % 8 == 0
            ? leastPeak - kMB / 10
            : std::uniform_int_distribution<int64_t>(leastPeak,
                                                     baselinePeak - 1)(rng);
    bool anyFits = false;
    double bestStepUs = 0.0;
    for (const PlanPoint &p : plans)
      if (p.peakBytes <= options.budgetBytes &&
          p.hostBytes <= options.hostBudgetBytes &&
          (!anyFits || p.stepUs < bestStepUs)) {
        anyFits = true;
        bestStepUs = p.stepUs;
      }

    llvm::Expected<Plan> plan = solveExact(graph, testDevice(), options);
    ASSERT_TRUE(bool(plan)) << "trial " << trial << ": "
                            << llvm::toString(plan.takeError());
    ASSERT_TRUE(plan->exactReport->provenOptimal) << "trial " << trial;
    ExactModel model(graph, testDevice(), options);
    ExactModel::Evaluation eval = model.evaluate(plan->decisions);
    ASSERT_TRUE(eval.valid) << "trial " << trial << ": " << eval.error;
    if (anyFits) {
      ASSERT_TRUE(plan->feasible) << "trial " << trial;
      EXPECT_TRUE(eval.fitsBudget) << "trial " << trial;
      EXPECT_NEAR(plan->stepUs, bestStepUs, 1e-6 * bestStepUs)
          << "trial " << trial << " (" << plans.size() << " plans)";
      EXPECT_DOUBLE_EQ(eval.stepUs, plan->stepUs);
      bool anyRecompute = false, anyOffload = false;
      for (const ActivationDecision &d : plan->decisions) {
        anyRecompute |= d.decision == Decision::Recompute;
        anyOffload |= d.decision == Decision::Offload;
      }
      recomputes += anyRecompute;
      offloads += anyOffload;
      mixed += anyRecompute && anyOffload;
    } else {
      ++infeasible;
      ASSERT_FALSE(plan->feasible) << "trial " << trial;
      EXPECT_EQ(plan->leastFeasibleBudget, leastPeak) << "trial " << trial;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 40);
  // The sample exercises every kind of answer.
  EXPECT_GT(infeasible, 0);
  EXPECT_GT(recomputes, 0);
  EXPECT_GT(offloads, 0);
  EXPECT_GT(mixed, 0);
}

TEST(ExactSolverTest, Deterministic) {
  std::mt19937 rng(7);
  TrainingGraph graph = randomGraph(rng, 14);
  PlanOptions options = optionsFor(0);
  ExactModel model(graph, testDevice(), options);
  options.budgetBytes = model.evaluate(model.retainAll()).peakBytes * 7 / 10;
  llvm::Expected<Plan> first = solveExact(graph, testDevice(), options);
  llvm::Expected<Plan> second = solveExact(graph, testDevice(), options);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  ASSERT_TRUE(bool(second)) << llvm::toString(second.takeError());
  ASSERT_FALSE(first->exactReport->hitTimeLimit);
  ASSERT_EQ(first->decisions.size(), second->decisions.size());
  for (size_t i = 0; i < first->decisions.size(); ++i) {
    EXPECT_EQ(first->decisions[i].decision, second->decisions[i].decision);
    EXPECT_EQ(first->decisions[i].prefetchAfter,
              second->decisions[i].prefetchAfter);
    EXPECT_EQ(first->decisions[i].recomputeNodes,
              second->decisions[i].recomputeNodes);
  }
  EXPECT_EQ(first->stepUs, second->stepUs);
  EXPECT_EQ(first->peakBytes, second->peakBytes);
}

} // namespace

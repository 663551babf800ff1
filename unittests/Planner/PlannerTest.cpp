//===- PlannerTest.cpp - Planner semantics on hand-built graphs -----------===//

#include "RandomGraph.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Layers.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"

#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

using namespace lethe;
using lethe::testing::lifetimePeak;
using lethe::testing::testDeviceProfile;

namespace {

constexpr int64_t MiB = 1 << 20;

/// A small transformer-like step: `layers` blocks of
///   u = mm(h, w) [4 MiB]; v = gelu(u) [4 MiB]; h' = add(h, mm(v, w2))
/// and the backward in reverse, reading u, v and h.
struct Tower {
  TrainingGraph graph;
  std::vector<ValueId> u, v, h;
  std::vector<NodeId> bwdFirst;
};

Tower makeTower(int layers, bool scopes = true) {
  Tower t;
  TrainingGraph &g = t.graph;
  ValueId x = g.addInput(MiB, InputKind::Input);
  ValueId seed = g.addInput(4, InputKind::Tangent);
  std::vector<ValueId> w1, w2;
  ValueId h = x;
  for (int l = 0; l < layers; ++l) {
    std::string scope =
        scopes ? llvm::formatv("model.h.{0}", l).str() : std::string();
    w1.push_back(g.addInput(MiB, InputKind::Param));
    w2.push_back(g.addInput(MiB, InputKind::Param));
    t.h.push_back(h);
    NodeId mm1 = g.addNode("aten.mm.default", Phase::Fwd, 100, {h, w1[l]},
                           {4 * MiB}, {}, 0, scope);
    ValueId u = g.getNode(mm1).results[0];
    NodeId gelu = g.addNode("aten.gelu.default", Phase::Fwd, 10, {u},
                            {4 * MiB}, {}, 0, scope);
    ValueId v = g.getNode(gelu).results[0];
    NodeId mm2 = g.addNode("aten.mm.default", Phase::Fwd, 100, {v, w2[l]},
                           {MiB}, {}, 0, scope);
    NodeId add = g.addNode("aten.add.Tensor", Phase::Fwd, 5,
                           {h, g.getNode(mm2).results[0]}, {MiB}, {}, 0,
                           scope);
    t.u.push_back(u);
    t.v.push_back(v);
    h = g.getNode(add).results[0];
  }
  NodeId loss = g.addNode("aten.sum.default", Phase::Fwd, 5, {h}, {4});
  (void)loss;
  ValueId gh = seed;
  t.bwdFirst.resize(layers);
  for (int l = layers - 1; l >= 0; --l) {
    // d mm2: needs v; d gelu: needs u; d mm1: needs h.
    NodeId d2 = g.addNode("aten.mm_backward", Phase::Bwd, 200,
                          {gh, t.v[l], w2[l]}, {4 * MiB, MiB});
    t.bwdFirst[l] = d2;
    NodeId dg = g.addNode("aten.gelu_backward", Phase::Bwd, 20,
                          {g.getNode(d2).results[0], t.u[l]}, {4 * MiB});
    NodeId d1 = g.addNode("aten.mm_backward", Phase::Bwd, 200,
                          {g.getNode(dg).results[0], t.h[l], w1[l]},
                          {MiB, MiB});
    NodeId acc = g.addNode("aten.add.Tensor", Phase::Bwd, 5,
                           {gh, g.getNode(d1).results[0]}, {MiB});
    g.addOutput(g.getNode(d2).results[1]);
    g.addOutput(g.getNode(d1).results[1]);
    gh = g.getNode(acc).results[0];
  }
  return t;
}

Plan planOrDie(const TrainingGraph &g, const PlanOptions &options) {
  llvm::Expected<Plan> plan = planTrainingStep(g, testDeviceProfile(), options);
  EXPECT_TRUE(static_cast<bool>(plan));
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return Plan();
  }
  return std::move(*plan);
}

const ActivationDecision *decisionFor(const Plan &plan, ValueId value) {
  for (const ActivationDecision &d : plan.decisions)
    if (d.value == value)
      return &d;
  return nullptr;
}

TEST(ActivationAnalysisTest, FindsActivationsGapsAndChains) {
  Tower t = makeTower(2);
  PlanOptions options;
  ActivationAnalysis analysis(t.graph, options);
  // u, v of each layer, h of layer 1 (layer 0's h is the graph input).
  EXPECT_EQ(analysis.getActivations().size(), 5u);
  int32_t a = analysis.activationIndex(t.v[0]);
  ASSERT_GE(a, 0);
  const ActivationInfo &v0 = analysis.getActivations()[a];
  EXPECT_EQ(v0.bytes, 4 * MiB);
  EXPECT_EQ(v0.firstBackwardUse, t.bwdFirst[0]);
  // Recomputing gelu(u) re-runs gelu alone: u is an activation itself.
  EXPECT_TRUE(v0.recomputable);
  EXPECT_EQ(v0.recomputeNodes.size(), 1u);
  EXPECT_EQ(v0.recomputeInputs, (std::vector<ValueId>{t.u[0]}));
  EXPECT_DOUBLE_EQ(v0.recomputeUs, 10);
  EXPECT_TRUE(v0.offloadable);
  EXPECT_EQ(analysis.activationIndex(t.h[0]), -1); // a graph input
}

TEST(PlannerTest, NonePeakIsTheLifetimePeak) {
  for (int layers : {1, 2, 5}) {
    Tower t = makeTower(layers);
    PlanOptions options;
    options.policy = Policy::None;
    Plan plan = planOrDie(t.graph, options);
    EXPECT_EQ(plan.peakBytes, lifetimePeak(t.graph));
    EXPECT_EQ(plan.baselinePeakBytes, plan.peakBytes);
    EXPECT_DOUBLE_EQ(plan.stepUs, plan.baselineStepUs);
    EXPECT_TRUE(plan.feasible);
    for (const ActivationDecision &d : plan.decisions)
      EXPECT_EQ(d.decision, Decision::Retain);
  }
}

TEST(PlannerTest, FullRecomputesInsideLayersAndKeepsBoundaries) {
  Tower t = makeTower(3);
  PlanOptions options;
  options.policy = Policy::Full;
  Plan plan = planOrDie(t.graph, options);
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(decisionFor(plan, t.u[l])->decision, Decision::Recompute);
    EXPECT_EQ(decisionFor(plan, t.v[l])->decision, Decision::Recompute);
  }
  // Layer inputs (outputs of the previous layer) stay.
  EXPECT_EQ(decisionFor(plan, t.h[1])->decision, Decision::Retain);
  EXPECT_NE(decisionFor(plan, t.h[1])->reason.find("layer boundary"),
            std::string::npos);
  // The chains of u and v are restored at the same point and share mm1:
  // v's chain reads u, so both come back before v's first backward use.
  const ActivationDecision *u0 = decisionFor(plan, t.u[0]);
  const ActivationDecision *v0 = decisionFor(plan, t.v[0]);
  EXPECT_EQ(u0->firstBackwardUse, v0->firstBackwardUse);
  EXPECT_EQ(v0->firstBackwardUse, t.bwdFirst[0]);
  EXPECT_LT(plan.peakBytes, plan.baselinePeakBytes);
  // Every layer re-runs mm1 + gelu once: 110 us each.
  EXPECT_NEAR(plan.stepUs - plan.baselineStepUs, 3 * 110.0, 1e-6);
}

TEST(PlannerTest, EveryNCheckpointsEveryNthLayer) {
  Tower t = makeTower(4);
  PlanOptions options;
  options.policy = Policy::EveryN;
  options.everyN = 2;
  Plan plan = planOrDie(t.graph, options);
  EXPECT_EQ(decisionFor(plan, t.v[0])->decision, Decision::Recompute);
  EXPECT_EQ(decisionFor(plan, t.v[1])->decision, Decision::Retain);
  EXPECT_EQ(decisionFor(plan, t.v[2])->decision, Decision::Recompute);
  EXPECT_EQ(decisionFor(plan, t.v[3])->decision, Decision::Retain);
}

TEST(PlannerTest, SelectiveOpKeepsMatmulsAndCanOffloadThem) {
  Tower t = makeTower(3);
  PlanOptions options;
  options.policy = Policy::SelectiveOp;
  Plan plan = planOrDie(t.graph, options);
  EXPECT_EQ(decisionFor(plan, t.u[1])->decision, Decision::Retain);
  EXPECT_EQ(decisionFor(plan, t.v[1])->decision, Decision::Recompute);
  options.offloadKept = true;
  Plan offloaded = planOrDie(t.graph, options);
  const ActivationDecision *u1 = decisionFor(offloaded, t.u[1]);
  EXPECT_EQ(u1->decision, Decision::Offload);
  // v's chain reads u, so u is prefetched before v is recomputed.
  EXPECT_EQ(u1->firstBackwardUse, decisionFor(offloaded, t.v[1])->firstBackwardUse);
  EXPECT_LE(u1->releaseAfter, u1->prefetchAfter);
}

TEST(PlannerTest, OffloadAllRespectsTheSizeThreshold) {
  Tower t = makeTower(2);
  PlanOptions options;
  options.policy = Policy::OffloadAll;
  options.minOffloadBytes = 2 * MiB;
  Plan plan = planOrDie(t.graph, options);
  EXPECT_EQ(decisionFor(plan, t.u[0])->decision, Decision::Offload);
  // h is 1 MiB: below the threshold.
  EXPECT_EQ(decisionFor(plan, t.h[1])->decision, Decision::Retain);
  EXPECT_NE(decisionFor(plan, t.h[1])->reason.find("threshold"),
            std::string::npos);
}

TEST(PlannerTest, NeverRecomputesRngCollectivesOrMutatingOps) {
  TrainingGraph g;
  ValueId x = g.addInput(MiB, InputKind::Input);
  ValueId w = g.addInput(MiB, InputKind::Param);
  ValueId seed = g.addInput(4, InputKind::Tangent);
  NodeId drop = g.addNode("aten.native_dropout.default", Phase::Fwd, 5, {x},
                          {MiB, MiB / 2});
  ValueId d = g.getNode(drop).results[0];
  ValueId mask = g.getNode(drop).results[1];
  NodeId gather = g.addNode("_c10d_functional.all_gather_into_tensor",
                            Phase::Fwd, 50, {w}, {2 * MiB});
  ValueId gw = g.getNode(gather).results[0];
  NodeId after = g.addNode("aten.gelu.default", Phase::Fwd, 5, {d}, {MiB});
  ValueId e = g.getNode(after).results[0];
  NodeId tmp = g.addNode("aten.mul.Tensor", Phase::Fwd, 5, {x}, {MiB});
  NodeId inplace = g.addNode("aten.relu_.default", Phase::Fwd, 5,
                             {g.getNode(tmp).results[0]}, {0}, {0});
  ValueId r = g.getNode(inplace).results[0];
  g.addNode("aten.bwd", Phase::Bwd, 5, {seed, mask, gw, e, r}, {MiB});
  PlanOptions options;
  ActivationAnalysis analysis(g, options);
  auto info = [&](ValueId v) {
    return analysis.getActivations()[analysis.activationIndex(v)];
  };
  EXPECT_FALSE(info(mask).recomputable);
  EXPECT_NE(info(mask).notRecomputableReason.find("RNG"), std::string::npos);
  EXPECT_FALSE(info(gw).recomputable);
  EXPECT_NE(info(gw).notRecomputableReason.find("collective"),
            std::string::npos);
  // gelu(d) needs the dropout output, which only an RNG op can re-create.
  EXPECT_FALSE(info(e).recomputable);
  // The storage of r is written in place.
  EXPECT_FALSE(info(r).recomputable);
  EXPECT_EQ(info(r).contentReadyAfter, inplace);
  // With RNG replay, dropout may be re-run.
  options.replayRng = true;
  ActivationAnalysis replay(g, options);
  EXPECT_TRUE(
      replay.getActivations()[replay.activationIndex(e)].recomputable);
}

TEST(PlannerTest, ViewsAreRederivedNotOffloaded) {
  TrainingGraph g;
  ValueId x = g.addInput(MiB, InputKind::Input);
  ValueId seed = g.addInput(4, InputKind::Tangent);
  NodeId mm = g.addNode("aten.mm.default", Phase::Fwd, 50, {x}, {4 * MiB});
  ValueId y = g.getNode(mm).results[0];
  NodeId view = g.addNode("aten.view.default", Phase::Fwd, 1, {y}, {0}, {0});
  ValueId yv = g.getNode(view).results[0];
  for (int i = 0; i < 20; ++i)
    g.addNode("aten.filler", Phase::Fwd, 100, {x}, {MiB});
  g.addNode("aten.bwd", Phase::Bwd, 5, {seed, yv}, {MiB});
  PlanOptions options;
  ActivationAnalysis analysis(g, options);
  // One activation: the storage of y, read through the view.
  ASSERT_EQ(analysis.getActivations().size(), 1u);
  const ActivationInfo &act = analysis.getActivations()[0];
  EXPECT_EQ(act.storage, y);
  EXPECT_EQ(act.rederiveNodes, (std::vector<NodeId>{view}));
  std::vector<Decision> offload = {Decision::Offload};
  Evaluator evaluator(analysis, testDeviceProfile());
  llvm::Expected<Evaluation> eval = evaluator.evaluate(offload);
  ASSERT_TRUE(static_cast<bool>(eval)) << llvm::toString(eval.takeError());
  EXPECT_FALSE(static_cast<bool>(eval->schedule->verify()));
  // The view is re-run after the prefetch, before the backward node.
  bool rerun = false;
  for (const ScheduleOp &op : eval->schedule->ops)
    rerun |= op.kind == ScheduleOpKind::Recompute && op.node == view;
  EXPECT_TRUE(rerun);
}

TEST(PlannerTest, ScheduleBuilderRejectsBadPlacements) {
  Tower t = makeTower(2);
  PlanOptions options;
  ActivationAnalysis analysis(t.graph, options);
  std::vector<Decision> decisions(analysis.getActivations().size(),
                                  Decision::Retain);
  int32_t a = analysis.activationIndex(t.u[0]);
  decisions[a] = Decision::Offload;
  llvm::Expected<Placement> placed =
      placeDecisions(analysis, testDeviceProfile(), decisions);
  ASSERT_TRUE(static_cast<bool>(placed));
  std::vector<ActivationDecision> bad = placed->decisions;
  bad[a].releaseAfter = analysis.getActivations()[a].lastForwardUse - 1;
  llvm::Expected<Schedule> s1 = buildSchedule(analysis, bad);
  ASSERT_FALSE(static_cast<bool>(s1));
  EXPECT_NE(llvm::toString(s1.takeError()).find("released after node"),
            std::string::npos);
  bad = placed->decisions;
  bad[a].prefetchAfter = bad[a].releaseAfter - 1;
  llvm::Expected<Schedule> s2 = buildSchedule(analysis, bad);
  ASSERT_FALSE(static_cast<bool>(s2));
  EXPECT_NE(llvm::toString(s2.takeError()).find("prefetched after node"),
            std::string::npos);
  // Recomputing v without restoring u first: u is dropped when v's chain
  // reads it (placement would have moved u's restore point).
  std::vector<Decision> both(decisions.size(), Decision::Retain);
  both[a] = Decision::Recompute;
  int32_t v = analysis.activationIndex(t.v[0]);
  both[v] = Decision::Recompute;
  placed = placeDecisions(analysis, testDeviceProfile(), both);
  ASSERT_TRUE(static_cast<bool>(placed));
  bad = placed->decisions;
  bad[a].firstBackwardUse = analysis.getActivations()[a].firstBackwardUse;
  llvm::Expected<Schedule> s3 = buildSchedule(analysis, bad);
  ASSERT_FALSE(static_cast<bool>(s3));
  EXPECT_NE(llvm::toString(s3.takeError()).find("while it is dropped"),
            std::string::npos);
}

TEST(PlannerTest, PrefetchIsHiddenWhenTheWindowAllows) {
  // 20 layers: layer 0's activations have a long gap, so offloading them
  // costs no time.
  Tower t = makeTower(20);
  PlanOptions options;
  ActivationAnalysis analysis(t.graph, options);
  std::vector<Decision> decisions(analysis.getActivations().size(),
                                  Decision::Retain);
  decisions[analysis.activationIndex(t.u[0])] = Decision::Offload;
  Evaluator evaluator(analysis, testDeviceProfile());
  llvm::Expected<Evaluation> base = evaluator.evaluate(
      std::vector<Decision>(decisions.size(), Decision::Retain));
  llvm::Expected<Evaluation> eval = evaluator.evaluate(decisions);
  ASSERT_TRUE(static_cast<bool>(base)) << llvm::toString(base.takeError());
  ASSERT_TRUE(static_cast<bool>(eval)) << llvm::toString(eval.takeError());
  EXPECT_DOUBLE_EQ(eval->stepUs, base->stepUs);
  EXPECT_EQ(eval->exposedCopyUs, 0.0);
  EXPECT_LT(eval->peakBytes, base->peakBytes);
  // The prefetch is issued late, not right after the release.
  const ActivationDecision &d =
      eval->placement->decisions[analysis.activationIndex(t.u[0])];
  EXPECT_GT(d.prefetchAfter, d.releaseAfter + 20);
}

TEST(LayersTest, FromScopesAndFromStructure) {
  Tower scoped = makeTower(4, /*scopes=*/true);
  LayerInfo a = findLayers(scoped.graph);
  EXPECT_TRUE(a.fromScopes);
  EXPECT_EQ(a.numLayers(), 4u);
  EXPECT_EQ(a.names[2], "model.h.2");
  Tower bare = makeTower(4, /*scopes=*/false);
  LayerInfo b = findLayers(bare.graph);
  EXPECT_FALSE(b.fromScopes);
  ASSERT_GE(b.numLayers(), 3u);
  // Each structural layer is a whole block of 4 nodes.
  std::vector<int> count(b.numLayers(), 0);
  for (int32_t layer : b.layerOf)
    if (layer >= 0)
      ++count[layer];
  for (int c : count)
    EXPECT_EQ(c, 4);
}

TEST(PlannerTest, InfeasibleBudgetStatesTheLeastBudget) {
  Tower t = makeTower(3);
  PlanOptions options;
  options.policy = Policy::Auto;
  options.budgetBytes = 1024;
  Plan plan = planOrDie(t.graph, options);
  EXPECT_FALSE(plan.feasible);
  ASSERT_TRUE(plan.leastFeasibleBudget.has_value());
  EXPECT_GT(*plan.leastFeasibleBudget, 1024);
  std::string message = infeasibleMessage(plan);
  EXPECT_NE(message.find("least budget"), std::string::npos) << message;
  // The stated budget is met.
  options.budgetBytes = *plan.leastFeasibleBudget;
  Plan ok = planOrDie(t.graph, options);
  EXPECT_TRUE(ok.feasible);
  EXPECT_LE(ok.peakBytes, options.budgetBytes);
}

} // namespace

//===- PlannerPropertyTest.cpp - Planner properties on random graphs -------===//
//
// Hundreds of seeded random layered graphs (RandomGraph.h), every policy,
// budgets from 30% to 95% of the unplanned peak:
// - a plan called feasible fits: its simulated peak is <= the budget, and
//   re-simulating it from its decisions gives the same numbers;
// - the peak never rises as the budget falls, and once a budget is
//   infeasible every smaller one is too;
// - `auto` is never slower than a fixed policy whose plan fits the budget;
// - where copies contend with collectives, plans are simulated with copies
//   that yield, and `auto` never loses to its recompute-only plan;
// - checkpoints (layer inputs the backward does not read) are read by a
//   chain, `full` keeps them, and its chains then stay inside their layer
//   (each layer is recomputed from its input, as torch.utils.checkpoint
//   does);
// - planning is deterministic;
// - `none` has the plain lifetime peak;
// - a schedule written into a recycled one's storage is the schedule.
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"
#include "SameSolution.h"

#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

constexpr uint64_t kNumGraphs = 120;

RandomGraphOptions optionsFor(uint64_t seed) {
  RandomGraphOptions options;
  options.scopes = seed % 3 != 0;
  // Smaller activations on some graphs so that offload hides better.
  options.unitBytes = (seed % 2 ? 4 : 1) << 20;
  return options;
}

llvm::Expected<Plan> planWith(const TrainingGraph &g, Policy policy,
                              int64_t budget) {
  PlanOptions options;
  options.policy = policy;
  options.budgetBytes = budget;
  return planTrainingStep(g, testDeviceProfile(), options);
}

TEST(PlannerPropertyTest, AutoFitsIsMonotonicAndBeatsFixedPolicies) {
  const std::vector<Policy> fixed = {Policy::Full, Policy::EveryN,
                                     Policy::SelectiveOp, Policy::OffloadAll};
  const std::vector<double> fractions = {0.95, 0.8, 0.65, 0.5, 0.4, 0.3};
  for (uint64_t seed = 0; seed < kNumGraphs; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(seed, optionsFor(seed));
    llvm::Expected<Plan> none = planWith(g, Policy::None, INT64_MAX);
    ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
    std::vector<Plan> fixedPlans;
    for (Policy p : fixed) {
      llvm::Expected<Plan> plan = planWith(g, p, INT64_MAX);
      ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
      fixedPlans.push_back(std::move(*plan));
    }
    int64_t previousPeak = INT64_MAX;
    bool wasInfeasible = false;
    for (double fraction : fractions) {
      int64_t budget =
          static_cast<int64_t>(fraction * static_cast<double>(none->peakBytes));
      SCOPED_TRACE("budget " + std::to_string(budget));
      llvm::Expected<Plan> plan = planWith(g, Policy::Auto, budget);
      ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
      if (!plan->feasible) {
        ASSERT_TRUE(plan->leastFeasibleBudget.has_value());
        EXPECT_GT(*plan->leastFeasibleBudget, budget);
        wasInfeasible = true;
        continue;
      }
      EXPECT_FALSE(wasInfeasible) << "a smaller budget became feasible";
      EXPECT_LE(plan->peakBytes, budget);
      EXPECT_LE(plan->peakBytes, previousPeak);
      previousPeak = plan->peakBytes;
      // The plan's numbers are the simulator's.
      PlanOptions options;
      llvm::Expected<SimResult> sim =
          simulatePlan(g, testDeviceProfile(), options, *plan);
      ASSERT_TRUE(static_cast<bool>(sim)) << llvm::toString(sim.takeError());
      EXPECT_EQ(sim->peakBytes, plan->peakBytes);
      EXPECT_DOUBLE_EQ(sim->stepUs, plan->stepUs);
      for (auto [i, fp] : llvm::enumerate(fixedPlans))
        if (fp.peakBytes <= budget)
          EXPECT_LE(plan->stepUs, fp.stepUs + 1e-6)
              << "slower than policy " << stringifyPolicy(fixed[i]).str();
    }
  }
}

// Where copies contend with collectives (the PCIe path's factors), the
// planner simulates copies that yield to collectives, and auto is never
// slower in that model than the best plan without offload at the budget.
TEST(PlannerPropertyTest, ContendedAutoNeverLosesToRecomputeOnly) {
  DeviceProfile device = testDeviceProfile();
  device.collectiveSlowdownWithCopies = 1.39;
  device.collectiveSlowdownWithBothCopies = 1.69;
  device.copySlowdownWithCollectives = 0.7;
  const std::vector<double> fractions = {0.8, 0.6, 0.45};
  int compared = 0, yielding = 0, modelsDiffer = 0;
  for (uint64_t seed = 0; seed < kNumGraphs / 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomGraphOptions graphOptions = optionsFor(seed);
    graphOptions.collectivePercent = 25;
    TrainingGraph g = randomLayeredGraph(seed, graphOptions);
    PlanOptions base;
    bool copiesYield = planCopiesYield(g, device, base);
    yielding += copiesYield;
    // The model follows the graph and the profile, and can be forced.
    EXPECT_FALSE(planCopiesYield(g, testDeviceProfile(), base));
    PlanOptions overlap;
    overlap.copyModel = CollectiveCopyModel::Overlap;
    EXPECT_FALSE(planCopiesYield(g, device, overlap));
    base.policy = Policy::None;
    llvm::Expected<Plan> none = planTrainingStep(g, device, base);
    ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
    for (double fraction : fractions) {
      PlanOptions options;
      options.budgetBytes =
          static_cast<int64_t>(fraction * static_cast<double>(none->peakBytes));
      PlanOptions recomputeOnly = options;
      recomputeOnly.minOffloadBytes = INT64_MAX;
      llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
      llvm::Expected<Plan> noOffload =
          planTrainingStep(g, device, recomputeOnly);
      ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
      ASSERT_TRUE(static_cast<bool>(noOffload))
          << llvm::toString(noOffload.takeError());
      // The plan's step is the yield model's.
      llvm::Expected<SimResult> sim = simulatePlan(g, device, options, *plan);
      ASSERT_TRUE(static_cast<bool>(sim)) << llvm::toString(sim.takeError());
      EXPECT_DOUBLE_EQ(sim->stepUs, plan->stepUs);
      PlanOptions overlapModel = options;
      overlapModel.copyModel = CollectiveCopyModel::Overlap;
      llvm::Expected<SimResult> overlapSim =
          simulatePlan(g, device, overlapModel, *plan);
      ASSERT_TRUE(static_cast<bool>(overlapSim))
          << llvm::toString(overlapSim.takeError());
      modelsDiffer += overlapSim->stepUs != sim->stepUs;
      if (!noOffload->feasible)
        continue;
      ++compared;
      EXPECT_TRUE(plan->feasible);
      EXPECT_LE(plan->stepUs, noOffload->stepUs + 1e-6)
          << "auto is slower than its recompute-only plan";
    }
  }
  // The property was exercised.
  EXPECT_GT(yielding, 0);
  EXPECT_GT(compared, 10);
  EXPECT_GT(modelsDiffer, 0) << "the yield model never changed a step";
}

/// `options.policy`'s decisions for `analysis`, placed, and their schedule
/// built afresh.
struct PolicyRun {
  Placement placed;
  Schedule schedule;
};
llvm::Expected<PolicyRun> runPolicy(const ActivationAnalysis &analysis,
                                    const LayerInfo &layers,
                                    const PlanOptions &options) {
  PolicyDecisions pd =
      fixedPolicyDecisions(analysis, layers, options.policy, options);
  llvm::Expected<Placement> placed =
      placeDecisions(analysis, testDeviceProfile(), pd.decisions);
  if (!placed)
    return placed.takeError();
  llvm::Expected<Schedule> schedule =
      buildSchedule(analysis, placed->decisions);
  if (!schedule)
    return schedule.takeError();
  return PolicyRun{std::move(*placed), std::move(*schedule)};
}

TEST(PlannerPropertyTest, EveryPolicyBuildsAValidSchedule) {
  const std::vector<Policy> policies = {Policy::None, Policy::Full,
                                        Policy::EveryN, Policy::SelectiveOp,
                                        Policy::OffloadAll};
  for (uint64_t seed = 0; seed < 2 * kNumGraphs; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(seed, optionsFor(seed));
    PlanOptions options;
    ActivationAnalysis analysis(g, options);
    LayerInfo layers = findLayers(g);
    for (Policy policy : policies) {
      for (bool offloadKept : {false, true}) {
        if (offloadKept && policy != Policy::SelectiveOp)
          continue;
        options.policy = policy;
        options.offloadKept = offloadKept;
        llvm::Expected<PolicyRun> run = runPolicy(analysis, layers, options);
        ASSERT_TRUE(static_cast<bool>(run)) << llvm::toString(run.takeError());
        const Schedule *schedule = &run->schedule;
        llvm::Error err = schedule->verify();
        EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
        llvm::Expected<SimResult> sim =
            simulate(*schedule, testDeviceProfile());
        ASSERT_TRUE(static_cast<bool>(sim)) << llvm::toString(sim.takeError());
        if (policy == Policy::None) {
          EXPECT_EQ(sim->peakBytes, lifetimePeak(g));
          EXPECT_EQ(sim->peakBytes,
                    MemoryProfile::compute(Lifetimes(g)).peakBytes);
        }
        // Nothing is faster than doing nothing.
        EXPECT_GE(sim->stepUs + 1e-6, sim->busyUs[0] - 1e-6);
      }
    }
  }
}

/// Every field of every op and buffer of `actual` is `expected`'s.
void expectSameSchedule(const Schedule &actual, const Schedule &expected) {
  ASSERT_EQ(actual.ops.size(), expected.ops.size());
  ASSERT_EQ(actual.buffers.size(), expected.buffers.size());
  for (auto [index, op] : llvm::enumerate(actual.ops)) {
    SCOPED_TRACE("op " + std::to_string(index));
    const ScheduleOp &want = expected.ops[index];
    EXPECT_EQ(op.kind, want.kind);
    EXPECT_EQ(op.kernel, want.kernel);
    EXPECT_EQ(op.stream, want.stream);
    EXPECT_EQ(op.node, want.node);
    EXPECT_EQ(op.storage, want.storage);
    EXPECT_EQ(op.durationUs, want.durationUs);
    EXPECT_EQ(op.copyBytes, want.copyBytes);
    EXPECT_EQ(op.deps, want.deps);
    EXPECT_EQ(op.allocs, want.allocs);
    EXPECT_EQ(op.frees, want.frees);
    EXPECT_EQ(op.reads, want.reads);
  }
  for (auto [index, buffer] : llvm::enumerate(actual.buffers)) {
    EXPECT_EQ(buffer.storage, expected.buffers[index].storage);
    EXPECT_EQ(buffer.bytes, expected.buffers[index].bytes);
    EXPECT_EQ(buffer.origin, expected.buffers[index].origin);
  }
}

// The Evaluator writes each schedule into a discarded one's storage
// (buildSchedule's recycling overload): the ops of a plan with more or
// fewer ops, copies, chains and reads are overwritten, none of their
// fields or vectors left over.
TEST(PlannerPropertyTest, RecycledScheduleIsTheSchedule) {
  const std::vector<Policy> policies = {
      Policy::OffloadAll,  Policy::None, Policy::Full,      Policy::EveryN,
      Policy::SelectiveOp, Policy::None, Policy::OffloadAll};
  size_t recycled = 0;
  for (uint64_t seed = 0; seed < kNumGraphs / 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(seed, optionsFor(seed));
    PlanOptions options;
    ActivationAnalysis analysis(g, options);
    LayerInfo layers = findLayers(g);
    Schedule storage;
    for (Policy policy : policies) {
      options.policy = policy;
      llvm::Expected<PolicyRun> run = runPolicy(analysis, layers, options);
      ASSERT_TRUE(static_cast<bool>(run)) << llvm::toString(run.takeError());
      recycled += !storage.ops.empty();
      llvm::Expected<Schedule> reused = buildSchedule(
          analysis, run->placed.decisions, std::move(storage));
      ASSERT_TRUE(static_cast<bool>(reused))
          << llvm::toString(reused.takeError());
      expectSameSchedule(*reused, run->schedule);
      storage = std::move(*reused);
    }
  }
  EXPECT_GT(recycled, 100u);
}

TEST(PlannerPropertyTest, CheckpointsCutChainsAtLayerInputs) {
  int checkpoints = 0, cutChains = 0;
  for (uint64_t seed = 0; seed < kNumGraphs; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(seed, optionsFor(seed));
    PlanOptions options;
    ActivationAnalysis analysis(g, options);
    const LayerInfo &layers = analysis.getLayers();
    llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
    for (const ActivationInfo &act : acts) {
      if (!act.checkpoint)
        continue;
      ++checkpoints;
      const StorageInfo &info =
          analysis.getStorages()[analysis.storageIndex(act.storage)];
      // Not read by the backward: only chains read it after the forward.
      for (NodeId use : info.uses)
        EXPECT_EQ(g.getNode(use).phase, Phase::Fwd) << "%" << act.storage;
      ASSERT_GE(act.inputOfLayer, 0);
      EXPECT_NE(layers.layerOf[act.producer], act.inputOfLayer);
      ASSERT_FALSE(act.chainReaders.empty()) << "%" << act.storage;
      for (ValueId reader : act.chainReaders) {
        const ActivationInfo &r = acts[analysis.activationIndex(reader)];
        EXPECT_TRUE(llvm::is_contained(r.recomputeInputs, act.storage) ||
                    llvm::is_contained(r.rederiveInputs, act.storage));
        EXPECT_LE(act.firstBackwardUse, r.firstBackwardUse);
      }
    }
    options.policy = Policy::Full;
    llvm::Expected<Plan> full = planTrainingStep(g, testDeviceProfile(),
                                                 options);
    if (!full) {
      // A graph without layers: `full` says so.
      llvm::consumeError(full.takeError());
      EXPECT_EQ(layers.numLayers(), 0u);
      continue;
    }
    for (auto [a, d] : llvm::enumerate(full->decisions)) {
      const ActivationInfo &act = acts[a];
      if (act.checkpoint) {
        EXPECT_EQ(d.decision, Decision::Retain) << "%" << act.storage;
        cutChains += d.reason.find("cuts the recompute chains") !=
                     std::string::npos;
        continue;
      }
      if (d.decision != Decision::Recompute)
        continue;
      // Every storage the chain re-creates belongs to the layer of the
      // activation: nothing runs back through an earlier layer.
      int32_t layer = layers.layerOf[act.producer];
      for (NodeId node : act.recomputeNodes)
        for (ValueId result : g.getNode(node).results)
          if (analysis.storageIndex(result) >= 0 &&
              g.getValue(result).storage == result)
            EXPECT_EQ(layers.layerOf[node], layer)
                << "%" << act.storage << " re-runs node " << node;
    }
  }
  // The property was exercised.
  EXPECT_GT(checkpoints, 20);
  EXPECT_GT(cutChains, 20);
}

TEST(PlannerPropertyTest, PlanningIsDeterministic) {
  for (uint64_t seed = 0; seed < kNumGraphs / 2; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g1 = randomLayeredGraph(seed, optionsFor(seed));
    TrainingGraph g2 = randomLayeredGraph(seed, optionsFor(seed));
    llvm::Expected<Plan> base = planWith(g1, Policy::None, INT64_MAX);
    ASSERT_TRUE(static_cast<bool>(base));
    int64_t budget = base->peakBytes / 2;
    llvm::Expected<Plan> a = planWith(g1, Policy::Auto, budget);
    llvm::Expected<Plan> b = planWith(g2, Policy::Auto, budget);
    ASSERT_TRUE(a && b);
    expectSameDecisions(*a, *b);
    EXPECT_EQ(a->peakBytes, b->peakBytes);
    EXPECT_EQ(a->stepUs, b->stepUs);
    EXPECT_EQ(a->feasible, b->feasible);
  }
}

} // namespace

// The least budget `auto` reports when a budget is too small is one it
// meets, whatever pinned host memory it may use: a seed that offloads more
// than the host budget is no plan (it once set the least budget under
// host_budget=0, which a plan at that budget then missed).
TEST(PlannerPropertyTest, ReportedLeastBudgetIsMet) {
  for (uint64_t seed = 0; seed < kNumGraphs; seed += 3) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(seed, optionsFor(seed));
    for (int64_t hostBudget : {int64_t(0), int64_t(1) << 20, INT64_MAX}) {
      SCOPED_TRACE("host budget " + std::to_string(hostBudget));
      PlanOptions options;
      options.policy = Policy::Auto;
      options.hostBudgetBytes = hostBudget;
      options.budgetBytes = 1;
      llvm::Expected<Plan> tiny =
          planTrainingStep(g, testDeviceProfile(), options);
      ASSERT_TRUE(static_cast<bool>(tiny)) << llvm::toString(tiny.takeError());
      ASSERT_FALSE(tiny->feasible);
      ASSERT_TRUE(tiny->leastFeasibleBudget.has_value());
      options.budgetBytes = *tiny->leastFeasibleBudget;
      llvm::Expected<Plan> least =
          planTrainingStep(g, testDeviceProfile(), options);
      ASSERT_TRUE(static_cast<bool>(least))
          << llvm::toString(least.takeError());
      EXPECT_TRUE(least->feasible)
          << "least " << options.budgetBytes << " reported, peak "
          << least->peakBytes;
      EXPECT_LE(least->peakBytes, options.budgetBytes);
    }
  }
}

//===- BoundCorpusTest.cpp - The lower bound on the graphs in graphs/ -----===//
//
// The lower bound (docs/Bound.md) on the real graphs in graphs/ with the
// calibrated H200: never above `auto` or the fixed policies, nor above a
// plan priced at its own decisions; what each family of rows lifts it to
// (measured values, each checked past what it was without them).
//
//===----------------------------------------------------------------------===//

#include "BoundTestSupport.h"
#include "GraphFile.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Bound.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

class BoundOnSharedGraphs : public lethe::testing::CorpusGraphTest {};

TEST_P(BoundOnSharedGraphs, NeverAboveAutoOrPolicies) {
  Plan unplanned = unplannedPlan(*graph, *device);
  for (double fraction : {0.5, 0.7}) {
    SCOPED_TRACE("budget " + std::to_string(fraction));
    PlanOptions options;
    options.budgetBytes = static_cast<int64_t>(fraction * unplanned.peakBytes);
    options.bound = true;
    llvm::Expected<Plan> autoPlan = planTrainingStep(*graph, *device, options);
    ASSERT_TRUE(bool(autoPlan)) << llvm::toString(autoPlan.takeError());
    ASSERT_TRUE(autoPlan->lowerBound.has_value());
    const OverheadBound &bound = *autoPlan->lowerBound;
    expectAbove(*autoPlan, bound, "auto");
    options.bound = false;
    for (Policy policy :
         {Policy::Full, Policy::SelectiveOp, Policy::OffloadAll}) {
      options.policy = policy;
      llvm::Expected<Plan> plan = planTrainingStep(*graph, *device, options);
      if (!plan) {
        // Per-layer policies refuse graphs without layers.
        llvm::consumeError(plan.takeError());
        continue;
      }
      expectAbove(*plan, bound, stringifyPolicy(policy).str());
    }
  }
}

/// Matmuls slowed by `factor` beside copies (one way and both ways),
/// memory-bound kernels not at all: the least loss of a kernel class is 0,
/// so only the contention levels above it (docs/Bound.md, §1 "Contention
/// levels") charge the copies that outlast the memory-bound kernels. (The
/// random graphs have no matmuls: kernelClassOf reads the corpus's flags.)
DeviceProfile matmulOnlyProfile(const DeviceProfile &base, double factor) {
  DeviceProfile device = base;
  device.matmulSlowdownWithCopies = factor;
  device.matmulSlowdownWithBothCopies = factor;
  device.memoryBoundSlowdownWithCopies = 1.0;
  device.memoryBoundSlowdownWithBothCopies = 1.0;
  return device;
}

class ContentionLevelsOnSharedGraphs : public lethe::testing::CorpusGraphTest {
};

TEST_P(ContentionLevelsOnSharedGraphs, ChargeCopiesBesideMatmuls) {
  // At the least level the copies are free and the bound is the
  // uncontended one; the matmul's level charges the copy time the other
  // kernels cannot hide, so the bound rises where the relaxation offloads
  // more than they last. Never above `auto`'s plan under the same profile.
  const DeviceProfile plain = matmulOnlyProfile(*device, 1.0);
  const DeviceProfile contended = matmulOnlyProfile(*device, 1.5);
  Plan unplanned = unplannedPlan(*graph, plain);
  int raised = 0;
  for (double fraction : {0.6, 0.7}) {
    SCOPED_TRACE("budget " + std::to_string(fraction));
    PlanOptions options;
    options.budgetBytes = static_cast<int64_t>(fraction * unplanned.peakBytes);
    options.bound = true;
    llvm::Expected<Plan> autoPlan =
        planTrainingStep(*graph, contended, options);
    ASSERT_TRUE(bool(autoPlan)) << llvm::toString(autoPlan.takeError());
    ASSERT_TRUE(autoPlan->lowerBound.has_value());
    expectAbove(*autoPlan, *autoPlan->lowerBound, "auto");
    OverheadBound without =
        boundAt(*graph, plain, options.budgetBytes, unplanned);
    ASSERT_TRUE(without.feasible);
    EXPECT_GE(autoPlan->lowerBound->stepUs, without.stepUs * (1 - 1e-6));
    raised += autoPlan->lowerBound->stepUs > without.stepUs * (1 + 1e-6);
  }
  EXPECT_GT(raised, 0);
}

// Graphs with matmuls whose nodes carry their times (graph_llama8l.json's
// come from `lethe plan`'s cost pass, which these tests do not run).
INSTANTIATE_TEST_SUITE_P(Graphs, ContentionLevelsOnSharedGraphs,
                         ::testing::Values("graph_gpt2.json",
                                           "graph_resnet50.json",
                                           "graph_bert_base.json"));

/// What a family of the bound's rows lifts the bound to on one corpus graph
/// (docs/Bound.md): at `share` of the unplanned peak the bound lies more
/// than `minOverUs` over the unplanned step, a limit between the bound
/// without those rows and with them (measured 2026-11-27: rows that tighten
/// it later keep the test green), and under auto's plan at that budget.
struct RowsLift {
  const char *rows;
  const char *graph;
  double share;
  double minOverUs;
};

class RowsLiftOnSharedGraphs : public ::testing::TestWithParam<RowsLift> {};

TEST_P(RowsLiftOnSharedGraphs, TheBoundPastWhatItWasWithoutThem) {
  const RowsLift &rows = GetParam();
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<TrainingGraph> graph;
  std::optional<DeviceProfile> device;
  loadCorpusGraph(rows.graph, context, module, graph, device);
  if (HasFatalFailure())
    return;
  expectBoundOverAt(*graph, *device, rows.share, rows.minOverUs);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, RowsLiftOnSharedGraphs,
    ::testing::Values(
        // Each direction's copies run on one serial stream, so they move no
        // longer than the step, or a contention split's phase, lasts
        // (docs/Bound.md, §1 "Stream capacity"). Without those rows the LP
        // moved BERT's copies both ways (the cheapest kernel loss, at 0.87 of
        // the rate) for longer than the phase before the peak: at 70% of the
        // unplanned peak the bound was 4358.9 us over the unplanned step, with
        // them 4484.4 us.
        RowsLift{"StreamCapacity", "graph_bert_base.json", 0.7, 4420.0},
        // The re-runs after a contention split's node (L_p) run on the compute
        // stream after it, so the phase before it lasts that much less and its
        // copies move that much less (docs/Bound.md, §1 "Stream capacity").
        // Without L_p in those rows the LP moved Llama's copies out before the
        // peak (both ways, at the cheapest loss) during time its own re-runs
        // take after it: at 50% of the unplanned peak (the graph with measured
        // times) the bound was 5710.2 us over the unplanned step, with it
        // 5745.2 us.
        RowsLift{"LateRecompute", "graph_llama8l_timed.json", 0.5, 5728.0},
        // Every re-run is at a restore point, in the backward: at a memory
        // point before them all the late re-runs L_p are all of them, and later
        // at least all less those at points up to p (docs/Bound.md, §1 "Memory
        // at node p"). The knapsack alone priced only the bytes p must free. On
        // MobileNet-V3 at 25% of the unplanned peak the bound was 2663.3 us
        // over the unplanned step without the floor, 2842.3 us with it.
        RowsLift{"LateRecomputeFloor", "graph_mobilenet_v3.json", 0.25, 2750.0},
        // An offloaded activation's backward-read views are re-derived from the
        // prefetched storage at its restore point, on the compute stream, like
        // a recompute chain (docs/Bound.md, §1 "Recompute"). Without those rows
        // the LP re-derived Mixtral's views for free: at 60% of the unplanned
        // peak the bound was 1393.2 us over the unplanned step, with them
        // 1403.7 us.
        RowsLift{"RederivedViews", "graph_mixtral_moe.json", 0.6, 1398.0},
        // The re-runs before a contention split's node are the re-run time less
        // the late ones (R - L_p), so the kernels they give copies to hide
        // beside are at most that time at the densest re-run's deficit
        // (docs/Bound.md, §1 "Contention split"). Without that cap phase 1 took
        // the deficits of every re-run: on T5 at 50% of the unplanned peak (5.6
        // ms of re-runs, 0.2 ms before the peak) the bound was 5591.0 us over
        // the unplanned step, with it 5694.2 us.
        RowsLift{"EarlyReruns", "graph_t5_base.json", 0.5, 5640.0},
        // Each direction's moving time does at least its least rate's work (the
        // least with the other direction moving, and without it), and that work
        // is all its copies' (docs/Bound.md, §1 "Copy work"). Without those
        // rows the LP moved BERT's D2H stream beside its prefetches with
        // nothing left to copy, so that the prefetches took the both-ways loss
        // (1.7% on the calibrated H200, against 4.9% one way): at 90% of the
        // unplanned peak the bound was 277.2 us over the unplanned step, with
        // them 346.9 us.
        RowsLift{"CopyWork", "graph_bert_base.json", 0.9, 312.0},
        // The D2H cuts' thresholds (docs/Bound.md, §1 "Memory at node p"): with
        // 16 spread over the forward, an activation ready up to a sixteenth of
        // the forward before a memory point counted as copied out by then
        // whatever else the D2H stream had to move; with 256 the cuts follow
        // the ready times. On Mixtral-MoE at 60% of the unplanned peak the
        // bound was 1424.7 us over the unplanned step with 16 thresholds,
        // 1451.9 us with 256.
        RowsLift{"ReadyThresholds", "graph_mixtral_moe.json", 0.6, 1438.0},
        // The copy cuts charge each size class's absent MiB (within a power
        // of two) one fixed cost per its largest member's MiB (docs/Bound.md,
        // *Fixed costs in the cuts*). With one class per point, the gap's
        // largest (96 MiB on T5), the LP offloaded 120 activations of 1.5-12
        // MiB for about a copy's fixed cost: at 60% of the unplanned peak
        // the bound was 3090.8 us over the unplanned step, with the classes
        // 3106.7 us.
        RowsLift{"SizeClasses", "graph_t5_base.json", 0.6, 3099.0},
        // An offload's D2H copy starts after the node that makes its content
        // final and moves beside the forward kernels that fit in its
        // duration; phase 1 of each contention split pays them
        // (docs/Bound.md, §1 "Copy coverage"). Without those rows the LP let
        // Swin-T's copies out meet only the kernels that lose nothing: at
        // 70% of the unplanned peak the bound was 271.6 us over the
        // unplanned step, with them 291.9 us (2026-11-28).
        RowsLift{"CopyCoverage", "graph_swin_t.json", 0.7, 282.0}),
    [](const ::testing::TestParamInfo<RowsLift> &info) {
      return std::string(info.param.rows);
    });

class FixedDecisionsOnSharedGraphs : public lethe::testing::CorpusGraphTest {};

TEST_P(FixedDecisionsOnSharedGraphs, PriceAPlanBetweenTheBoundAndItsStep) {
  // With auto's decisions fixed the relaxation prices auto's plan
  // (boundStepTime's `fixed`): no lower than the bound over every plan and
  // no higher than the plan's simulated step. On GPT-2 at 70% of the
  // unplanned peak the bound is 4.04% and the price 4.21% (measured
  // 2026-11-28; 4.59% on 2026-11-27, before refine's contention pass made
  // auto's plan 5.48 -> 5.35%): checked at least 0.1 points apart, which an
  // ignored `fixed` would not be.
  Plan unplanned = unplannedPlan(*graph, *device);
  PlanOptions options;
  options.budgetBytes = static_cast<int64_t>(0.7 * unplanned.peakBytes);
  llvm::Expected<Plan> autoPlan = planTrainingStep(*graph, *device, options);
  ASSERT_TRUE(bool(autoPlan)) << llvm::toString(autoPlan.takeError());
  ASSERT_TRUE(autoPlan->feasible);
  ActivationAnalysis analysis(*graph, options);
  std::vector<Decision> decisions(analysis.getActivations().size(),
                                  Decision::Retain);
  for (const ActivationDecision &d : autoPlan->decisions)
    if (int32_t a = analysis.activationIndex(d.value); a >= 0)
      decisions[a] = d.decision;
  OverheadBound bound =
      boundAt(*graph, *device, options.budgetBytes, unplanned);
  llvm::Expected<OverheadBound> priced =
      boundStepTime(*graph, *device, options, unplanned.stepUs,
                    unplanned.peakBytes, decisions);
  ASSERT_TRUE(bool(priced)) << llvm::toString(priced.takeError());
  ASSERT_TRUE(bound.feasible && priced->feasible);
  EXPECT_GT(priced->stepUs - bound.stepUs, 0.001 * unplanned.stepUs);
  expectAbove(*autoPlan, *priced, "auto at its own decisions");
}

INSTANTIATE_TEST_SUITE_P(Graphs, FixedDecisionsOnSharedGraphs,
                         ::testing::Values("graph_gpt2.json"));

class OwnDecisionsOnSharedGraphs : public lethe::testing::CorpusGraphTest {};

TEST_P(OwnDecisionsOnSharedGraphs, PriceEveryPlanAtMostItsStep) {
  // expectPricedAbove on auto and the fixed policies. T5 and Mixtral
  // offload a few large activations beside many small ones in their gaps,
  // which the fixed costs' rows once took for many copies: at auto's
  // decisions on T5 the relaxation was infeasible at 50-70% (2026-11-27).
  Plan unplanned = unplannedPlan(*graph, *device);
  for (double fraction : {0.5, 0.6, 0.7}) {
    SCOPED_TRACE("budget " + std::to_string(fraction));
    PlanOptions options;
    options.budgetBytes = static_cast<int64_t>(fraction * unplanned.peakBytes);
    for (Policy policy :
         {Policy::Auto, Policy::SelectiveOp, Policy::OffloadAll}) {
      SCOPED_TRACE(stringifyPolicy(policy).str());
      options.policy = policy;
      llvm::Expected<Plan> plan = planTrainingStep(*graph, *device, options);
      if (!plan) {
        llvm::consumeError(plan.takeError());
        continue;
      }
      expectPricedAbove(*graph, *device, options, unplanned, *plan, "plan");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, OwnDecisionsOnSharedGraphs,
                         ::testing::Values("graph_t5_base.json",
                                           "graph_mixtral_moe.json",
                                           "graph_gpt2.json"));

INSTANTIATE_TEST_SUITE_P(Graphs, BoundOnSharedGraphs,
                         ::testing::Values("graph_gpt2.json",
                                           "graph_resnet50.json",
                                           "graph_llama8l.json",
                                           "graph_bert_base.json"));

} // namespace

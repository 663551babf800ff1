//===- BoundTest.cpp - The lower bound never exceeds a feasible plan ------===//
//
// The lower bound on the step time (lethe/Planner/Bound.h, docs/Bound.md)
// is checked against every plan the planner can produce that fits:
// - on small random graphs, the exact solver's plan (solver=exact), measured
//   by the simulator, wherever CBC proves it optimal;
// - on random graphs, the fast `auto` plan, every fixed policy and random
//   decisions (policy given);
// - on the real graphs in graphs/: BoundCorpusTest.cpp.
// And where the bound says no plan fits, none of them does.
//
//===----------------------------------------------------------------------===//

#include "BoundTestSupport.h"
#include "GraphFile.h"
#include "RandomGraph.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Bound.h"
#include "lethe/Planner/ExactSolver.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(BoundTest, ZeroWhenTheUnplannedStepFits) {
  const DeviceProfile device = testDeviceProfile();
  TrainingGraph g = randomLayeredGraph(1);
  Plan unplanned = unplannedPlan(g, device);
  OverheadBound bound = boundAt(g, device, unplanned.peakBytes, unplanned);
  EXPECT_TRUE(bound.feasible);
  EXPECT_EQ(bound.overhead, 0.0);
  EXPECT_EQ(bound.stepUs, unplanned.stepUs);
}

TEST(BoundTest, PositiveBelowTheUnplannedPeak) {
  // Below the unplanned peak something must be recomputed (time) or
  // offloaded (copies): on graphs where nothing is free the bound says so.
  const DeviceProfile device = testDeviceProfile();
  int positive = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    TrainingGraph g = randomLayeredGraph(100 + seed);
    Plan unplanned = unplannedPlan(g, device);
    OverheadBound bound =
        boundAt(g, device, unplanned.peakBytes * 4 / 10, unplanned);
    EXPECT_TRUE(bound.converged);
    positive += bound.feasible && bound.overhead > 0;
  }
  EXPECT_GT(positive, 5);
}

TEST(BoundTest, ChainNodeRunsAtEachRestorePoint) {
  // u = mm(x) [300 us, read by no backward node]; a1 = relu(u), a2 =
  // gelu(u) [8 MiB each, 10 us]; y = add(a1, a2), returned (no backward
  // node reads it, so no chain reads a1 or a2); backward: d = mm(x)
  // [16 MiB], s = sum(d), then g1 = mm(s, a1), then g2 = mm(g1, a2). With
  // copies too slow to help, a budget 15 MiB under the peak (at d) needs
  // 15 MiB of a1 and a2 recomputed, restored before g1 and before g2: u's
  // mm runs at each point, so the relaxation (a1 whole, 7/8 of a2) pays
  // 1.875 x (300 + 10) = 581.25 us; counting the mm once per step, it paid
  // 15/16 of one run and 18.75 us of relu and gelu: 300 us. auto recomputes
  // both (620 us).
  constexpr int64_t kMiB = 1 << 20;
  TrainingGraph g;
  ValueId x = g.addInput(kMiB, InputKind::Input);
  ValueId u = addOp(g, "aten.mm", Phase::Fwd, 300, {x}, kMiB);
  ValueId a1 = addOp(g, "aten.relu", Phase::Fwd, 10, {u}, 8 * kMiB);
  ValueId a2 = addOp(g, "aten.gelu", Phase::Fwd, 10, {u}, 8 * kMiB);
  ValueId y = addOp(g, "aten.add", Phase::Fwd, 10, {a1, a2}, kMiB);
  g.addOutput(y);
  ValueId d = addOp(g, "aten.mm", Phase::Bwd, 10, {x}, 16 * kMiB);
  ValueId s = addOp(g, "aten.sum", Phase::Bwd, 10, {d}, kMiB);
  ValueId g1 = addOp(g, "aten.mm", Phase::Bwd, 10, {s, a1}, kMiB);
  g.addOutput(addOp(g, "aten.mm", Phase::Bwd, 10, {g1, a2}, kMiB));
  DeviceProfile device = testDeviceProfile();
  device.d2hBytesPerSec = device.h2dBytesPerSec = 1e6;
  Plan unplanned = unplannedPlan(g, device);
  const int64_t budget = unplanned.peakBytes - 15 * kMiB;
  OverheadBound bound = boundAt(g, device, budget, unplanned);
  ASSERT_TRUE(bound.feasible);
  EXPECT_NEAR(bound.stepUs - unplanned.stepUs, 1.875 * 310, 0.05);
  PlanOptions options;
  options.budgetBytes = budget;
  llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_TRUE(plan->feasible);
  EXPECT_NEAR(plan->stepUs - unplanned.stepUs, 620, 1e-6);
  expectAbove(*plan, bound, "auto");
}

TEST(BoundTest, ChainNodeRunsAtEachFirstBackwardUse) {
  // ChainNodeRunsAtEachRestorePoint's graph, with r = tanh(a2) [1 MiB]: a2
  // may then be restored early, where a chain that reads it runs, so its
  // restore points and a1's overlap. Where r is read by g1 and costs 1,000
  // us to re-run, no plan drops it, a2 is restored before g2 and u's mm
  // runs twice: the relaxation pays 1.875 x 310 = 581.25 us as before
  // (300 + 18.75, u's mm counted once, without the rows for the first
  // backward uses). Where r costs 1 us, the best plan recomputes r, a1 and
  // a2 before g1, running the mm once (321 us): the bound stays below it
  // and below the exact solver's optimum. Where r (1 us) is read only by
  // g2 and q = sigmoid(r) [1,000 us, 1 MiB] by g1, a2 comes back before g1
  // only if q is dropped too (q's chain restores r there, r's a2): a plan
  // drops r (1 MiB for 1 us) and runs the mm twice, 1.75 x 310 + 1 =
  // 543.5 us; counting only r's drop, the relaxation paid 281.0.
  constexpr int64_t kMiB = 1 << 20;
  struct Variant {
    double rUs;
    bool qReadsR;
    double boundUs; // 0: only checked below the plans.
  };
  for (Variant v : {Variant{1000, false, 581.25}, Variant{1, false, 0},
                    Variant{1, true, 543.5}}) {
    SCOPED_TRACE("r re-runs in " + std::to_string(v.rUs) + " us" +
                 (v.qReadsR ? ", read by q" : ""));
    TrainingGraph g;
    ValueId x = g.addInput(kMiB, InputKind::Input);
    ValueId u = addOp(g, "aten.mm", Phase::Fwd, 300, {x}, kMiB);
    ValueId a1 = addOp(g, "aten.relu", Phase::Fwd, 10, {u}, 8 * kMiB);
    ValueId a2 = addOp(g, "aten.gelu", Phase::Fwd, 10, {u}, 8 * kMiB);
    ValueId r = addOp(g, "aten.tanh", Phase::Fwd, v.rUs, {a2}, kMiB);
    ValueId q =
        v.qReadsR ? addOp(g, "aten.sigmoid", Phase::Fwd, 1000, {r}, kMiB) : r;
    g.addOutput(addOp(g, "aten.add", Phase::Fwd, 10, {a1, a2}, kMiB));
    ValueId d = addOp(g, "aten.mm", Phase::Bwd, 10, {x}, 16 * kMiB);
    ValueId s = addOp(g, "aten.sum", Phase::Bwd, 10, {d}, kMiB);
    ValueId g1 = addOp(g, "aten.mm", Phase::Bwd, 10, {s, a1, q}, kMiB);
    g.addOutput(addOp(g, "aten.mm", Phase::Bwd, 10, {g1, a2, r}, kMiB));
    DeviceProfile device = testDeviceProfile();
    device.d2hBytesPerSec = device.h2dBytesPerSec = 1e6;
    Plan unplanned = unplannedPlan(g, device);
    const int64_t budget = unplanned.peakBytes - 15 * kMiB;
    OverheadBound bound = boundAt(g, device, budget, unplanned);
    ASSERT_TRUE(bound.feasible);
    if (v.boundUs > 0)
      EXPECT_NEAR(bound.stepUs - unplanned.stepUs, v.boundUs, 0.05);
    expectBothSolversAbove(g, device, budget, bound, [&](const Plan &plan) {
      if (v.boundUs == 0) // r, a1, a2 and u's mm once, before g1.
        EXPECT_LE(plan.stepUs - unplanned.stepUs, 321 + 1e-6);
    });
  }
}

/// testDeviceProfile with each copy costing `fixedUs` (each direction) on
/// top of its bytes: on the random graphs' 1-4 MiB activations (18-73 us
/// at 55 GB/s) 20 us is a large part of a copy.
DeviceProfile fixedCostProfile(double fixedUs) {
  DeviceProfile device = testDeviceProfile();
  device.d2hFixedUs = device.h2dFixedUs = fixedUs;
  return device;
}

/// The graphs and budgets of ExactPropertyTest (the first `seeds`): the
/// bound never exceeds the exact optimum wherever CBC proves it, nor auto.
/// Also says how the gap between `auto` and the bound splits there: the
/// relaxation's part (exact - bound) and auto's (auto - exact), in points
/// of overhead (bench/results/bound.md). Returns the cases checked.
int checkExactOptimum(const DeviceProfile &device, uint64_t seeds) {
  int checked = 0;
  double boundPart = 0, autoPart = 0, worstBound = 0, worstAuto = 0;
  int boundLoose = 0, autoLoose = 0;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomGraphOptions small;
    small.minLayers = 1;
    small.maxLayers = 2;
    small.minOpsPerLayer = 3;
    small.maxOpsPerLayer = 5;
    small.unitBytes = (seed % 2 ? 4 : 1) << 20;
    TrainingGraph g = randomLayeredGraph(5000 + seed, small);
    Plan unplanned = unplannedPlan(g, device);
    PlanOptions exactOptions;
    exactOptions.solver = SolverKind::Exact;
    exactOptions.exactTimeLimitSec = 60;
    exactOptions.budgetBytes = 0;
    llvm::Expected<Plan> least = solveExact(g, device, exactOptions);
    if (!least) {
      ADD_FAILURE() << llvm::toString(least.takeError());
      return checked;
    }
    if (!least->leastFeasibleBudget) {
      ADD_FAILURE() << "no least feasible budget";
      return checked;
    }
    int64_t lo = *least->leastFeasibleBudget, hi = unplanned.peakBytes;
    for (double fraction : {0.0, 0.25, 0.5, 0.75}) {
      int64_t budget = lo + static_cast<int64_t>(fraction * (hi - lo));
      SCOPED_TRACE("budget " + std::to_string(budget));
      exactOptions.budgetBytes = budget;
      exactOptions.bound = true;
      llvm::Expected<Plan> exact =
          planTrainingStep(g, device, exactOptions);
      if (!exact || !exact->lowerBound) {
        ADD_FAILURE() << (exact ? "no bound"
                                : llvm::toString(exact.takeError()));
        return checked;
      }
      if (!exact->feasible || !exact->exactReport->provenOptimal)
        continue;
      const OverheadBound &bound = *exact->lowerBound;
      expectAbove(*exact, bound, "exact");
      PlanOptions fastOptions = exactOptions;
      fastOptions.solver = SolverKind::Fast;
      fastOptions.bound = false;
      llvm::Expected<Plan> fast = planTrainingStep(g, device, fastOptions);
      if (!fast) {
        ADD_FAILURE() << llvm::toString(fast.takeError());
        return checked;
      }
      expectAbove(*fast, bound, "auto");
      ++checked;
      double exactOverhead = 100 * (exact->stepUs / unplanned.stepUs - 1);
      double b = 100 * bound.overhead;
      boundPart += exactOverhead - b;
      worstBound = std::max(worstBound, exactOverhead - b);
      boundLoose += exactOverhead - b > 2;
      if (fast->feasible) {
        double a = 100 * (fast->stepUs / unplanned.stepUs - 1) - exactOverhead;
        autoPart += a;
        worstAuto = std::max(worstAuto, a);
        autoLoose += a > 2;
      }
    }
  }
  std::cout << "[ note     ] " << checked
            << " cases proven optimal: exact - bound mean "
            << boundPart / std::max(1, checked) << " points, worst "
            << worstBound << ", over 2 in " << boundLoose
            << "; auto - exact mean " << autoPart / std::max(1, checked)
            << ", worst " << worstAuto << ", over 2 in " << autoLoose << "\n";
  return checked;
}

TEST(BoundTest, NeverAboveTheExactOptimum) {
  EXPECT_GT(checkExactOptimum(testDeviceProfile(), 60), 150);
}

TEST(BoundTest, NeverAboveTheExactOptimumWhenCopiesCostFixedTime) {
  // The fixed costs in the copy channels and cuts (docs/Bound.md, §1)
  // against the optimum of graphs whose copies are 18-73 us of bytes.
  EXPECT_GT(checkExactOptimum(fixedCostProfile(20.0), 20), 50);
}

TEST(BoundTest, CheckpointStaysWhileAChainReadsIt) {
  // Two equal layers (h = mm(r) [300 us, 8 MiB], a = relu(h) [1 MiB],
  // r' = add(r, a) [200 us, 4 MiB]); the backward reads h and a, not r, so
  // layer 1's input r1 is a checkpoint, read by h1's recompute chain. Copies
  // too slow to help; a budget 12 MiB under the peak (at d): dropping h0 frees
  // 8 MiB, h1 only 4 more while r1 stays for its chain (or r1 is dropped
  // too and its add re-run, 200 us): auto and the exact optimum pay 600
  // us. Counting r1 nowhere, the relaxation paid 422.5 us, with it 497.5
  // (measured 2026-11-27; only a limit between the two is checked).
  constexpr int64_t kMiB = 1 << 20;
  TrainingGraph g;
  ValueId r = g.addInput(4 * kMiB, InputKind::Input);
  std::vector<ValueId> saved;
  for (int layer = 0; layer < 2; ++layer) {
    std::string scope = "model.layers." + std::to_string(layer);
    ValueId h = addOp(g, "aten.mm", Phase::Fwd, 300, {r}, 8 * kMiB, scope);
    ValueId a = addOp(g, "aten.relu", Phase::Fwd, 10, {h}, kMiB, scope);
    r = addOp(g, "aten.add", Phase::Fwd, 200, {r, a}, 4 * kMiB, scope);
    saved.insert(saved.begin(), {h, a});
  }
  g.addOutput(r);
  ValueId d = addOp(g, "aten.mm", Phase::Bwd, 10, {saved.back()}, 16 * kMiB);
  ValueId grad = addOp(g, "aten.sum", Phase::Bwd, 10, {d}, kMiB);
  for (size_t i = 0; i < saved.size(); i += 2)
    grad = addOp(g, "aten.mm", Phase::Bwd, 10, {grad, saved[i], saved[i + 1]},
                 kMiB);
  g.addOutput(grad);
  DeviceProfile device = testDeviceProfile();
  device.d2hBytesPerSec = device.h2dBytesPerSec = 1e6;
  Plan unplanned = unplannedPlan(g, device);
  const int64_t budget = unplanned.peakBytes - 12 * kMiB;
  OverheadBound bound = boundAt(g, device, budget, unplanned);
  ASSERT_TRUE(bound.feasible);
  EXPECT_GT(bound.stepUs - unplanned.stepUs, 460);
  expectBothSolversAbove(g, device, budget, bound, [](const Plan &plan) {
    if (plan.exactReport)
      EXPECT_TRUE(plan.exactReport->provenOptimal);
  });
}

/// testDeviceProfile with kernels slowed beside moving copies and copies
/// slowed beside kernels, the other direction and collectives (the
/// contention rows of docs/Bound.md); `scale` exaggerates the factors.
/// `memoryKernelBytesPerSec` (0: unset) scales a memory-bound kernel's
/// factor by the part of its time its memory traffic takes (the
/// simulator's roofline): at the calibrated H200's 4084 GB/s, above the
/// test profile's HBM rate, most memory-bound kernels are not slowed at all.
DeviceProfile contendedProfile(double scale,
                               double memoryKernelBytesPerSec = 0) {
  DeviceProfile device = testDeviceProfile();
  device.memoryKernelBytesPerSec = memoryKernelBytesPerSec;
  device.matmulSlowdownWithCopies = 1 + 0.052 * scale;
  device.matmulSlowdownWithBothCopies = 1 + 0.017 * scale;
  device.memoryBoundSlowdownWithCopies = 1 + 0.038 * scale;
  device.memoryBoundSlowdownWithBothCopies = 1 + 0.075 * scale;
  device.copySlowdownWithMatmul = 0.999;
  device.copySlowdownWithMemoryBound = 0.998;
  device.copySlowdownWithCollectives = 0.993;
  device.duplexFactor = 0.87;
  device.d2hFixedUs = 2.61;
  device.h2dFixedUs = 2.73;
  return device;
}

/// The bound against `auto`, the fixed policies and random legal decisions
/// on random graphs; returns how many plans fit.
int checkPoliciesAndRandomDecisions(const DeviceProfile &device) {
  int checked = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(7000 + seed);
    Plan unplanned = unplannedPlan(g, device);
    ActivationAnalysis analysis(g, PlanOptions{});
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    auto next = [&] {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return state;
    };
    for (double fraction : {0.3, 0.45, 0.6, 0.75, 0.9}) {
      int64_t budget = static_cast<int64_t>(fraction * unplanned.peakBytes);
      SCOPED_TRACE("budget " + std::to_string(fraction));
      OverheadBound bound = boundAt(g, device, budget, unplanned);
      PlanOptions options;
      options.budgetBytes = budget;
      options.solver = SolverKind::Fast;
      for (Policy policy : {Policy::Auto, Policy::Full, Policy::EveryN,
                            Policy::SelectiveOp, Policy::OffloadAll}) {
        options.policy = policy;
        llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
        if (!plan) {
          ADD_FAILURE() << llvm::toString(plan.takeError());
          return checked;
        }
        expectAbove(*plan, bound, stringifyPolicy(policy).str());
        expectPricedAbove(g, device, options, unplanned, *plan,
                          stringifyPolicy(policy).str());
        checked += plan->feasible;
      }
      // Random decisions, each legal for its activation.
      options.policy = Policy::Given;
      for (int trial = 0; trial < 8; ++trial) {
        options.givenDecisions.clear();
        for (const ActivationInfo &act : analysis.getActivations()) {
          ActivationDecision d;
          d.value = act.storage;
          uint64_t r = next() % 3;
          d.decision = r == 1 && act.recomputable ? Decision::Recompute
                       : r == 2 && act.offloadable ? Decision::Offload
                                                   : Decision::Retain;
          options.givenDecisions.push_back(d);
        }
        llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
        if (!plan) {
          ADD_FAILURE() << llvm::toString(plan.takeError());
          return checked;
        }
        expectAbove(*plan, bound, "random decisions");
        expectPricedAbove(g, device, options, unplanned, *plan,
                          "random decisions");
        checked += plan->feasible;
      }
    }
  }
  return checked;
}

TEST(BoundTest, NeverAbovePoliciesOrRandomDecisions) {
  EXPECT_GT(checkPoliciesAndRandomDecisions(testDeviceProfile()), 100);
}

TEST(BoundTest, NeverAbovePlansWhenCopiesSlowKernels) {
  // The calibrated H200's factors, and ten times as much contention.
  for (double scale : {1.0, 10.0}) {
    SCOPED_TRACE("contention x" + std::to_string(scale));
    EXPECT_GT(checkPoliciesAndRandomDecisions(contendedProfile(scale)), 100);
  }
}

TEST(BoundTest, NeverAbovePlansWhenMemoryKernelsHideCopies) {
  // The same with the calibrated H200's memory-kernel rate: copies beside
  // a memory-bound kernel whose traffic is a small part of its time cost
  // it (nearly) nothing, so the bound may not charge them the class's
  // factor (docs/Bound.md, assumption 6).
  for (double scale : {1.0, 10.0}) {
    SCOPED_TRACE("contention x" + std::to_string(scale));
    EXPECT_GT(checkPoliciesAndRandomDecisions(contendedProfile(scale, 4084e9)),
              100);
  }
}

TEST(BoundTest, NeverAbovePlansWhenCopiesWait) {
  // The same with waits between streams costing a copy op work (eager
  // launch: `wait_us` per dependency the stream does not know of, and an
  // event record on the op waited for), large against the random graphs'
  // copies: a stream's moving time does its copies' work and their waits,
  // which the copy-work rows allow for (docs/Bound.md, §1 "Copy work").
  for (double waitUs : {1.5, 40.0}) {
    SCOPED_TRACE("wait " + std::to_string(waitUs) + " us");
    DeviceProfile device = contendedProfile(1.0);
    device.waitUs = waitUs;
    device.eventRecordUs = waitUs / 2;
    EXPECT_GT(checkPoliciesAndRandomDecisions(device), 100);
  }
}

TEST(BoundTest, NeverAbovePlansWhenCopiesCostFixedTime) {
  // The copy channels and the memory points' copy cuts charge each copy
  // its fixed cost (docs/Bound.md, §1 "Copy channels", "Memory at node
  // p"); no plan beats them.
  for (double fixedUs : {2.61, 20.0})
    EXPECT_GT(checkPoliciesAndRandomDecisions(fixedCostProfile(fixedUs)), 100);
}

TEST(BoundTest, FixedCopyCostsLiftTheBound) {
  // Without contention the fixed costs entered no row: the bound was the
  // same with and without them. With the copies' fixed costs in the
  // channels and the cuts (at least the cut's fewest copies per MiB, each
  // its fixed cost) it rises where copies bind, and never falls.
  const DeviceProfile free = testDeviceProfile();
  const DeviceProfile fixed = fixedCostProfile(20.0);
  int rose = 0, cases = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    TrainingGraph g = randomLayeredGraph(7000 + seed);
    Plan unplanned = unplannedPlan(g, free);
    for (double fraction : {0.45, 0.6, 0.75}) {
      int64_t budget = static_cast<int64_t>(fraction * unplanned.peakBytes);
      OverheadBound without = boundAt(g, free, budget, unplanned);
      OverheadBound with = boundAt(g, fixed, budget, unplanned);
      if (!without.feasible || !with.feasible)
        continue;
      ++cases;
      EXPECT_GE(with.stepUs, without.stepUs * (1 - 1e-6));
      rose += with.stepUs > without.stepUs + 1.0;
    }
  }
  std::cout << "[ bound    ] fixed copy costs lift the bound in " << rose
            << " of " << cases << " cases\n";
  EXPECT_GT(rose, cases / 4);
}

/// Kernels slowed by copies moving one way (by `oneWay`) but not by copies
/// moving both ways at once, which the bound may price at nothing: only
/// the contention split (docs/Bound.md, §1 "Contention split") makes it
/// charge the copies out before a node that must free bytes, and back in
/// after it, the one-way loss. `ranks` sharing the host's copy bandwidth
/// (capped at `hostCap` times one rank's lone rate each way and together)
/// slow the copies further (the split's least moving rate).
DeviceProfile oneWayProfile(double oneWay, int64_t ranks = 1,
                            double hostCap = 0) {
  DeviceProfile device = contendedProfile(1.0);
  device.matmulSlowdownWithCopies = oneWay;
  device.memoryBoundSlowdownWithCopies = oneWay;
  device.matmulSlowdownWithBothCopies = 1.0;
  device.memoryBoundSlowdownWithBothCopies = 1.0;
  device.ranksPerHost = ranks;
  device.hostD2HBytesPerSec = hostCap * device.d2hBytesPerSec;
  device.hostH2DBytesPerSec = hostCap * device.h2dBytesPerSec;
  device.hostBothBytesPerSec = hostCap * device.d2hBytesPerSec;
  return device;
}

TEST(BoundTest, FixedCostsChargeNoMoreCopiesThanHoldTheBytes) {
  // big = mm(x) [64 MiB, 50 ms to re-run]; then 8 tanh nodes [1 ms, 4
  // KiB each, the first reads big], then 16 relu nodes [10 us, 4 MiB
  // each]; the backward reads them in reverse [10 us per relu, 1 ms per
  // tanh] and big last. A budget 60 MiB under the peak is met by
  // offloading big alone: one copy each way (6.4 ms of bytes and a 1-ms
  // fixed cost) hides in the tanh nodes' 8 ms of forward and of backward,
  // so the plan costs nothing. The fewest copies that hold b MiB of the
  // gap's activations grow convexly in b (one copy holds 64 MiB here);
  // taken as the chord (16 copies per 124 MiB, about 7.7 ms of fixed costs
  // for the 60 MiB) the copy cuts called the windows too short and the
  // bound rose above the plan's step.
  constexpr int64_t kMiB = 1 << 20;
  TrainingGraph g;
  ValueId x = g.addInput(kMiB, InputKind::Input);
  ValueId big = addOp(g, "aten.mm", Phase::Fwd, 50000, {x}, 64 * kMiB);
  std::vector<ValueId> chain{big};
  for (int i = 0; i < 8; ++i)
    chain.push_back(
        addOp(g, "aten.tanh", Phase::Fwd, 1000, {chain.back()}, 4096));
  for (int i = 0; i < 16; ++i)
    chain.push_back(
        addOp(g, "aten.relu", Phase::Fwd, 10, {chain.back()}, 4 * kMiB));
  ValueId grad = addOp(g, "aten.sum", Phase::Fwd, 10, {chain.back()}, 4096);
  g.addOutput(grad);
  for (int i = static_cast<int>(chain.size()) - 1; i >= 0; --i)
    grad = addOp(g, "aten.mul", Phase::Bwd, i >= 1 && i <= 8 ? 1000 : 10,
                 {grad, chain[i]}, 4096);
  g.addOutput(grad);
  DeviceProfile device = testDeviceProfile();
  device.d2hBytesPerSec = device.h2dBytesPerSec = 64 * kMiB / 6.4e-3;
  device.d2hFixedUs = device.h2dFixedUs = 1000;
  Plan unplanned = unplannedPlan(g, device);
  PlanOptions options;
  options.budgetBytes = unplanned.peakBytes - 60 * kMiB;
  OverheadBound bound = boundAt(g, device, options.budgetBytes, unplanned);
  options.policy = Policy::Given;
  ActivationAnalysis analysis(g, options);
  for (const ActivationInfo &act : analysis.getActivations()) {
    ActivationDecision d;
    d.value = act.storage;
    d.decision = act.storage == big ? Decision::Offload : Decision::Retain;
    // Released after the last tanh, prefetched after the last relu's
    // backward node: each copy beside the tanh nodes' 8 ms.
    d.releaseAfter = 8;
    d.prefetchAfter = 41;
    options.givenDecisions.push_back(d);
  }
  llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  EXPECT_LT(plan->stepUs - unplanned.stepUs, 0.01 * unplanned.stepUs);
  expectAbove(*plan, bound, "big offloaded");
  expectPricedAbove(g, device, options, unplanned, *plan, "big offloaded");
}

TEST(BoundTest, CopyCoverageChargesTheKernelsAfterTheProducer) {
  // big = mm(x) [64 MiB, 50 ms to re-run]; then a 1.5-ms matmul, then 8
  // add/tanh nodes [1 ms each, the first reads big and the matmul]; the
  // backward makes a 64-MiB temporary (the peak), reads the chain in
  // reverse [1 ms each] and big last. Only matmuls
  // slow beside copies (x1.1, one way or both), and a copy takes 2 ms. A
  // budget 60 MiB under the peak is met by offloading big, whose D2H copy
  // starts after its producer, beside the matmul: the plan pays 150 us.
  // The contention rows let the copies move beside the 16 ms of unslowed
  // nodes instead (bound 0); the coverage row charges the matmul that the
  // copy cannot avoid (docs/Bound.md, §1 "Copy coverage").
  constexpr int64_t kMiB = 1 << 20;
  TrainingGraph g;
  ValueId x = g.addInput(kMiB, InputKind::Input);
  ValueId big = addOp(g, "aten.mm", Phase::Fwd, 50000, {x}, 64 * kMiB);
  ValueId product = g.getNode(g.addNode("aten.mm", Phase::Fwd, 1500, {x},
                                        {4096}, {}, NodeFlagMatrix))
                        .results[0];
  std::vector<ValueId> chain{
      addOp(g, "aten.add", Phase::Fwd, 1000, {big, product}, 4096)};
  for (int i = 0; i < 7; ++i)
    chain.push_back(
        addOp(g, "aten.tanh", Phase::Fwd, 1000, {chain.back()}, 4096));
  ValueId grad = addOp(g, "aten.sum", Phase::Fwd, 10, {chain.back()}, 4096);
  g.addOutput(grad);
  // The peak: a 64-MiB temporary of the backward beside big.
  ValueId temporary = addOp(g, "aten.mul", Phase::Bwd, 10, {grad}, 64 * kMiB);
  grad = addOp(g, "aten.sum", Phase::Bwd, 10, {temporary}, 4096);
  for (int i = static_cast<int>(chain.size()) - 1; i >= 0; --i)
    grad = addOp(g, "aten.mul", Phase::Bwd, 1000, {grad, chain[i]}, 4096);
  grad = addOp(g, "aten.mul", Phase::Bwd, 10, {grad, big}, 4096);
  g.addOutput(grad);
  DeviceProfile device = testDeviceProfile();
  device.d2hBytesPerSec = device.h2dBytesPerSec = 64 * kMiB / 2e-3;
  device.matmulSlowdownWithCopies = device.matmulSlowdownWithBothCopies = 1.1;
  device.memoryBoundSlowdownWithCopies = 1.0;
  device.memoryBoundSlowdownWithBothCopies = 1.0;
  Plan unplanned = unplannedPlan(g, device);
  PlanOptions options;
  options.budgetBytes = unplanned.peakBytes - 60 * kMiB;
  OverheadBound bound = boundAt(g, device, options.budgetBytes, unplanned);
  ASSERT_TRUE(bound.feasible);
  // (f - 1) x 1500 us = 150 us, less the copies' fixed costs' rounding.
  EXPECT_GT(bound.stepUs - unplanned.stepUs, 140.0);
  options.solver = SolverKind::Fast;
  llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  expectAbove(*plan, bound, "auto");
  expectPricedAbove(g, device, options, unplanned, *plan, "auto");
}

TEST(BoundTest, NeverAbovePlansWhenOnlyOneWayCopiesSlowKernels) {
  EXPECT_GT(checkPoliciesAndRandomDecisions(oneWayProfile(1.5)), 100);
  // Two ranks sharing a host that reaches 1.5 times one GPU's link: each
  // rank's copies move at 0.75 of their lone rate, or less both ways.
  EXPECT_GT(checkPoliciesAndRandomDecisions(oneWayProfile(1.5, 2, 1.5)), 100);
}

TEST(BoundTest, ContentionSplitChargesOneWayCopies) {
  // With copies free both ways at once, the bound without the split is the
  // bound without contention (every copy priced as moving both ways); with
  // it, wherever the relaxation needs offloaded bytes absent at a node
  // that must free the most, their copies before it move one way, and the
  // bound rises. It never falls: the rows only add.
  const DeviceProfile plain = testDeviceProfile();
  DeviceProfile contended = oneWayProfile(1.5);
  // The same copy rates and fixed costs as `plain`, so that only the
  // kernels' slowdown differs.
  contended.duplexFactor = plain.duplexFactor;
  contended.copySlowdownWithMatmul = 1.0;
  contended.copySlowdownWithMemoryBound = 1.0;
  contended.copySlowdownWithCollectives = 1.0;
  contended.d2hFixedUs = plain.d2hFixedUs;
  contended.h2dFixedUs = plain.h2dFixedUs;
  int raised = 0, cases = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(7000 + seed);
    Plan unplanned = unplannedPlan(g, plain);
    for (double fraction : {0.45, 0.6, 0.75, 0.9}) {
      int64_t budget = static_cast<int64_t>(fraction * unplanned.peakBytes);
      OverheadBound without = boundAt(g, plain, budget, unplanned);
      OverheadBound with = boundAt(g, contended, budget, unplanned);
      if (!without.feasible)
        continue;
      ++cases;
      EXPECT_GE(with.stepUs, without.stepUs * (1 - 1e-6));
      raised += with.stepUs > without.stepUs * (1 + 1e-6);
    }
  }
  std::cout << "[ note     ] the contention split raised the bound in "
            << raised << " of " << cases << " cases\n";
  EXPECT_GT(raised, cases / 4);
}

} // namespace

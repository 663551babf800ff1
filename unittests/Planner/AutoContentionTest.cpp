//===- AutoContentionTest.cpp - Copies priced beside their kernels -------===//
//
// A moving host copy slows the kernels beside it: matrix products by the
// profile's factor, memory-bound kernels only where their memory traffic is
// near their whole time. The greedy prices every copy at the step's average
// loss; refine's last pass prices an offload's copies over the windows they
// run in (AutoSolverContention.cpp), and switches a recompute to an offload
// whose copies meet only kernels that lose nothing.
//
//===----------------------------------------------------------------------===//

#include "BoundTestSupport.h"
#include "RandomGraph.h"

#include "lethe/Planner/Planner.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

constexpr int64_t kMiB = 1 << 20;

/// x -> w = mm [20 ms, a matrix product] -> big = mul [64 MiB, 60 us] -> 300
/// tanh nodes [30 us, 4 KiB each: light memory-bound kernels that lose
/// nothing beside copies] -> late = gelu [16 MiB] -> dear = exp [64 MiB, 5
/// ms] -> relu [64 MiB, the peak] -> sum; the backward reads dear and late,
/// the tanh outputs in reverse [30 us each], big, then w [20 ms, a matrix
/// product]. dear's and late's copies cannot hide (the backward reads them
/// first), so the offload-all seed is slow, and dropping dear too makes the
/// least peak far below the budget's (refine switches nothing within two
/// levels of it); the 300 small activations keep the ladder's swaps and
/// flips (graphs of at most 256) off: what is left to switch big is
/// refine's.
TrainingGraph contendedGraph(ValueId &big) {
  TrainingGraph g;
  ValueId x = g.addInput(kMiB, InputKind::Input);
  ValueId w = addOp(g, "aten.mm", Phase::Fwd, 20000, {x}, 4096, NodeFlagMatrix);
  big = addOp(g, "aten.mul", Phase::Fwd, 60, {w}, 64 * kMiB);
  std::vector<ValueId> chain{big};
  for (int i = 0; i < 300; ++i)
    chain.push_back(
        addOp(g, "aten.tanh", Phase::Fwd, 30, {chain.back()}, 4096));
  ValueId late =
      addOp(g, "aten.gelu", Phase::Fwd, 20, {chain.back()}, 16 * kMiB);
  ValueId dear = addOp(g, "aten.exp", Phase::Fwd, 5000, {late}, 64 * kMiB);
  ValueId tmp = addOp(g, "aten.relu", Phase::Fwd, 20, {dear}, 64 * kMiB);
  ValueId grad = addOp(g, "aten.sum", Phase::Fwd, 10, {tmp}, 4096);
  g.addOutput(grad);
  grad = addOp(g, "aten.mul", Phase::Bwd, 20, {grad, dear}, 4096);
  grad = addOp(g, "aten.mul", Phase::Bwd, 20, {grad, late}, 4096);
  for (int i = static_cast<int>(chain.size()) - 1; i >= 1; --i)
    grad = addOp(g, "aten.mul", Phase::Bwd, 30, {grad, chain[i]}, 4096);
  grad = addOp(g, "aten.mul", Phase::Bwd, 60, {grad, big}, 4096);
  grad =
      addOp(g, "aten.mm", Phase::Bwd, 20000, {grad, w}, 4096, NodeFlagMatrix);
  g.addOutput(grad);
  return g;
}

TEST(AutoContentionTest, OffloadsWhereItsCopiesMeetKernelsThatLoseNothing) {
  // The step's average loss per copy microsecond is about 4.5% (the two
  // 20-ms matrix products at 4.9%, the rest at the memory-bound 3.7%), so
  // big's copies (1.22 ms each way) are priced at about 110 us, above its
  // 60-us re-run: the greedy recomputes it (and so did auto before the
  // pass). Its copies run beside the tanh nodes and their backward, which
  // lose nothing; offloaded, the step pays only the copies' waits (none on
  // this profile).
  ValueId big = -1;
  TrainingGraph g = contendedGraph(big);
  DeviceProfile device = contendedTestDeviceProfile();
  Plan unplanned = unplannedPlan(g, device);
  PlanOptions options;
  options.budgetBytes = unplanned.peakBytes - 32 * kMiB;
  llvm::Expected<Plan> plan = planTrainingStep(g, device, options);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  EXPECT_LE(plan->peakBytes, options.budgetBytes);
  const ActivationDecision *bigDecision = nullptr;
  for (const ActivationDecision &d : plan->decisions)
    if (d.value == big)
      bigDecision = &d;
  ASSERT_NE(bigDecision, nullptr);
  EXPECT_EQ(bigDecision->decision, Decision::Offload);
  // Recomputing costs the 60-us re-run; the offload nothing.
  EXPECT_LT(plan->stepUs - unplanned.stepUs, 1.0);
}

} // namespace

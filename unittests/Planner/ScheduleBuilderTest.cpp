//===- ScheduleBuilderTest.cpp - The builder's schedule and its figures ---===//
//
// The schedule builder writes the frees, the memory walk and the per-node
// order of copies from its own bookkeeping (a counting sort of the frees,
// the walk read off the buffers' lives, the per-node lists sorted by a
// counting sort); these tests check each against the schedule itself, on
// random graphs and plans, building into recycled schedules as the
// evaluator does.
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Simulator/Simulator.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// Each buffer freed by its last reader is freed there, each op's frees in
/// increasing order, and a release or prefetch frees what it copied.
void expectFreesAtLastUse(const Schedule &schedule) {
  std::vector<OpIndex> lastUse(schedule.buffers.size(), -1);
  for (auto [k, op] : llvm::enumerate(schedule.ops)) {
    for (BufferId b : op.allocs)
      lastUse[b] = std::max<OpIndex>(lastUse[b], k);
    for (BufferId b : op.reads)
      lastUse[b] = std::max<OpIndex>(lastUse[b], k);
  }
  for (auto [k, op] : llvm::enumerate(schedule.ops)) {
    EXPECT_TRUE(llvm::is_sorted(op.frees)) << "op " << k;
    if (op.kind == ScheduleOpKind::Release ||
        op.kind == ScheduleOpKind::Prefetch)
      continue;
    for (BufferId b : op.frees)
      EXPECT_EQ(lastUse[b], static_cast<OpIndex>(k)) << "buffer " << b;
  }
}

/// The copies after each node: offloads, then releases, then prefetches;
/// offloads and releases by activation, prefetches by restore point, then
/// activation (ScheduleBuilder.cpp's program order).
void expectCopyOrder(const ActivationAnalysis &analysis,
                     const Placement &placement, const Schedule &schedule) {
  using Key = std::tuple<int, NodeId, int32_t>;
  std::vector<Key> group;
  auto check = [&] {
    EXPECT_TRUE(llvm::is_sorted(group)) << "copies out of order";
    group.clear();
  };
  for (const ScheduleOp &op : schedule.ops) {
    if (op.kind == ScheduleOpKind::Node ||
        op.kind == ScheduleOpKind::Recompute) {
      check();
      continue;
    }
    int32_t a = analysis.activationIndex(op.storage);
    ASSERT_GE(a, 0);
    switch (op.kind) {
    case ScheduleOpKind::Offload:
      group.push_back({0, 0, a});
      break;
    case ScheduleOpKind::Release:
      group.push_back({1, 0, a});
      break;
    default:
      group.push_back({2, placement.decisions[a].firstBackwardUse, a});
      break;
    }
  }
  check();
}

TEST(ScheduleBuilderTest, FreesWalkAndOrderAreTheSchedules) {
  const DeviceProfile device = testDeviceProfile();
  size_t built = 0, withCopies = 0, withChains = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    const ActivationAnalysis &analysis = step.analysis;
    const size_t numActs = analysis.getActivations().size();
    std::vector<Decision> decisions(numActs, Decision::Retain);
    std::vector<CopyHint> hints(numActs);
    // The last schedule, built into again (its ops overwritten).
    Schedule recycled;
    for (int trial = 0; trial < 40; ++trial) {
      changeSomeDecisions(analysis, step.rng, decisions, hints);
      llvm::Expected<Placement> placed =
          placeDecisions(analysis, device, decisions, hints);
      if (!placed) {
        llvm::consumeError(placed.takeError());
        decisions.assign(numActs, Decision::Retain);
        continue;
      }
      MemoryWalk walk;
      llvm::Expected<Schedule> schedule = buildSchedule(
          analysis, placed->decisions, std::move(recycled), &walk);
      ASSERT_TRUE(static_cast<bool>(schedule))
          << llvm::toString(schedule.takeError());
      EXPECT_FALSE(static_cast<bool>(schedule->verify()));
      MemoryWalk want = walkMemory(*schedule);
      EXPECT_EQ(walk.deviceAtOp, want.deviceAtOp);
      EXPECT_EQ(walk.peakBytes, want.peakBytes);
      EXPECT_EQ(walk.peakOp, want.peakOp);
      EXPECT_EQ(walk.hostPeakBytes, want.hostPeakBytes);
      expectFreesAtLastUse(*schedule);
      expectCopyOrder(analysis, *placed, *schedule);
      ++built;
      withCopies += want.hostPeakBytes > 0;
      withChains += llvm::any_of(schedule->ops, [](const ScheduleOp &op) {
        return op.kind == ScheduleOpKind::Recompute;
      });
      recycled = std::move(*schedule);
    }
  }
  // The plans copy and recompute.
  EXPECT_GT(built, 1500u);
  EXPECT_GT(withCopies, 500u);
  EXPECT_GT(withChains, 500u);
}

/// The simulator takes the host's issue times as the ops' start bounds
/// without a copy where nothing else bounds them: the same run as with
/// bounds given (all 0, which bound nothing), merged with them.
TEST(ScheduleBuilderTest, IssueTimesBoundStartsAsGivenBoundsDo) {
  DeviceProfile device = testDeviceProfile();
  device.hostLaunchUs = 7.0;
  device.waitUs = 2.0;
  device.eventRecordUs = 1.0;
  device.graphLaunchUs = 5.0;
  size_t simulated = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededAnalysis step(seed);
    const ActivationAnalysis &analysis = step.analysis;
    const size_t numActs = analysis.getActivations().size();
    std::vector<Decision> decisions(numActs, Decision::Retain);
    std::vector<CopyHint> hints(numActs);
    for (int trial = 0; trial < 10; ++trial) {
      changeSomeDecisions(analysis, step.rng, decisions, hints);
      llvm::Expected<Placement> placed =
          placeDecisions(analysis, device, decisions, hints);
      if (!placed) {
        llvm::consumeError(placed.takeError());
        decisions.assign(numActs, Decision::Retain);
        continue;
      }
      llvm::Expected<Schedule> schedule =
          buildSchedule(analysis, placed->decisions);
      ASSERT_TRUE(static_cast<bool>(schedule));
      for (LaunchMode launch : {LaunchMode::Eager, LaunchMode::Graph}) {
        SimOptions options;
        options.launch = launch;
        llvm::Expected<SimResult> x = simulate(*schedule, device, options);
        options.earliestStartUs.assign(schedule->ops.size(), 0.0);
        llvm::Expected<SimResult> y = simulate(*schedule, device, options);
        ASSERT_TRUE(x && y);
        EXPECT_EQ(x->stepUs, y->stepUs);
        EXPECT_EQ(x->exposedCopyUs, y->exposedCopyUs);
        ASSERT_EQ(x->timeline.size(), y->timeline.size());
        for (size_t k = 0; k < x->timeline.size(); ++k)
          EXPECT_TRUE(x->timeline[k].startUs == y->timeline[k].startUs &&
                      x->timeline[k].endUs == y->timeline[k].endUs)
              << "op " << k;
        ++simulated;
      }
    }
  }
  EXPECT_GT(simulated, 400u);
}

} // namespace

//===- SimulatorTest.cpp - The discrete-event simulator
//--------------------===//

#include "ScheduleOps.h"

#include "lethe/Simulator/Simulator.h"

#include <gtest/gtest.h>

using namespace lethe;
using lethe::testing::copyOp;

namespace {

DeviceProfile copyDevice() {
  DeviceProfile device;
  device.name = "test";
  // 1000 bytes per microsecond in each direction.
  device.d2hBytesPerSec = 1e9;
  device.h2dBytesPerSec = 1e9;
  device.duplexFactor = 0.5;
  device.collectiveSlowdownWithCopies = 2.0;
  device.collectiveSlowdownWithBothCopies = 4.0;
  device.copySlowdownWithCollectives = 0.5;
  return device;
}

ScheduleOp computeOp(double us, std::vector<OpIndex> deps = {}) {
  ScheduleOp op;
  op.kind = ScheduleOpKind::Node;
  op.stream = Stream::Compute;
  op.durationUs = us;
  op.deps.assign(deps.begin(), deps.end());
  return op;
}

TEST(SimulatorTest, ComputeStreamRunsInProgramOrder) {
  Schedule s;
  s.ops = {computeOp(10), computeOp(5), computeOp(2.5)};
  llvm::Expected<SimResult> r = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->stepUs, 17.5);
  EXPECT_DOUBLE_EQ(r->timeline[1].startUs, 10);
  EXPECT_DOUBLE_EQ(r->busyUs[0], 17.5);
  EXPECT_DOUBLE_EQ(r->exposedCopyUs, 0);
}

TEST(SimulatorTest, CopiesOverlapComputeAndExposeWaits) {
  Schedule s;
  // compute 10us, then a 20,000-byte D2H copy (20us alone) that overlaps
  // 5us of compute; a compute op that needs the copy waits 15us.
  s.ops = {computeOp(10), copyOp(ScheduleOpKind::Offload, 20000, {0}),
           computeOp(5), computeOp(1, {1})};
  llvm::Expected<SimResult> r = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[1].startUs, 10);
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 30);
  EXPECT_DOUBLE_EQ(r->timeline[3].startUs, 30);
  EXPECT_DOUBLE_EQ(r->exposedCopyUs, 15);
  EXPECT_DOUBLE_EQ(r->stepUs, 31);
  EXPECT_DOUBLE_EQ(r->busyUs[static_cast<unsigned>(Stream::D2H)], 20);
}

TEST(SimulatorTest, DuplexCopiesShareTheLink) {
  Schedule s;
  // Both directions copy 10,000 bytes at once: each runs at half rate while
  // the other runs, so both end at 20us instead of 10us.
  s.ops = {copyOp(ScheduleOpKind::Offload, 10000),
           copyOp(ScheduleOpKind::Prefetch, 10000)};
  llvm::Expected<SimResult> r = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 20);
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 20);
}

TEST(SimulatorTest, RatesChangeWhenAnOverlapEnds) {
  Schedule s;
  // D2H 5,000 bytes and H2D 15,000 bytes start together at half rate; the
  // D2H ends at 10us (5,000 bytes at 500 B/us), having moved 5,000 of the
  // H2D bytes; the last 10,000 run at full rate: 10us more.
  s.ops = {copyOp(ScheduleOpKind::Offload, 5000),
           copyOp(ScheduleOpKind::Prefetch, 15000)};
  llvm::Expected<SimResult> r = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 10);
  EXPECT_NEAR(r->timeline[1].endUs, 20, 1e-9);
}

TEST(SimulatorTest, CollectivesSlowDownBesideCopies) {
  Schedule s;
  ScheduleOp coll;
  coll.kind = ScheduleOpKind::Node;
  coll.stream = Stream::Comm;
  coll.durationUs = 10;
  s.ops = {coll, copyOp(ScheduleOpKind::Offload, 5000)};
  llvm::Expected<SimResult> r = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  // Both slowed by 2x: the copy needs 5us alone -> 10us; by then the
  // collective has done 5 of its 10us; the rest runs alone.
  EXPECT_NEAR(r->timeline[1].endUs, 10, 1e-9);
  EXPECT_NEAR(r->timeline[0].endUs, 15, 1e-9);
}

TEST(SimulatorTest, CollectivesSlowDownMoreBesideBothDirections) {
  Schedule s;
  ScheduleOp coll;
  coll.kind = ScheduleOpKind::Node;
  coll.stream = Stream::Comm;
  coll.durationUs = 10;
  // Both copies run at half rate (duplex) for 20us; the collective at a
  // quarter rate meanwhile does 5 of its 10us, then runs alone.
  s.ops = {coll, copyOp(ScheduleOpKind::Offload, 10000),
           copyOp(ScheduleOpKind::Prefetch, 10000)};
  DeviceProfile device = copyDevice();
  device.copySlowdownWithCollectives = 1.0;
  llvm::Expected<SimResult> r = simulate(s, device);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_NEAR(r->timeline[1].endUs, 20, 1e-9);
  EXPECT_NEAR(r->timeline[0].endUs, 25, 1e-9);
}

ScheduleOp commOp(double us, std::vector<OpIndex> deps = {}) {
  ScheduleOp op;
  op.kind = ScheduleOpKind::Node;
  op.stream = Stream::Comm;
  op.durationUs = us;
  op.deps.assign(deps.begin(), deps.end());
  return op;
}

TEST(SimulatorTest, BothCopyDirectionsSlowCollectivesMore) {
  DeviceProfile device = copyDevice();
  device.collectiveSlowdownWithBothCopies = 4.0;
  Schedule s;
  // D2H and H2D of 5,000 bytes each beside a 10us collective: each copy
  // runs at 0.5 (duplex) x 0.5 (beside a collective) = 250 B/us, 20us; the
  // collective at 1/4 rate does 5us of work by then and ends 5us later.
  s.ops = {commOp(10), copyOp(ScheduleOpKind::Offload, 5000),
           copyOp(ScheduleOpKind::Prefetch, 5000)};
  llvm::Expected<SimResult> r = simulate(s, device);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_NEAR(r->timeline[1].endUs, 20, 1e-9);
  EXPECT_NEAR(r->timeline[2].endUs, 20, 1e-9);
  EXPECT_NEAR(r->timeline[0].endUs, 25, 1e-9);

  // A profile with only the one-direction factor uses it for both.
  device.collectiveSlowdownWithBothCopies = 1.0;
  r = simulate(s, device);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_NEAR(r->timeline[0].endUs, 20, 1e-9);
}

TEST(SimulatorTest, EarliestStartTimesDelayOps) {
  Schedule s;
  // Compute 5us released at 10us; a comm op released at 3us runs while the
  // compute stream waits; the next compute op follows its predecessor.
  s.ops = {computeOp(5), commOp(4), computeOp(1)};
  SimOptions options;
  options.earliestStartUs = {10, 3, 0};
  llvm::Expected<SimResult> r = simulate(s, copyDevice(), options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[0].startUs, 10);
  EXPECT_DOUBLE_EQ(r->timeline[1].startUs, 3);
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 7);
  EXPECT_DOUBLE_EQ(r->timeline[2].startUs, 15);
  EXPECT_DOUBLE_EQ(r->stepUs, 16);

  // A copy running while a release time passes keeps its rate.
  s.ops = {copyOp(ScheduleOpKind::Offload, 10000), computeOp(2)};
  options.earliestStartUs = {0, 4};
  r = simulate(s, copyDevice(), options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 10);
  EXPECT_DOUBLE_EQ(r->timeline[1].startUs, 4);

  // A copy released while a compute op runs alone starts then, beside it
  // (the compute op alone is stepped apart from the rates), and slows it
  // from then on.
  s.ops = {computeOp(100), copyOp(ScheduleOpKind::Offload, 20000)};
  s.ops[0].kernel = KernelClass::Matrix;
  options.earliestStartUs = {0, 30};
  DeviceProfile slowed = copyDevice();
  slowed.matmulSlowdownWithCopies = 2.0;
  r = simulate(s, slowed, options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[1].startUs, 30);
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 50);
  // 30 us alone, 10 us of work in the 20 us beside the copy, 60 alone.
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 110);

  options.earliestStartUs = {1};
  EXPECT_FALSE(static_cast<bool>(simulate(s, copyDevice(), options)));
  llvm::consumeError(simulate(s, copyDevice(), options).takeError());
}

TEST(SimulatorTest, SeparatingCopiesFromCollectivesRemovesContention) {
  Schedule s;
  // As in CollectivesSlowDownBesideCopies, but the copy is kept out of the
  // collective's window: collective 0-10us, copy 10-15us, no slowdown.
  s.ops = {commOp(10), copyOp(ScheduleOpKind::Offload, 5000), commOp(2),
           copyOp(ScheduleOpKind::Prefetch, 3000), computeOp(1)};
  Schedule separated = separateCopiesFromCollectives(s);
  EXPECT_EQ(std::vector<OpIndex>(separated.ops[1].deps.begin(),
                                 separated.ops[1].deps.end()),
            std::vector<OpIndex>({0}));
  EXPECT_EQ(std::vector<OpIndex>(separated.ops[2].deps.begin(),
                                 separated.ops[2].deps.end()),
            std::vector<OpIndex>({1}));
  EXPECT_EQ(std::vector<OpIndex>(separated.ops[3].deps.begin(),
                                 separated.ops[3].deps.end()),
            std::vector<OpIndex>({2}));
  EXPECT_TRUE(separated.ops[4].deps.empty());
  ASSERT_FALSE(static_cast<bool>(separated.verify()));
  llvm::Expected<SimResult> r = simulate(separated, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 10);
  EXPECT_DOUBLE_EQ(r->timeline[1].startUs, 10);
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 15);
  EXPECT_DOUBLE_EQ(r->timeline[2].startUs, 15);
  EXPECT_DOUBLE_EQ(r->timeline[2].endUs, 17);
  EXPECT_DOUBLE_EQ(r->timeline[3].endUs, 20);
  EXPECT_DOUBLE_EQ(r->busyUs[static_cast<unsigned>(Stream::Comm)], 12);

  // Overlapped, the same ops take longer on the comm stream.
  r = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_GT(r->busyUs[static_cast<unsigned>(Stream::Comm)], 12);
}

TEST(SimulatorTest, CopiesCanYieldToCollectives) {
  Schedule s;
  // The copy (5us alone) starts first; the collective (10us) is released
  // at 2us: the copy pauses from 2us to 12us and ends at 15us, the
  // collective runs at full rate.
  s.ops = {copyOp(ScheduleOpKind::Offload, 5000), commOp(10)};
  SimOptions options;
  options.copiesYieldToCollectives = true;
  options.earliestStartUs = {0, 2};
  llvm::Expected<SimResult> r = simulate(s, copyDevice(), options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[1].startUs, 2);
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 12);
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 15);
  EXPECT_DOUBLE_EQ(r->busyUs[static_cast<unsigned>(Stream::Comm)], 10);

  // Overlapping instead, both slow down: the collective takes longer.
  options.copiesYieldToCollectives = false;
  r = simulate(s, copyDevice(), options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_GT(r->timeline[1].endUs, 12);
}

TEST(SimulatorTest, AYieldingCopyFinishesItsChunkBesideTheCollective) {
  Schedule s;
  // As in CopiesCanYieldToCollectives, with 1500-byte chunks (1.5us): at
  // 2us the copy is 0.5us into its second chunk, so it goes on for 1us of
  // its work beside the collective (at half rate: 2us, the collective at
  // half rate too), then pauses until the collective ends.
  s.ops = {copyOp(ScheduleOpKind::Offload, 5000), commOp(10)};
  SimOptions options;
  options.copiesYieldToCollectives = true;
  options.yieldChunkBytes = 1500;
  options.earliestStartUs = {0, 2};
  llvm::Expected<SimResult> r = simulate(s, copyDevice(), options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  // Collective: 1us of its work in 2us (x2 slower), then 9us alone.
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 13);
  EXPECT_DOUBLE_EQ(r->busyUs[static_cast<unsigned>(Stream::Comm)], 11);
  // Copy: 2us + 1us done when paused at 4us, the last 2us after 13us.
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 15);

  // A chunk boundary right at the collective's start: no overlap.
  options.earliestStartUs = {0, 1.5};
  r = simulate(s, copyDevice(), options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->busyUs[static_cast<unsigned>(Stream::Comm)], 10);

  // A copy that starts during the collective waits for all of it.
  s.ops = {commOp(10), copyOp(ScheduleOpKind::Offload, 5000)};
  options.earliestStartUs = {0, 1};
  r = simulate(s, copyDevice(), options);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[0].endUs, 10);
  EXPECT_DOUBLE_EQ(r->timeline[1].endUs, 15);
}

TEST(SimulatorTest, MemoryFollowsProgramOrder) {
  Schedule s;
  s.buffers = {{0, 100, BufferOrigin::Produced},
               {1, 50, BufferOrigin::Produced},
               {0, 100, BufferOrigin::Host}};
  ScheduleOp a = computeOp(1);
  a.allocs = {0};
  ScheduleOp b = computeOp(1);
  b.allocs = {1};
  b.reads = {0};
  ScheduleOp c = copyOp(ScheduleOpKind::Offload, 100, {0});
  c.reads = {0};
  c.allocs = {2};
  ScheduleOp d = computeOp(1);
  d.frees = {0, 1};
  s.ops = {a, b, c, d};
  ASSERT_FALSE(static_cast<bool>(s.verify()));
  s.ops[3].reads = {1};
  s.ops.push_back(computeOp(1));
  s.ops.back().reads = {0};
  llvm::Error useAfterFree = s.verify();
  ASSERT_TRUE(static_cast<bool>(useAfterFree));
  EXPECT_NE(llvm::toString(std::move(useAfterFree)).find("already freed"),
            std::string::npos);
  s.ops.pop_back();
  llvm::Expected<SimResult> r = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->peakBytes, 150);
  EXPECT_EQ(r->hostPeakBytes, 100);
  EXPECT_EQ(r->memoryAtOp, (std::vector<int64_t>{100, 150, 150, 150}));
  EXPECT_EQ(r->memoryCurve.back().bytes, 0);
}

TEST(SimulatorTest, ReportsDeadlocksAndBadSchedules) {
  Schedule s;
  s.ops = {computeOp(1, {1}), computeOp(1)};
  llvm::Error bad = s.verify();
  ASSERT_TRUE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(std::move(bad)).find("does not precede"),
            std::string::npos);
  llvm::Expected<SimResult> r = simulate(s, copyDevice());
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("deadlock"), std::string::npos);

  Schedule copy;
  copy.ops = {copyOp(ScheduleOpKind::Offload, 10)};
  DeviceProfile none;
  none.name = "nocopy";
  llvm::Expected<SimResult> r2 = simulate(copy, none);
  ASSERT_FALSE(static_cast<bool>(r2));
  EXPECT_NE(llvm::toString(r2.takeError()).find("D2H bandwidth"),
            std::string::npos);
}

// The planner's copy costs are the simulator's rates for the same
// situation: a lone offload and a prefetch beside an offload, each rank
// getting its share of the host, plus the fixed costs.
TEST(SimulatorTest, PlannedCopyCostsMatchTheSimulatedCopies) {
  DeviceProfile device = copyDevice();
  device.duplexFactor = 0.8;
  device.d2hFixedUs = 2.0;
  device.h2dFixedUs = 3.0;
  device.hostD2HBytesPerSec = 1.5e9;
  device.hostH2DBytesPerSec = 2e9;
  device.hostBothBytesPerSec = 1.2e9;
  // One rank: D2H alone at 1000 B/us; H2D beside D2H at 0.8 of its rate,
  // both directions (1600 B/us) capped at the host's 1200: 600 each, 0.6
  // of its rate, which slows its fixed cost too (3 / 0.6).
  PlannedCopyCosts one = plannedCopyCosts(device);
  EXPECT_DOUBLE_EQ(one.d2hUs(10000), 12.0);
  EXPECT_DOUBLE_EQ(one.h2dUs(6000), 15.0);
  // Two ranks: D2H alone capped at 1500 / 2 = 750 B/us, its fixed cost
  // slowed with it (2 / 0.75); beside D2H, 750 + 800 scaled to the host's
  // 1200 / 2 = 600 together: H2D at 309.7 B/us, 0.387 of its rate.
  device.ranksPerHost = 2;
  PlannedCopyCosts two = plannedCopyCosts(device);
  EXPECT_DOUBLE_EQ(two.d2hUs(7500), 10.0 + 2.0 / 0.75);
  EXPECT_DOUBLE_EQ(two.h2dUs(6000), (6.0 + 3.0) / (0.8 * 600.0 / 1550.0));
  // The simulator charges a lone offload the same.
  Schedule s;
  s.ops = {copyOp(ScheduleOpKind::Offload, 7500)};
  llvm::Expected<SimResult> r = simulate(s, device);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->stepUs, two.d2hUs(7500));
  // No host figures: the lone rates.
  PlannedCopyCosts plain = plannedCopyCosts(copyDevice());
  EXPECT_DOUBLE_EQ(plain.d2hUs(1000), 1.0);
  EXPECT_DOUBLE_EQ(plain.h2dUs(1000), 2.0);
}

} // namespace

namespace {

// SimOptions::stopAfterUs: a simulation stops only where its step is certain
// to exceed the limit (the compute stream's work left alone passes it), and
// otherwise gives the whole simulation's figures.
TEST(SimulatorTest, StopsOnlyPastTheLimit) {
  Schedule s;
  // 10 us of compute, a 4000-byte (4 us) offload after the first op, then
  // 20 us more compute: the step is 30 us, the copy hidden.
  s.ops = {computeOp(10), copyOp(ScheduleOpKind::Offload, 4000, {0}),
           computeOp(20)};
  llvm::Expected<SimResult> whole = simulate(s, copyDevice());
  ASSERT_TRUE(static_cast<bool>(whole)) << llvm::toString(whole.takeError());
  EXPECT_DOUBLE_EQ(whole->stepUs, 30.0);
  EXPECT_FALSE(whole->stopped);
  for (double limit : {29.0, 1.0, 0.0}) {
    SimOptions options;
    options.stopAfterUs = limit;
    llvm::Expected<SimResult> r = simulate(s, copyDevice(), options);
    ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
    // 30 us of compute is known from the start: it stops at once.
    EXPECT_TRUE(r->stopped) << limit;
    EXPECT_EQ(r->stepUs, std::numeric_limits<double>::infinity());
    // The memory is walked all the same.
    EXPECT_EQ(r->memoryAtOp, whole->memoryAtOp);
  }
  for (double limit : {30.0, 31.0}) {
    SimOptions options;
    options.stopAfterUs = limit;
    llvm::Expected<SimResult> r = simulate(s, copyDevice(), options);
    ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
    EXPECT_FALSE(r->stopped) << limit;
    EXPECT_EQ(r->stepUs, whole->stepUs);
    EXPECT_EQ(r->exposedCopyUs, whole->exposedCopyUs);
  }
  // A wait for a copy: 16 us of compute, but the last op waits for a 20 us
  // copy and the step is 31 us. Past 25 us it stops once the copy is done;
  // at 31 us it runs to the end.
  Schedule waits;
  waits.ops = {computeOp(10), copyOp(ScheduleOpKind::Offload, 20000, {0}),
               computeOp(5), computeOp(1, {1})};
  for (auto [limit, stops] : {std::pair(25.0, true), std::pair(31.0, false)}) {
    SimOptions options;
    options.stopAfterUs = limit;
    llvm::Expected<SimResult> r = simulate(waits, copyDevice(), options);
    ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
    EXPECT_EQ(r->stopped, stops) << limit;
    if (!stops)
      EXPECT_DOUBLE_EQ(r->stepUs, 31.0);
  }
}

} // namespace

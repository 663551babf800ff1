//===- TimeModelTest.cpp - What running a plan costs, in the simulator ----===//
//
// The terms of the time model beyond op times (lethe/Simulator/Simulator.h):
// kernels and copies slowing each other, per-copy fixed costs, the host's
// bandwidth shared by its ranks, eager and CUDA-graph launch costs; that a
// profile without these figures predicts exactly what it did before; and
// the planner on the graph corpus planning against a profile that has them.
//
//===----------------------------------------------------------------------===//

#include "../Planner/GraphFile.h"
#include "ScheduleOps.h"

#include "lethe/Planner/Planner.h"
#include "lethe/Simulator/Simulator.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <random>

using namespace lethe;
using lethe::testing::copyOp;

namespace {

/// 1000 bytes per microsecond each way, nothing else.
DeviceProfile linkDevice() {
  DeviceProfile device;
  device.name = "link";
  device.d2hBytesPerSec = 1e9;
  device.h2dBytesPerSec = 1e9;
  return device;
}

ScheduleOp kernelOp(double us, KernelClass kernel,
                    std::vector<OpIndex> deps = {}) {
  ScheduleOp op;
  op.kind = ScheduleOpKind::Node;
  op.stream = Stream::Compute;
  op.durationUs = us;
  op.kernel = kernel;
  op.deps.assign(deps.begin(), deps.end());
  return op;
}

SimResult run(const Schedule &s, const DeviceProfile &device,
              LaunchMode launch = LaunchMode::Eager) {
  SimOptions options;
  options.launch = launch;
  llvm::Expected<SimResult> r = simulate(s, device, options);
  EXPECT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  return r ? std::move(*r) : SimResult();
}

TEST(TimeModelTest, AMatrixKernelSlowsBesideACopy) {
  Schedule s;
  // A 20 us copy beside a 100 us matrix product that runs twice as slow
  // while it copies: 10 us of its work in those 20 us, 90 after.
  s.ops = {copyOp(ScheduleOpKind::Offload, 20000),
           kernelOp(100, KernelClass::Matrix)};
  DeviceProfile device = linkDevice();
  device.matmulSlowdownWithCopies = 2.0;
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 110);
  // The memory-bound factor does not apply to a matrix product.
  device.matmulSlowdownWithCopies = 1.0;
  device.memoryBoundSlowdownWithCopies = 2.0;
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 100);
  s.ops[1].kernel = KernelClass::MemoryBound;
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 110);
  // An op that launches no kernel is not slowed.
  s.ops[1].kernel = KernelClass::None;
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 100);
}

TEST(TimeModelTest, OnlyAMemoryBoundKernelsTrafficSlowsBesideCopies) {
  // A 20 us copy beside a 100 us memory-bound kernel, copies slowing
  // memory traffic x2, the profile's memory kernel streaming 1e12 B/s (1e6
  // bytes per us). The kernel's time is max(100, 2 x its bytes' time).
  Schedule s;
  s.buffers = {{-1, 50'000'000, BufferOrigin::Produced},
               {-1, 50'000'000, BufferOrigin::Produced}};
  s.ops = {copyOp(ScheduleOpKind::Offload, 20000),
           kernelOp(100, KernelClass::MemoryBound)};
  s.ops[1].reads = {0};
  s.ops[1].allocs = {1};
  DeviceProfile device = linkDevice();
  device.memoryBoundSlowdownWithCopies = 2.0;
  device.memoryKernelBytesPerSec = 1e12;
  // 100 MB read and written: 100 us at that rate, the whole kernel's time:
  // x2 beside the copy, as without a rate (10 us of work in 20 us).
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 110);
  // 50 MB: 50 us of traffic, doubled 100 us: the kernel's slack absorbs it.
  s.buffers[1].bytes = 0;
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 100);
  // 75 MB: x1.5 while the copy runs (20 us for 13.33 us of work).
  s.buffers[1].bytes = 25'000'000;
  EXPECT_NEAR(run(s, device).stepUs, 100 + 20 - 20 / 1.5, 1e-9);
  // No rate in the profile: the whole factor, as before.
  device.memoryKernelBytesPerSec = 0;
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 110);
}

TEST(TimeModelTest, BothDirectionsUseTheirOwnFactor) {
  Schedule s;
  s.ops = {copyOp(ScheduleOpKind::Offload, 20000),
           copyOp(ScheduleOpKind::Prefetch, 20000),
           kernelOp(100, KernelClass::Matrix)};
  DeviceProfile device = linkDevice();
  device.matmulSlowdownWithCopies = 2.0;
  device.matmulSlowdownWithBothCopies = 4.0;
  // Both copies for 20 us: 5 us of work; 95 after.
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 115);
}

TEST(TimeModelTest, CopiesHaveAFixedCostAndSlowBesideKernels) {
  Schedule s;
  s.ops = {copyOp(ScheduleOpKind::Offload, 20000),
           kernelOp(100, KernelClass::MemoryBound), kernelOp(1, {}, {0})};
  s.ops[2].kernel = KernelClass::MemoryBound;
  DeviceProfile device = linkDevice();
  device.d2hFixedUs = 4;
  device.copySlowdownWithMemoryBound = 0.5;
  // 24 us of work at half rate: 48 us.
  SimResult r = run(s, device);
  EXPECT_DOUBLE_EQ(r.busyUs[static_cast<unsigned>(Stream::D2H)], 48);
  EXPECT_DOUBLE_EQ(r.stepUs, 101);
}

TEST(TimeModelTest, RanksOfAHostShareItsBandwidth) {
  Schedule s;
  s.ops = {copyOp(ScheduleOpKind::Offload, 30000)};
  DeviceProfile device = linkDevice();
  // The host reaches 1.5 links' worth: one rank keeps its link, two get
  // 750 bytes/us each, three 500.
  device.hostD2HBytesPerSec = 1.5e9;
  for (auto [ranks, us] : {std::pair<int64_t, double>{1, 30},
                           {2, 40},
                           {3, 60}}) {
    device.ranksPerHost = ranks;
    EXPECT_DOUBLE_EQ(run(s, device).stepUs, us) << ranks << " ranks";
  }
}

TEST(TimeModelTest, EagerStepsAreBoundByTheHost) {
  Schedule s;
  for (int i = 0; i < 10; ++i)
    s.ops.push_back(kernelOp(1, KernelClass::MemoryBound));
  DeviceProfile device = linkDevice();
  device.hostLaunchUs = 5;
  // Enqueued every 5 us, each runs 1 us: the last starts at 45 us.
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 46);
  // A CUDA graph has no host bound; its kernels run back to back, none
  // shorter than the replay floor, after the graph's launch.
  device.graphKernelUs = 2;
  device.graphLaunchUs = 3;
  EXPECT_DOUBLE_EQ(run(s, device, LaunchMode::Graph).stepUs, 23);
}

TEST(TimeModelTest, WaitsAndRecordsCostTheirStreams) {
  Schedule s;
  s.ops = {kernelOp(10, KernelClass::MemoryBound),
           copyOp(ScheduleOpKind::Offload, 10000, {0}),
           kernelOp(1, KernelClass::None, {1})};
  DeviceProfile device = linkDevice();
  device.waitUs = 2;
  device.eventRecordUs = 0.5;
  device.graphWaitUs = 1;
  // Eager: 10 + 0.5 (record), the copy 2 + 10 + 0.5, the release 2 + 1.
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 26);
  // Graph: no records, 1 us per wait.
  EXPECT_DOUBLE_EQ(run(s, device, LaunchMode::Graph).stepUs, 23);
}

TEST(TimeModelTest, OnlyWaitsTheStreamsDoNotImplyCost) {
  Schedule s;
  // Two compute ops read what one copy brought; the second need not wait
  // again (its stream already did). A copy issued after a compute op that
  // waited for an earlier copy of the same stream needs no wait either.
  s.ops = {copyOp(ScheduleOpKind::Prefetch, 10000),
           kernelOp(5, KernelClass::MemoryBound, {0}),
           kernelOp(5, KernelClass::MemoryBound, {0}),
           kernelOp(5, KernelClass::MemoryBound, {0})};
  DeviceProfile device = linkDevice();
  device.waitUs = 2;
  // 10 us copy, one wait of 2 us, three 5 us kernels.
  EXPECT_DOUBLE_EQ(run(s, device).stepUs, 27);
  // A dependency on an op the stream's earlier wait already covered (the
  // copy before the one waited for) costs nothing.
  Schedule t;
  t.ops = {copyOp(ScheduleOpKind::Prefetch, 10000),
           copyOp(ScheduleOpKind::Prefetch, 10000),
           kernelOp(5, KernelClass::MemoryBound, {1}),
           kernelOp(5, KernelClass::MemoryBound, {0})};
  EXPECT_DOUBLE_EQ(run(t, device).stepUs, 32);
}

/// Random schedules over the four streams with cross-stream dependencies.
Schedule randomSchedule(std::mt19937 &rng) {
  std::uniform_int_distribution<int> kind(0, 5), size(1, 40);
  Schedule s;
  int n = 20 + static_cast<int>(rng() % 40);
  for (int i = 0; i < n; ++i) {
    std::vector<OpIndex> deps;
    if (i > 0 && rng() % 3 == 0)
      deps.push_back(static_cast<OpIndex>(rng() % i));
    switch (kind(rng)) {
    case 0:
      s.ops.push_back(copyOp(ScheduleOpKind::Offload, size(rng) * 1000, deps));
      break;
    case 1:
      s.ops.push_back(
          copyOp(ScheduleOpKind::Prefetch, size(rng) * 1000, deps));
      break;
    case 2: {
      ScheduleOp comm = kernelOp(size(rng), KernelClass::MemoryBound, deps);
      comm.stream = Stream::Comm;
      s.ops.push_back(comm);
      break;
    }
    default:
      s.ops.push_back(kernelOp(size(rng),
                               rng() % 2 ? KernelClass::Matrix
                                         : KernelClass::MemoryBound,
                               deps));
    }
  }
  return s;
}

TEST(TimeModelTest, NeutralFiguresPredictAsBefore) {
  std::mt19937 rng(17);
  DeviceProfile before = linkDevice();
  before.duplexFactor = 0.8;
  before.collectiveSlowdownWithCopies = 1.3;
  before.copySlowdownWithCollectives = 0.7;
  // Figures that change nothing: factors of 1, host figures no rank can
  // reach, no launch costs (every CUDA-graph figure 0 too).
  DeviceProfile neutral = before;
  neutral.hostD2HBytesPerSec = neutral.hostH2DBytesPerSec = 4e9;
  neutral.hostBothBytesPerSec = 8e9;
  for (int trial = 0; trial < 200; ++trial) {
    Schedule s = randomSchedule(rng);
    SimResult a = run(s, before);
    for (LaunchMode launch : {LaunchMode::Eager, LaunchMode::Graph}) {
      SimResult b = run(s, neutral, launch);
      ASSERT_EQ(a.timeline.size(), b.timeline.size());
      for (size_t i = 0; i < a.timeline.size(); ++i) {
        EXPECT_EQ(a.timeline[i].startUs, b.timeline[i].startUs);
        EXPECT_EQ(a.timeline[i].endUs, b.timeline[i].endUs);
      }
      EXPECT_EQ(a.stepUs, b.stepUs);
      EXPECT_EQ(a.exposedCopyUs, b.exposedCopyUs);
    }
  }
}

TEST(TimeModelTest, MoreRanksPerHostNeverShortenTheStep) {
  std::mt19937 rng(42);
  DeviceProfile device = linkDevice();
  device.duplexFactor = 0.9;
  device.hostD2HBytesPerSec = 1.6e9;
  device.hostH2DBytesPerSec = 1.2e9;
  device.hostBothBytesPerSec = 2.0e9;
  for (int trial = 0; trial < 200; ++trial) {
    Schedule s = randomSchedule(rng);
    double previous = 0.0;
    for (int64_t ranks : {1, 2, 4, 8}) {
      device.ranksPerHost = ranks;
      double step = run(s, device).stepUs;
      EXPECT_GE(step, previous - 1e-6) << "trial " << trial << ", " << ranks;
      previous = step;
    }
  }
}

/// The corpus graphs: the auto planner against a profile with every run
/// cost (the calibrated H200) finds plans that fit their budget and whose
/// predicted step is the simulated one.
TEST(TimeModelTest, CorpusPlansAgainstRunCosts) {
  std::string calibrated = std::string(LETHE_SOURCE_DIR) +
                           "/bench/results/calibrate/h200-calibrated.json";
  llvm::Expected<DeviceProfile> device = DeviceProfile::load(calibrated);
  ASSERT_TRUE(static_cast<bool>(device)) << llvm::toString(device.takeError());
  ASSERT_GT(device->hostLaunchUs, 0.0);
  std::error_code ec;
  std::vector<std::string> paths;
  for (llvm::sys::fs::directory_iterator it(LETHE_GRAPHS_DIR, ec), end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name.starts_with("graph_") && name.ends_with(".json"))
      paths.push_back(it->path());
  }
  llvm::sort(paths);
  // The first two in name order keep the test short.
  ASSERT_GE(paths.size(), 2u);
  paths.resize(2);
  for (const std::string &path : paths) {
    llvm::StringRef name = llvm::sys::path::filename(path);
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module;
    llvm::Expected<TrainingGraph> graph =
        lethe::testing::loadGraphFile(path, context, module);
    ASSERT_TRUE(bool(graph)) << llvm::toString(graph.takeError());
    PlanOptions options;
    options.policy = Policy::None;
    llvm::Expected<Plan> none = planTrainingStep(*graph, *device, options);
    ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
    options.policy = Policy::Auto;
    options.budgetBytes = none->peakBytes / 2;
    llvm::Expected<Plan> plan = planTrainingStep(*graph, *device, options);
    ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
    ASSERT_TRUE(plan->feasible) << name.str();
    EXPECT_LE(plan->peakBytes, options.budgetBytes) << name.str();
    EXPECT_GE(plan->stepUs, none->stepUs * (1 - 1e-9)) << name.str();
    llvm::Expected<SimResult> sim =
        simulatePlan(*graph, *device, options, *plan);
    ASSERT_TRUE(static_cast<bool>(sim)) << llvm::toString(sim.takeError());
    EXPECT_DOUBLE_EQ(sim->stepUs, plan->stepUs) << name.str();
  }
}

} // namespace

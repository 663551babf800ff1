//===- PipelineScheduleTest.cpp - 1F1B and interleaved orders -------------===//

#include "lethe/Analysis/PipelineSchedule.h"

#include "llvm/ADT/STLExtras.h"

#include "gtest/gtest.h"

#include <set>
#include <tuple>

using namespace lethe;

namespace {

std::string order(int stages, int stage, int microbatches,
                  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB,
                  int vpp = 1) {
  PipelineOptions options{stages, microbatches, kind, vpp};
  EXPECT_FALSE(static_cast<bool>(verifyPipelineOptions(options)));
  return formatPipelineSteps(pipelineSchedule(options, stage), options);
}

// The textbook 1F1B orders (PipeDream-flush; Narayanan et al. 2021, fig. 4
// top): stage S warms up with P-S-1 forwards.
TEST(PipelineScheduleTest, OneFOneBTwoStagesFourMicrobatches) {
  EXPECT_EQ(order(2, 0, 4), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(order(2, 1, 4), "F0 B0 F1 B1 F2 B2 F3 B3");
}

TEST(PipelineScheduleTest, OneFOneBFourStagesEightMicrobatches) {
  EXPECT_EQ(order(4, 0, 8), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(order(4, 1, 8), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(order(4, 2, 8), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  EXPECT_EQ(order(4, 3, 8), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(PipelineScheduleTest, OneFOneBFewerMicrobatchesThanStages) {
  // Warm-up is capped by the micro-batches there are.
  EXPECT_EQ(order(4, 0, 2), "F0 F1 B0 B1");
  EXPECT_EQ(order(4, 3, 2), "F0 B0 F1 B1");
}

// Megatron-LM's interleaved schedule: chunks in groups of P micro-batches,
// warm-up (P-S-1)*2 + (V-1)*P forwards. "F2.1" is micro-batch 2 on the
// stage's second chunk.
TEST(PipelineScheduleTest, InterleavedTwoStagesTwoChunks) {
  auto kind = PipelineScheduleKind::Interleaved;
  EXPECT_EQ(order(2, 0, 4, kind, 2),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 "
            "B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(order(2, 1, 4, kind, 2),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 "
            "F3.1 B3.1 B2.0 B3.0");
}

TEST(PipelineScheduleTest, InterleavedAllWarmupWhenMicrobatchesEqualStages) {
  auto kind = PipelineScheduleKind::Interleaved;
  EXPECT_EQ(order(2, 1, 2, kind, 2), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
}

TEST(PipelineScheduleTest, OptionErrors) {
  auto message = [](PipelineOptions options) {
    return llvm::toString(verifyPipelineOptions(options));
  };
  EXPECT_EQ(message({0, 4, PipelineScheduleKind::OneFOneB, 1}),
            "stages must be >= 1, got 0");
  EXPECT_EQ(message({2, 0, PipelineScheduleKind::OneFOneB, 1}),
            "microbatches must be >= 1, got 0");
  EXPECT_EQ(message({2, 4, PipelineScheduleKind::OneFOneB, 2}),
            "the 1f1b schedule has one chunk per stage (vpp=1); use "
            "schedule=interleaved for vpp=2");
  EXPECT_EQ(message({4, 6, PipelineScheduleKind::Interleaved, 2}),
            "the interleaved schedule runs micro-batches in groups of "
            "stages: microbatches (6) must be a multiple of stages (4)");
  EXPECT_EQ(symbolizePipelineScheduleKind("interleaved"),
            PipelineScheduleKind::Interleaved);
  EXPECT_EQ(symbolizePipelineScheduleKind("gpipe"), std::nullopt);
}

/// Checks every stage's schedule of a chain of chunks (chunk c feeds c+1)
/// as `lethe-expand-pipeline-schedule` emits it: the sends of a unit and the
/// receives of the next form one group. Returns an empty string when every
/// step runs exactly once, in an order that respects the chain's
/// dependencies, and checkPipelineCommunication accepts the groups.
std::string
checkCommunication(const PipelineOptions &options,
                   const std::vector<std::vector<PipelineStep>> &orders) {
  int stages = options.stages, chunks = stages * options.vpp;
  // Message id of the output of (phase, chunk, mb).
  auto message = [&](Phase phase, int chunk, int microbatch) {
    return (int64_t(phase) * chunks + chunk) * options.microbatches +
           microbatch;
  };
  std::vector<PipelineCommGroups> groups(stages);
  for (int stage = 0; stage < stages; ++stage) {
    const std::vector<PipelineStep> &steps = orders[stage];
    if (static_cast<int>(steps.size()) !=
        2 * options.vpp * options.microbatches)
      return "stage " + std::to_string(stage) + " has the wrong step count";
    std::set<std::tuple<int, int, int>> seen;
    std::vector<PipelineCommOp> group; // sends of the last unit, receives
    int unit = -1;
    for (const PipelineStep &step : steps) {
      if (step.chunk % stages != stage)
        return "stage runs a chunk of another stage";
      if (!seen.insert({int(step.phase), step.chunk, step.microbatch}).second)
        return "a step runs twice";
      if (step.phase == Phase::Bwd &&
          !seen.count({int(Phase::Fwd), step.chunk, step.microbatch}))
        return "a backward runs before its forward";
      if (step.unit != unit) {
        if (step.unit != unit + 1)
          return "units are not numbered in order";
        unit = step.unit;
        for (const PipelineStep &other : steps) {
          if (other.unit != unit)
            continue;
          bool fwd = other.phase == Phase::Fwd;
          int from = fwd ? other.chunk - 1 : other.chunk + 1;
          if (from >= 0 && from < chunks && from % stages != stage)
            group.push_back({false, from % stages,
                             message(other.phase, from, other.microbatch)});
        }
        groups[stage].push_back(std::move(group));
        group.clear();
      }
      bool fwd = step.phase == Phase::Fwd;
      int from = fwd ? step.chunk - 1 : step.chunk + 1;
      if (from >= 0 && from < chunks && from % stages == stage &&
          !seen.count({int(step.phase), from, step.microbatch}))
        return "a step runs before its same-stage input";
      int to = fwd ? step.chunk + 1 : step.chunk - 1;
      if (to >= 0 && to < chunks && to % stages != stage)
        group.push_back({true, to % stages,
                         message(step.phase, step.chunk, step.microbatch)});
    }
    groups[stage].push_back(std::move(group));
  }
  return checkPipelineCommunication(groups);
}

std::string checkCommunication(const PipelineOptions &options) {
  std::vector<std::vector<PipelineStep>> orders;
  for (int stage = 0; stage < options.stages; ++stage)
    orders.push_back(pipelineSchedule(options, stage));
  return checkCommunication(options, orders);
}

TEST(PipelineScheduleTest, OneFOneBCommunicatesWithoutDeadlock) {
  for (int stages : {1, 2, 3, 4, 8})
    for (int microbatches : {1, 2, 3, 4, 5, 8, 16}) {
      PipelineOptions options{stages, microbatches,
                              PipelineScheduleKind::OneFOneB, 1};
      EXPECT_EQ(checkCommunication(options), "")
          << "P=" << stages << " M=" << microbatches;
    }
}

TEST(PipelineScheduleTest, InterleavedCommunicatesWithoutDeadlock) {
  for (int stages : {1, 2, 3, 4, 8})
    for (int groups : {1, 2, 3, 4})
      for (int vpp : {1, 2, 3, 4}) {
        PipelineOptions options{stages, stages * groups,
                                PipelineScheduleKind::Interleaved, vpp};
        EXPECT_EQ(checkCommunication(options), "")
            << "P=" << stages << " M=" << stages * groups << " V=" << vpp;
      }
}

// The checker can fail: the orders above pass because they are right.
TEST(PipelineScheduleTest, CheckerRejectsBrokenOrders) {
  PipelineOptions options{2, 4, PipelineScheduleKind::OneFOneB, 1};
  std::vector<std::vector<PipelineStep>> orders = {
      pipelineSchedule(options, 0), pipelineSchedule(options, 1)};
  // The last stage taking micro-batches in another order than the first
  // sends them: the pair's messages disagree.
  std::swap(orders[1][0].microbatch, orders[1][2].microbatch);
  std::swap(orders[1][1].microbatch, orders[1][3].microbatch);
  EXPECT_EQ(checkCommunication(options, orders),
            "stage 0 sends 4 messages to stage 1, which receives 4, in "
            "another order");

  // Megatron's interleaved order with a communication group after every
  // step instead of every forward + backward pair deadlocks.
  PipelineOptions interleaved{2, 4, PipelineScheduleKind::Interleaved, 2};
  orders = {pipelineSchedule(interleaved, 0), pipelineSchedule(interleaved, 1)};
  for (std::vector<PipelineStep> &steps : orders)
    for (auto [index, step] : llvm::enumerate(steps))
      step.unit = index;
  EXPECT_EQ(checkCommunication(interleaved, orders),
            "deadlock: stage 0 waits in group 6");

  // A backward before its forward.
  orders = {pipelineSchedule(options, 0), pipelineSchedule(options, 1)};
  std::swap(orders[1][0], orders[1][1]);
  std::swap(orders[1][0].unit, orders[1][1].unit);
  EXPECT_EQ(checkCommunication(options, orders),
            "a backward runs before its forward");
}

} // namespace

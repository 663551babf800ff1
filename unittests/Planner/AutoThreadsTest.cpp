//===- AutoThreadsTest.cpp - auto's searches on several threads -----------===//
//
// The `auto` solver forks searches whose results the serial code compares
// afterwards to other threads (docs/Planner.md, "Threads"). The plans must
// be those of one thread, decision for decision and to the bit, and so must
// the evaluations the solve counts (refine's budget is a share of them).
//
//===----------------------------------------------------------------------===//

#include "GraphFile.h"
#include "RandomGraph.h"
#include "SameSolution.h"

#include "../../lib/Planner/Workers.h"

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Planner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

using namespace lethe;
using namespace lethe::testing;

namespace {

TEST(WorkersTest, WorkRunsOnceWhereWaitedForAndNeverWhereDiscardedFirst) {
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    autosolver::Workers workers(threads);
    std::vector<std::atomic<int>> runs(64);
    std::vector<std::shared_ptr<autosolver::Workers::Task>> tasks;
    for (size_t i = 0; i < runs.size(); ++i)
      tasks.push_back(workers.spawn([&runs, i] { ++runs[i]; }));
    // One thread: nothing runs until waited for.
    if (threads == 1)
      for (std::atomic<int> &count : runs)
        EXPECT_EQ(count.load(), 0);
    for (size_t i = 0; i < runs.size(); ++i) {
      if (i % 2) {
        tasks[i]->wait();
        EXPECT_EQ(runs[i].load(), 1);
      } else {
        tasks[i]->discard();
      }
    }
    for (size_t i = 0; i < runs.size(); i += 2) {
      tasks[i]->wait();
      EXPECT_LE(runs[i].load(), 1);
      if (threads == 1)
        EXPECT_EQ(runs[i].load(), 0);
    }
    EXPECT_EQ(workers.getSpawned(), runs.size());
  }
}

TEST(WorkersTest, ThreadsAsAskedElseTheIdleCoresWithin) {
  EXPECT_EQ(autosolver::Workers::choose(3, 4), 3u);
  EXPECT_EQ(autosolver::Workers::choose(0, 1), 1u);
  unsigned chosen = autosolver::Workers::choose(0, 4);
  EXPECT_GE(chosen, 1u);
  EXPECT_LE(chosen, 4u);
}

/// Solves `g` at `fraction` of its unplanned peak with one thread and with
/// `threads`: the same solution, and the same evaluations counted. Returns
/// the forks of the threaded solve.
size_t expectSameSolutions(const TrainingGraph &g, const DeviceProfile &device,
                           double fraction, unsigned threads) {
  PlanOptions options;
  ActivationAnalysis analysis(g, options);
  Evaluator evaluator(analysis, device);
  std::optional<int64_t> budget =
      budgetAtFraction(evaluator, analysis, fraction);
  if (!budget)
    return 0;
  options.budgetBytes = *budget;
  options.threads = 1;
  size_t before = evaluator.getEvaluations();
  llvm::Expected<AutoSolution> serial = solveAuto(evaluator, options, {});
  const size_t serialEvaluations = evaluator.getEvaluations() - before;
  options.threads = threads;
  before = evaluator.getEvaluations();
  llvm::Expected<AutoSolution> threaded = solveAuto(evaluator, options, {});
  const size_t threadedEvaluations = evaluator.getEvaluations() - before;
  EXPECT_TRUE(serial && threaded);
  if (!serial || !threaded)
    return 0;
  expectSameSolution(*serial, *threaded);
  EXPECT_EQ(serialEvaluations, threadedEvaluations);
  EXPECT_EQ(serial->forks, 0u);
  return threaded->forks;
}

TEST(AutoThreadsTest, SamePlansOnRandomGraphs) {
  const DeviceProfile device = testDeviceProfile();
  size_t forks = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph g = randomLayeredGraph(14000 + seed);
    for (double fraction : {0.3, 0.5, 0.7, 0.9}) {
      SCOPED_TRACE("fraction " + std::to_string(fraction));
      // 4 on any machine: the swaps fork up to three ahead, and a fork's
      // own forks find every thread busy at times.
      forks += expectSameSolutions(g, device, fraction, seed % 2 ? 2 : 4);
    }
  }
  EXPECT_GT(forks, 0u);
}

class AutoThreadsOnSharedGraphs : public CorpusGraphTest {};

// The whole planner (seeds, the family, refine's floor solves) on the
// corpus's slowest solves: the plan JSON's every field but the time.
TEST_P(AutoThreadsOnSharedGraphs, SamePlans) {
  PlanOptions options;
  options.policy = Policy::None;
  llvm::Expected<Plan> none = planTrainingStep(*graph, *device, options);
  ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
  options.policy = Policy::Auto;
  for (int percent : {30, 40, 50}) {
    SCOPED_TRACE("budget " + std::to_string(percent) + "%");
    options.budgetBytes = none->peakBytes * percent / 100;
    options.threads = 1;
    llvm::Expected<Plan> serial = planTrainingStep(*graph, *device, options);
    options.threads = 4;
    llvm::Expected<Plan> threaded = planTrainingStep(*graph, *device, options);
    ASSERT_TRUE(serial && threaded);
    EXPECT_EQ(serial->feasible, threaded->feasible);
    EXPECT_EQ(serial->peakBytes, threaded->peakBytes);
    EXPECT_EQ(serial->stepUs, threaded->stepUs);
    EXPECT_EQ(serial->leastFeasibleBudget, threaded->leastFeasibleBudget);
    expectSameDecisions(*serial, *threaded);
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, AutoThreadsOnSharedGraphs,
                         ::testing::Values("graph_bert_base.json",
                                           "graph_llama8l.json"));

} // namespace

//===- SharedGraphsTest.cpp - The planner on the bundled real graphs ------===//
//
// The real exported steps in graphs/ (GPT-2, ResNet-50) through the JSON
// importer: the planner's unplanned peak is the lifetime analysis's, and a
// plan called feasible fits its budget when simulated again. On the
// transformers, `full` (which keeps each block's input: checkpoints) peaks
// no higher than `every-n`, as torch.utils.checkpoint on every block does.
//
//===----------------------------------------------------------------------===//

#include "GraphFile.h"

#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace lethe;

namespace {

class SharedGraphs : public lethe::testing::CorpusGraphTest {};

TEST_P(SharedGraphs, PlansFitAndAgreeWithLifetimes) {

  Lifetimes lifetimes(*graph);
  MemoryProfile profile = MemoryProfile::compute(lifetimes);
  PlanOptions options;
  options.policy = Policy::None;
  llvm::Expected<Plan> none = planTrainingStep(*graph, *device, options);
  ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
  EXPECT_EQ(none->peakBytes, profile.peakBytes);

  for (Policy policy : {Policy::Auto, Policy::Full, Policy::SelectiveOp}) {
    options.policy = policy;
    options.budgetBytes = none->peakBytes * 6 / 10;
    llvm::Expected<Plan> plan = planTrainingStep(*graph, *device, options);
    ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
    if (policy == Policy::Auto)
      EXPECT_TRUE(plan->feasible) << infeasibleMessage(*plan);
    if (!plan->feasible)
      continue;
    EXPECT_LE(plan->peakBytes, options.budgetBytes);
    llvm::Expected<SimResult> sim =
        simulatePlan(*graph, *device, options, *plan);
    ASSERT_TRUE(static_cast<bool>(sim)) << llvm::toString(sim.takeError());
    EXPECT_EQ(sim->peakBytes, plan->peakBytes);
    EXPECT_DOUBLE_EQ(sim->stepUs, plan->stepUs);
  }
}

class Transformers : public lethe::testing::CorpusGraphTest {};

TEST_P(Transformers, FullPeaksNoHigherThanEveryN) {
  PlanOptions options;
  options.policy = Policy::Full;
  llvm::Expected<Plan> full = planTrainingStep(*graph, *device, options);
  ASSERT_TRUE(static_cast<bool>(full)) << llvm::toString(full.takeError());
  options.policy = Policy::EveryN;
  llvm::Expected<Plan> everyN = planTrainingStep(*graph, *device, options);
  ASSERT_TRUE(static_cast<bool>(everyN)) << llvm::toString(everyN.takeError());
  EXPECT_LE(full->peakBytes, everyN->peakBytes);
  EXPECT_LT(full->peakBytes, full->baselinePeakBytes);
}

INSTANTIATE_TEST_SUITE_P(Graphs, Transformers,
                         ::testing::Values("graph_gpt2.json",
                                           "graph_llama8l.json",
                                           "graph_qwen2_gqa.json"));

INSTANTIATE_TEST_SUITE_P(Graphs, SharedGraphs,
                         ::testing::Values("graph_gpt2.json",
                                           "graph_resnet50.json"));

} // namespace

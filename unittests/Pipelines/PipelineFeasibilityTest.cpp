//===- PipelineFeasibilityTest.cpp - Compiling is monotone in the budget --===//
//
// runLethePipeline (what `lethe compile` runs) on random graphs and on the
// bundled graphs, one of them as an interleaved pipeline stage (whose
// micro-batches die first in, first out and pack above max-live), at a
// grid of budgets:
// - it succeeds at the least budget findLeastPipelineBudget reports (what
//   `lethe plan` states for a budget that is too small) and fails a byte
//   below it;
// - it succeeds at a budget exactly when the budget is at least that least,
//   so success at B implies success at every larger budget;
// - a compiled program's arena and max-live are within the budget;
// - the plan `lethe plan` reports (planStep, then agreeWithPipeline, which
//   compiles that plan without planning it again where it packs into the
//   budget) is the one the pipeline keeps: planStep's for the pipeline's
//   plan budget, decision for decision.
//
//===----------------------------------------------------------------------===//

#include "../Planner/RandomGraph.h"
#include "../Transforms/EmitGraph.h"

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Import/JsonImporter.h"
#include "lethe/Pipelines/Pipelines.h"
#include "lethe/Planner/AutoSolver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace mlir;
using namespace lethe;
using namespace lethe::testing;

namespace {

struct Compiled {
  bool ok = false;
  /// The budget asked for, resolved (a percentage of the aligned unplanned
  /// peak).
  int64_t budget = -1;
  int attempts = 0;
  std::string errors;
};

class PipelineFeasibility : public ::testing::Test {
protected:
  PipelineFeasibility() {
    registerLethePasses();
    context.loadDialect<LetheDialect, func::FuncDialect>();
  }

  /// The module's step: its one function with a body.
  static func::FuncOp stepFunction(ModuleOp module) {
    func::FuncOp func;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        func = f;
    return func;
  }

  Compiled compile(ModuleOp base, LethePipelineConfig config,
                   const std::string &budget) {
    Compiled result;
    OwningOpRef<ModuleOp> module = base.clone();
    config.plan.budget = budget;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        result.errors += diag.str() + "\n";
      return success();
    });
    PipelineOutcome outcome;
    result.ok = succeeded(runLethePipeline(*module, config, &outcome));
    result.budget = outcome.budgetBytes;
    result.attempts = outcome.attempts;
    if (!result.ok) {
      // A failure for the budget states the least budget that is met.
      EXPECT_TRUE(outcome.leastBudgetBytes.has_value()) << result.errors;
      return result;
    }
    auto bytes = [&](StringRef name) {
      return (*module)->getAttrOfType<IntegerAttr>(name).getInt();
    };
    EXPECT_LE(bytes(LetheDialect::DeviceArenaBytesAttrHelper::getNameStr()),
              result.budget);
    EXPECT_LE(bytes(LetheDialect::MaxLiveBytesAttrHelper::getNameStr()),
              result.budget);
    return result;
  }

  /// Checks the properties of the file comment on `base` at `percents` of
  /// its unplanned peak; returns the compiles that re-planned.
  int checkMonotone(ModuleOp base, const LethePipelineConfig &config,
                    llvm::ArrayRef<int> percents) {
    int replanned = 0;
    FailureOr<int64_t> least = findLeastPipelineBudget(base, config);
    EXPECT_TRUE(succeeded(least));
    if (failed(least))
      return replanned;
    Compiled atLeast = compile(base, config, std::to_string(*least));
    EXPECT_TRUE(atLeast.ok)
        << "at the least budget " << *least << ": " << atLeast.errors;
    replanned += atLeast.attempts > 1;
    if (*least > 0) {
      Compiled below = compile(base, config, std::to_string(*least - 1));
      EXPECT_FALSE(below.ok) << "a byte below the least budget " << *least;
    }
    for (int percent : percents) {
      Compiled at = compile(base, config, std::to_string(percent) + "%");
      SCOPED_TRACE(std::to_string(percent) +
                   "% = " + std::to_string(at.budget) + " B, least " +
                   std::to_string(*least) + " B");
      EXPECT_EQ(at.ok, at.budget >= *least) << at.errors;
      replanned += at.ok && at.attempts > 1;
    }
    return replanned;
  }

  /// `lethe plan`'s route (planStep, agreeWithPipeline) against the
  /// pipeline's at `budget`: the same feasibility and, when feasible, the
  /// plan planStep makes for the pipeline's plan budget. Returns whether
  /// the pipeline re-planned for packing.
  bool checkPlanAgrees(ModuleOp base, const LethePipelineConfig &config,
                       const std::string &budget) {
    SCOPED_TRACE("budget " + budget);
    OwningOpRef<ModuleOp> module = base.clone();
    ScopedDiagnosticHandler quiet(&context,
                                  [](Diagnostic &) { return success(); });
    func::FuncOp func = stepFunction(*module);
    llvm::Expected<DeviceProfile> device =
        DeviceProfile::load(config.plan.device);
    EXPECT_TRUE(static_cast<bool>(device));
    if (!func || !device) {
      llvm::consumeError(device.takeError());
      return false;
    }
    PlanActivationsOptions options = config.plan;
    options.budget = budget;
    FailureOr<PlannedStep> step =
        planStep(func, options, *device, [](const llvm::Twine &) {});
    EXPECT_TRUE(succeeded(step));
    if (failed(step))
      return false;
    LethePipelineConfig at = config;
    at.plan.budget = budget;
    EXPECT_TRUE(
        succeeded(agreeWithPipeline(*module, func, at, *device, *step)));
    OwningOpRef<ModuleOp> compiled = base.clone();
    PipelineOutcome outcome;
    bool ok = succeeded(runLethePipeline(*compiled, at, &outcome));
    EXPECT_EQ(step->plan.feasible, ok);
    if (!ok || !step->plan.feasible)
      return false;
    // The pipeline kept planStep's plan for its plan budget.
    OwningOpRef<ModuleOp> again = base.clone();
    func::FuncOp againFunc;
    for (auto f : again->getOps<func::FuncOp>())
      if (f.getSymName() == func.getSymName())
        againFunc = f;
    options.budget = std::to_string(outcome.planBudgetBytes);
    FailureOr<PlannedStep> kept =
        planStep(againFunc, options, *device, [](const llvm::Twine &) {});
    EXPECT_TRUE(succeeded(kept));
    if (failed(kept))
      return false;
    EXPECT_EQ(step->plan.peakBytes, kept->plan.peakBytes);
    EXPECT_EQ(step->plan.stepUs, kept->plan.stepUs);
    EXPECT_EQ(step->plan.decisions.size(), kept->plan.decisions.size());
    for (size_t a = 0; a < std::min(step->plan.decisions.size(),
                                    kept->plan.decisions.size());
         ++a)
      EXPECT_EQ(step->plan.decisions[a].decision,
                kept->plan.decisions[a].decision)
          << "activation " << a;
    return outcome.attempts > 1;
  }

  OwningOpRef<ModuleOp> importGraph(StringRef name) {
    std::string path = std::string(LETHE_GRAPHS_DIR) + "/" + name.str();
    auto buffer = llvm::MemoryBuffer::getFile(path);
    EXPECT_TRUE(buffer) << "cannot read " << path;
    if (!buffer)
      return nullptr;
    return importGraphJson((*buffer)->getBuffer(), path, &context);
  }

  MLIRContext context;
};

TEST_F(PipelineFeasibility, RandomGraphs) {
  std::vector<int> percents;
  for (int percent = 30; percent <= 100; percent += 5)
    percents.push_back(percent);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    RandomGraphOptions graphOptions;
    graphOptions.unitBytes = (seed % 2 ? 4 : 1) << 20;
    TrainingGraph graph = randomLayeredGraph(seed, graphOptions);
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
    emitGraph(graph, *module);
    for (const char *policy : {"auto", "full", "every-n"}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " policy " + policy);
      LethePipelineConfig config;
      config.plan.policy = policy;
      config.annotateCosts = false;
      checkMonotone(*module, config, percents);
      for (const char *budget : {"40%", "60%", "90%"})
        checkPlanAgrees(*module, config, budget);
    }
  }
}

// `lethe plan` at a budget too small: the infeasible plan builds `auto`'s
// whole ladder, and the least-budget search replays it (the families passed
// through agreeWithPipeline) instead of building it again. The least it
// states is the one a search of its own finds.
TEST_F(PipelineFeasibility, LeastSearchReusesTheInfeasiblePlansLadder) {
  for (uint64_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomGraphOptions graphOptions;
    graphOptions.unitBytes = (seed % 2 ? 4 : 1) << 20;
    TrainingGraph graph = randomLayeredGraph(seed, graphOptions);
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
    emitGraph(graph, *module);
    LethePipelineConfig config;
    config.annotateCosts = false;
    config.plan.budget = "1";
    FailureOr<int64_t> alone = findLeastPipelineBudget(*module, config);
    ASSERT_TRUE(succeeded(alone));
    ScopedDiagnosticHandler quiet(&context,
                                  [](Diagnostic &) { return success(); });
    func::FuncOp func = stepFunction(*module);
    ASSERT_TRUE(func);
    llvm::Expected<DeviceProfile> device =
        DeviceProfile::load(config.plan.device);
    ASSERT_TRUE(static_cast<bool>(device));
    auto families = std::make_shared<AutoFamilies>();
    FailureOr<PlannedStep> step = planStep(
        func, config.plan, *device, [](const llvm::Twine &) {}, families.get());
    ASSERT_TRUE(succeeded(step));
    ASSERT_FALSE(step->plan.feasible);
    ASSERT_TRUE(succeeded(
        agreeWithPipeline(*module, func, config, *device, *step, families)));
    ASSERT_TRUE(step->plan.leastFeasibleBudget.has_value());
    EXPECT_EQ(*step->plan.leastFeasibleBudget, *alone);
  }
}

// Interleaved stages pack up to 13% above max-live (docs/Parallel.md): the
// plans the budget first gives do not pack into it, and the pipeline walks
// down to one that does.
TEST_F(PipelineFeasibility, InterleavedPipelineStage) {
  OwningOpRef<ModuleOp> module = importGraph("graph_gpt2.json");
  ASSERT_TRUE(module);
  PassManager pm(&context);
  ASSERT_TRUE(succeeded(parsePassPipeline(
      "func.func(lethe-expand-pipeline-schedule{stages=2 stage=0 "
      "microbatches=4 schedule=interleaved vpp=2})",
      pm)));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  LethePipelineConfig config;
  config.plan.device = "h200-nvlink";
  int replanned = checkMonotone(*module, config, {40, 100});
  EXPECT_GT(replanned, 0);
  // `lethe plan`'s route (costs annotated once, as the driver loads the
  // graph): where the first plan does not pack, it reports the plan the
  // pipeline walks down to.
  PassManager costs(&context);
  ASSERT_TRUE(succeeded(parsePassPipeline(
      "lethe-annotate-costs{device=h200-nvlink}", costs)));
  ASSERT_TRUE(succeeded(costs.run(*module)));
  config.annotateCosts = false;
  // Budgets where the first plan does not pack since the packing search
  // (2026-11-27: at 40% and 100% it now does; of 30-100% by 5, these and
  // 55% and 95% walk).
  int walked = 0;
  for (const char *budget : {"60%", "90%"})
    walked += checkPlanAgrees(*module, config, budget);
  EXPECT_GT(walked, 0);
}

TEST_F(PipelineFeasibility, BundledGraphs) {
  // MobileNet-V3: its least plan packs above max-live (the near-peaks'
  // orders, docs/Pipeline.md), so the least the pipeline meets is a packed
  // arena, not a planned peak.
  for (const char *name :
       {"graph_gpt2.json", "graph_resnet50.json", "graph_mobilenet_v3.json"}) {
    SCOPED_TRACE(name);
    OwningOpRef<ModuleOp> module = importGraph(name);
    ASSERT_TRUE(module);
    LethePipelineConfig config;
    checkMonotone(*module, config, {40, 50, 70, 90});
  }
}

} // namespace

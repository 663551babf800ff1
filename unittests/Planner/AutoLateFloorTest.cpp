//===- AutoLateFloorTest.cpp - Refine's floor lowered after its rounds ----===//
//
// Refine never makes a plan faster than what the next budget up gets (its
// floor, which keeps the overhead non-increasing in the budget). Where the
// floor first binds only after the rounds, in the contention pass or the
// quiet copies, a solve nested at the next budget up, its refine limited,
// lowers it (AutoSolverRefine.cpp, lateFloorEvaluations); and the quiet
// prefetches try a share of their moves that the floor allows up to twice,
// a move too large for what is left skipped rather than ending the share
// (AutoSolverQuietCopies.cpp).
//
//===----------------------------------------------------------------------===//

#include "BoundTestSupport.h"
#include "GraphFile.h"

#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Planner.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// `auto`'s overhead on the corpus graph `name` at each fraction of its
/// unplanned peak, costed as `lethe plan` costs it (the files have no
/// kernel times) on the calibrated H200; each plan within its budget.
std::vector<double> overheadsAt(const char *name,
                                llvm::ArrayRef<double> fractions) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<TrainingGraph> graph;
  std::optional<DeviceProfile> device;
  if (!loadCorpusGraphAsPlanned(name, context, module, graph, device))
    return {};
  Plan unplanned = unplannedPlan(*graph, *device);
  std::vector<double> overheads;
  for (double fraction : fractions) {
    PlanOptions options;
    options.budgetBytes = static_cast<int64_t>(
        fraction * static_cast<double>(unplanned.peakBytes));
    llvm::Expected<Plan> plan = planTrainingStep(*graph, *device, options);
    if (!plan) {
      ADD_FAILURE() << llvm::toString(plan.takeError());
      return {};
    }
    EXPECT_TRUE(plan->feasible) << name << " at " << fraction;
    EXPECT_LE(plan->peakBytes, options.budgetBytes)
        << name << " at " << fraction;
    overheads.push_back(plan->stepUs / unplanned.stepUs - 1.0);
  }
  return overheads;
}

/// Mixtral-MoE at 70% of its unplanned peak: refine's rounds end above the
/// floor (the unrefined step of a member above), the passes after them go
/// under it, and the limited solve at the next budget up lowers it, 21,465
/// -> 21,424 us: 4.67% (main, the floor standing: 4.87%). The budgets above
/// get no slower plans.
TEST(AutoLateFloorTest, LoweredAfterTheRoundsOnMixtral) {
  const std::vector<double> fractions = {0.70, 0.72, 0.74, 0.76, 0.80, 0.90};
  std::vector<double> overheads =
      overheadsAt("graph_mixtral_moe.json", fractions);
  ASSERT_EQ(overheads.size(), fractions.size());
  EXPECT_LT(overheads.front(), 0.0475);
  for (size_t i = 1; i < overheads.size(); ++i)
    EXPECT_LE(overheads[i], overheads[i - 1] + 1e-12)
        << "at " << fractions[i] << " against " << fractions[i - 1];
}

/// Llama-8l at 60%: the quiet prefetches' moves all together go under the
/// floor, and the share of them it allows is taken by estimated gain, a
/// move that would pass it left out and the smaller ones after it still
/// taken: 6.74% (main, the share ending at the first such move: 6.78%).
TEST(AutoLateFloorTest, QuietPrefetchesShareSkipsLargeMovesOnLlama) {
  std::vector<double> overheads = overheadsAt("graph_llama8l.json", {0.60});
  ASSERT_EQ(overheads.size(), 1u);
  EXPECT_LT(overheads.front(), 0.0675);
}

/// Llama-8l at 40%, planned as `lethe plan` plans it: refine's floor comes
/// from solves nested three deep, which are read for their step alone and
/// left unexplained (solveAt); the plan returned is explained in full, the
/// decisions refine changed saying so.
TEST(AutoLateFloorTest, NestedSolvesLeaveTheReturnedPlanExplained) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<TrainingGraph> graph;
  std::optional<DeviceProfile> device;
  ASSERT_TRUE(loadCorpusGraphAsPlanned("graph_llama8l.json", context, module,
                                       graph, device));
  PlanOptions options;
  // `lethe plan --budget 40%`'s budget.
  options.budgetBytes = 4239825408;
  llvm::Expected<Plan> plan = planTrainingStep(*graph, *device, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE(plan->feasible);
  ASSERT_FALSE(plan->decisions.empty());
  size_t refined = 0;
  for (const ActivationDecision &d : plan->decisions) {
    EXPECT_FALSE(d.reason.empty()) << "value " << d.value;
    refined += d.reason.find("[refined: ") != std::string::npos;
  }
  EXPECT_GT(refined, 0u) << plan->stepUs;
}

/// Llama-8l and Llama-8l-timed at 40% (`lethe plan --budget 40%`'s
/// budgets): the solves nested two and three deep for refine's floor are
/// asked lazily (AutoSolverFloor.cpp), and the plans are those main gave
/// with them run to their ends (steps pinned from main before the change),
/// as `lethe plan` plans them and as solveAuto alone does. On Llama-8l-timed
/// solveAuto makes fewer evaluations (main: 1,666; lazily 1,422); on
/// Llama-8l more (1,867 -> 1,904: the runs stopped short and run again
/// count the trials the verdicts answer).
TEST(AutoLateFloorTest, NestedFloorsAskedLazilyOnLlama) {
  struct Cell {
    const char *graph;
    int64_t budget;
    double planStepUs, solveStepUs;
    size_t mostEvaluations;
  };
  for (const Cell &cell :
       {Cell{"graph_llama8l.json", 4239825408, 63765.715259058787,
             63669.621675024049, 1904},
        Cell{"graph_llama8l_timed.json", 4239827046, 77392.382971650542,
             77260.599343119291, 1665}}) {
    SCOPED_TRACE(cell.graph);
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module;
    std::optional<TrainingGraph> graph;
    std::optional<DeviceProfile> device;
    ASSERT_TRUE(
        loadCorpusGraphAsPlanned(cell.graph, context, module, graph, device));
    PlanOptions options;
    options.budgetBytes = cell.budget;
    llvm::Expected<Plan> plan = planTrainingStep(*graph, *device, options);
    ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
    EXPECT_DOUBLE_EQ(plan->stepUs, cell.planStepUs);
    ActivationAnalysis analysis(*graph, options);
    Evaluator evaluator(analysis, *device);
    llvm::Expected<AutoSolution> solution = solveAuto(evaluator, options, {});
    ASSERT_TRUE(static_cast<bool>(solution))
        << llvm::toString(solution.takeError());
    EXPECT_DOUBLE_EQ(solution->evaluation.stepUs, cell.solveStepUs);
    EXPECT_LE(evaluator.getEvaluations(), cell.mostEvaluations);
  }
}

} // namespace

//===- PipelinePropertyTest.cpp - Plan -> program, on random graphs -------===//
//
// Random layered graphs (Planner/RandomGraph.h) written as IR, planned by
// every policy at several budgets, then materialized, scheduled, allocated
// and verified:
// - lethe-verify accepts every program (explicit and allocated);
// - the simulated program has the planner's predicted peak exactly and its
//   step time within a tolerance (kStepTolerance);
// - the arena is within a few percent of max-live, and within the budget;
// - breaking a verified program (dropping an await, releasing a value early)
//   makes lethe-verify fail.
//
//===----------------------------------------------------------------------===//

#include "../Planner/RandomGraph.h"
#include "EmitGraph.h"

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanAttributes.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Simulator/ProgramSchedule.h"
#include "lethe/Simulator/Simulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace lethe;
using namespace lethe::testing;

namespace {

/// The simulated step of the program may differ from the planner's
/// prediction only where the program is stricter than the planner's model
/// (see docs/Pipeline.md, "Agreement with the planner").
constexpr double kStepTolerance = 1e-6;

/// Records `plan`, made on `graph`, on `func` (emitted from `graph`) as
/// lethe-plan does: through writePlanAttributes, on the graph of the IR.
void writePlan(func::FuncOp func, const TrainingGraph &graph,
               const Plan &plan) {
  FailureOr<TrainingGraph> fromIR = TrainingGraph::fromFunction(func);
  ASSERT_TRUE(succeeded(fromIR));
  // Nodes are in the same order; values are renumbered.
  Plan onIR = plan;
  for (ActivationDecision &d : onIR.decisions) {
    const GraphValue &value = graph.getValue(d.value);
    d.value = fromIR->getNode(value.producer).results[value.resultIndex];
  }
  writePlanAttributes(*fromIR, onIR);
}

class PipelinePropertyTest : public ::testing::Test {
protected:
  PipelinePropertyTest() {
    context.loadDialect<LetheDialect, func::FuncDialect>();
  }

  /// Runs `pipeline` on `module`; returns the diagnostics on failure.
  std::string run(ModuleOp module, StringRef pipeline) {
    std::string errors;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        errors += diag.str() + "\n";
      return success();
    });
    PassManager pm(&context);
    if (failed(parsePassPipeline(pipeline, pm)))
      return "bad pipeline";
    if (failed(pm.run(module)) && errors.empty())
      errors = "failed";
    return errors;
  }

  MLIRContext context;
};

/// Breaks a verified program by dropping one wait: a prefetched value read
/// without awaiting its copy, else a release that no longer waits for its
/// D2H copy. Returns false when the program has neither.
bool dropOneAwait(ModuleOp module) {
  AwaitOp forward;
  module.walk([&](AwaitOp await) {
    if (!forward && !await.getValues().empty() &&
        await.getValues().front().getDefiningOp<PrefetchOp>())
      forward = await;
  });
  if (forward) {
    // Every wait for that copy before the program's end goes: the forward
    // and the release of the host copy just after it.
    Value done = forward.getTimepoints().front();
    for (Operation *user : llvm::make_early_inc_range(done.getUsers()))
      if (auto release = dyn_cast<ReleaseOp>(user))
        release.getAwaitTimepointMutable().clear();
    forward.replaceAllUsesWith(forward.getValues());
    forward.erase();
    return true;
  }
  ReleaseOp release;
  module.walk([&](ReleaseOp op) {
    if (!release && op.getAwaitTimepoint() &&
        op.getAwaitTimepoint().getDefiningOp<OffloadOp>())
      release = op;
  });
  if (!release)
    return false;
  release.getAwaitTimepointMutable().clear();
  return true;
}

/// Breaks a verified program by releasing a value right after it is made,
/// before a later reader. Returns false if no release has one.
bool releaseOneEarly(ModuleOp module) {
  ReleaseOp victim;
  module.walk([&](ReleaseOp release) {
    Operation *def = release.getValue().getDefiningOp();
    if (victim || !def || !isa<NodeOp>(def) ||
        def->getBlock() != release->getBlock())
      return;
    for (Operation *user : release.getValue().getUsers())
      if (user != release && isa<NodeOp>(user))
        victim = release;
  });
  if (!victim)
    return false;
  victim->moveAfter(victim.getValue().getDefiningOp());
  victim.getAwaitTimepointMutable().clear();
  return true;
}

/// Whether the planner's schedule frees a device buffer at the end of an op
/// on another stream than compute (a collective reading it last). The
/// program must make the compute stream wait for that op before the memory
/// is reused, which the planner's model does not charge.
bool freesOffCompute(const Schedule &schedule) {
  for (const ScheduleOp &op : schedule.ops)
    if (op.stream != Stream::Compute && op.kind == ScheduleOpKind::Node)
      for (BufferId buffer : op.frees)
        if (!schedule.buffers[buffer].isHost())
          return true;
  return false;
}

TEST_F(PipelinePropertyTest, ProgramsVerifyAndAgreeWithThePlanner) {
  registerLethePasses();
  DeviceProfile device = testDeviceProfile();
  const std::vector<Policy> policies = {Policy::None,       Policy::Full,
                                        Policy::EveryN,     Policy::SelectiveOp,
                                        Policy::OffloadAll, Policy::Auto};
  int checked = 0, exact = 0, replanned = 0, brokenChecked = 0,
      replacedChecked = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    RandomGraphOptions graphOptions;
    graphOptions.unitBytes = (seed % 2 ? 4 : 1) << 20;
    TrainingGraph graph = randomLayeredGraph(seed, graphOptions);
    for (Policy policy : policies) {
      for (double fraction : {1.0, 0.7, 0.5}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " policy " +
                     stringifyPolicy(policy).str() + " budget " +
                     std::to_string(fraction));
        PlanOptions options;
        options.policy = policy;
        llvm::Expected<Plan> unbounded =
            planTrainingStep(graph, device, options);
        ASSERT_TRUE(static_cast<bool>(unbounded))
            << llvm::toString(unbounded.takeError());
        const int64_t budget = static_cast<int64_t>(
            fraction * static_cast<double>(unbounded->baselinePeakBytes));

        // Plan, compile; when packing leaves the arena over the budget,
        // plan again for a budget lowered by the overflow.
        std::optional<Plan> plan;
        OwningOpRef<ModuleOp> module;
        options.budgetBytes = budget;
        for (int attempt = 0; attempt < 4; ++attempt) {
          llvm::Expected<Plan> planned =
              planTrainingStep(graph, device, options);
          ASSERT_TRUE(static_cast<bool>(planned))
              << llvm::toString(planned.takeError());
          if (!planned->feasible)
            break;
          module = ModuleOp::create(UnknownLoc::get(&context));
          func::FuncOp func = emitGraph(graph, *module);
          ASSERT_NO_FATAL_FAILURE(writePlan(func, graph, *planned));
          (*module)->setAttr(LetheDialect::BudgetBytesAttrHelper::getNameStr(),
                             Builder(&context).getI64IntegerAttr(budget));
          std::string errors =
              run(*module, "lethe-materialize,lethe-verify{allocated=false},"
                           "lethe-schedule,lethe-verify{allocated=false},"
                           "lethe-assign-buffers");
          ASSERT_EQ(errors, "");
          int64_t arena =
              (*module)
                  ->getAttrOfType<IntegerAttr>(
                      LetheDialect::DeviceArenaBytesAttrHelper::getNameStr())
                  .getInt();
          if (arena <= budget) {
            plan = std::move(*planned);
            break;
          }
          options.budgetBytes -= arena - budget;
          ++replanned;
        }
        if (!plan)
          continue;
        ASSERT_EQ(run(*module, "lethe-verify"), "");

        FailureOr<ProgramSchedule> program =
            buildProgramSchedule(*(*module).getOps<func::FuncOp>().begin());
        ASSERT_TRUE(succeeded(program));
        llvm::Expected<SimResult> result = simulate(program->schedule, device);
        ASSERT_TRUE(static_cast<bool>(result))
            << llvm::toString(result.takeError());
        EXPECT_LE(result->peakBytes, budget);
        EXPECT_EQ(result->peakBytes, plan->peakBytes);

        // Re-placing prefetches keeps the program valid and within budget.
        if (seed % 2 == 1) {
          OwningOpRef<ModuleOp> replaced = (*module).clone();
          EXPECT_EQ(run(*replaced, "lethe-schedule{place-prefetches=true},"
                                   "lethe-verify{allocated=false}"),
                    "");
          ++replacedChecked;
        }

        // lethe-verify rejects the program once broken.
        if (seed % 4 == 0) {
          OwningOpRef<ModuleOp> broken = (*module).clone();
          if (dropOneAwait(*broken)) {
            EXPECT_NE(run(*broken, "lethe-verify"), "");
            ++brokenChecked;
          }
          broken = (*module).clone();
          if (releaseOneEarly(*broken)) {
            EXPECT_NE(run(*broken, "lethe-verify"), "");
            ++brokenChecked;
          }
        }

        ActivationAnalysis analysis(graph, options);
        llvm::Expected<Schedule> planned =
            buildSchedule(analysis, plan->decisions);
        ASSERT_TRUE(static_cast<bool>(planned));
        if (freesOffCompute(*planned)) {
          EXPECT_GE(result->stepUs, plan->stepUs * (1 - kStepTolerance));
        } else {
          EXPECT_NEAR(result->stepUs, plan->stepUs,
                      kStepTolerance * plan->stepUs);
          ++exact;
        }
        ++checked;
      }
    }
  }
  llvm::errs() << "checked " << checked << ", exact " << exact
               << ", re-planned " << replanned << ", broken " << brokenChecked
               << "\n";
  EXPECT_GT(checked, 300);
  EXPECT_GT(brokenChecked, 80);
  EXPECT_GT(replacedChecked, 150);
  EXPECT_GT(exact, checked * 3 / 4);
  // Packing meets the planner's peak nearly always.
  EXPECT_LT(replanned, checked / 20);
}

} // namespace

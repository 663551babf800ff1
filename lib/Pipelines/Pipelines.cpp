//===- Pipelines.cpp - The Lethe compilation pipeline ---------------------===//

#include "lethe/Pipelines/Pipelines.h"

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <optional>

using namespace mlir;
using namespace lethe;

LethePipelineConfig LethePipelineOptions::toConfig() const {
  LethePipelineConfig config;
  config.plan.budget = budget;
  config.plan.policy = policy;
  config.plan.everyN = everyN;
  config.plan.keepOps.assign(keepOps.begin(), keepOps.end());
  config.plan.offloadKept = offloadKept;
  config.plan.minOffloadBytes = minOffloadBytes;
  config.plan.hostBudget = hostBudget;
  config.plan.solver = solver;
  config.plan.replayRng = replayRng;
  config.device = device;
  config.contention = contention;
  config.alignment = alignment;
  config.annotateCosts = annotateCosts;
  return config;
}

void lethe::buildPlanPhase(OpPassManager &pm,
                           const LethePipelineConfig &config) {
  if (config.annotateCosts) {
    AnnotateCostsOptions costs;
    costs.device = config.device;
    pm.addPass(createAnnotateCosts(costs));
  }
  PlanActivationsOptions plan;
  plan.budget = config.plan.budget;
  plan.policy = config.plan.policy;
  plan.device = config.device;
  plan.everyN = config.plan.everyN;
  plan.keepOps.assign(config.plan.keepOps.begin(), config.plan.keepOps.end());
  plan.offloadKept = config.plan.offloadKept;
  plan.minOffloadBytes = config.plan.minOffloadBytes;
  plan.hostBudget = config.plan.hostBudget;
  plan.solver = config.plan.solver;
  plan.replayRng = config.plan.replayRng;
  // Plan the bytes the arena will hold, not the bare tensor sizes.
  plan.alignment = config.alignment;
  pm.addPass(createPlanActivations(plan));
}

void lethe::buildProgramPhase(OpPassManager &pm,
                              const LethePipelineConfig &config) {
  MaterializeOptions materialize;
  materialize.device = config.device;
  pm.addPass(createMaterialize(materialize));
  ScheduleProgramOptions schedule;
  schedule.device = config.device;
  schedule.contention = config.contention;
  pm.addPass(createScheduleProgram(schedule));
  AssignBuffersOptions buffers;
  buffers.alignment = config.alignment;
  pm.addPass(createAssignBuffers(buffers));
}

void lethe::buildLethePipeline(OpPassManager &pm,
                               const LethePipelineConfig &config) {
  buildPlanPhase(pm, config);
  buildProgramPhase(pm, config);
  pm.addPass(createVerifyProgram());
}

void lethe::buildLethePipeline(OpPassManager &pm,
                               const LethePipelineOptions &options) {
  buildLethePipeline(pm, options.toConfig());
}

namespace {
/// What `lethe-pipeline` runs: the phases as runLethePipeline runs them,
/// planning again for less when packing leaves the arena above the budget,
/// so that the textual pipeline accepts what `lethe compile` accepts. It
/// loops over whole pass pipelines, so it is the pipeline's own driver
/// rather than a pass of its own (it has no registration).
class ReplanningPipeline
    : public PassWrapper<ReplanningPipeline, OperationPass<ModuleOp>> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ReplanningPipeline)

  explicit ReplanningPipeline(LethePipelineConfig config)
      : config(std::move(config)) {}
  StringRef getArgument() const final { return "lethe-pipeline"; }
  StringRef getDescription() const final {
    return "lethe-pipeline, re-planning for fragmentation";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    // What the phases create, loaded before they run.
    OpPassManager pm(ModuleOp::getOperationName());
    buildLethePipeline(pm, config);
    pm.getDependentDialects(registry);
  }
  void runOnOperation() override {
    if (failed(runLethePipeline(getOperation(), config, nullptr,
                                /*maxReplans=*/4, /*keepRemarks=*/true)))
      signalPassFailure();
  }

private:
  LethePipelineConfig config;
};
} // namespace

void lethe::registerLethePipelines() {
  PassPipelineRegistration<LethePipelineOptions>(
      "lethe-pipeline",
      "Plan, materialize, schedule, allocate and verify a training step "
      "(lethe-annotate-costs, lethe-plan, lethe-materialize, lethe-schedule, "
      "lethe-assign-buffers, lethe-verify), planning again for less when "
      "packing leaves the arena above the budget",
      [](OpPassManager &pm, const LethePipelineOptions &options) {
        pm.addPass(std::make_unique<ReplanningPipeline>(options.toConfig()));
      });
}

static std::optional<int64_t> getI64(ModuleOp module, StringRef name) {
  if (auto attr = module->getAttrOfType<IntegerAttr>(name))
    return attr.getInt();
  return std::nullopt;
}

static void recordDecisions(ModuleOp module, PipelineOutcome &outcome) {
  outcome.decisions.clear();
  module.walk([&](NodeOp node) {
    auto decisions = node->getAttrOfType<ArrayAttr>("lethe.decisions");
    if (!decisions)
      return;
    for (auto [index, entry] : llvm::enumerate(decisions)) {
      auto decision = dyn_cast<DecisionAttr>(entry);
      if (!decision || index >= node->getNumResults())
        continue;
      PipelineOutcome::Decision record;
      record.node =
          node.getName() ? node.getName()->str() : node.getKind().str();
      if (auto id = node->getAttrOfType<IntegerAttr>(kNodeIdAttr))
        record.nodeId = id.getInt();
      record.result = index;
      record.bytes = getTypeBytes(node->getResult(index).getType());
      record.decision = stringifyDecision(decision.getValue()).str();
      outcome.decisions.push_back(std::move(record));
    }
  });
}

LogicalResult lethe::runLethePipeline(ModuleOp module,
                                      const LethePipelineConfig &config,
                                      PipelineOutcome *outcome,
                                      int maxReplans, bool keepRemarks) {
  MLIRContext *context = module.getContext();
  PipelineOutcome local;
  PipelineOutcome &result = outcome ? *outcome : local;
  // Remarks are for lethe-opt users; the driver prints its own summary.
  ScopedDiagnosticHandler dropRemarks(context, [keepRemarks](Diagnostic &diag) {
    return success(!keepRemarks &&
                   diag.getSeverity() == DiagnosticSeverity::Remark);
  });

  LethePipelineConfig attempt = config;
  int64_t lastArena = 0;
  for (result.attempts = 1; result.attempts <= maxReplans + 1;
       ++result.attempts) {
    OwningOpRef<ModuleOp> work = module.clone();
    PassManager plan(context);
    buildPlanPhase(plan, attempt);
    // A re-plan's error names the lowered budget, not the user's: say why.
    std::string replanError;
    std::optional<ScopedDiagnosticHandler> captureReplanError;
    if (result.attempts > 1)
      captureReplanError.emplace(context, [&](Diagnostic &diag) {
        if (diag.getSeverity() != DiagnosticSeverity::Error)
          return failure();
        replanError = diag.str();
        return success();
      });
    LogicalResult planned = plan.run(*work);
    captureReplanError.reset();
    if (failed(planned)) {
      if (result.attempts == 1)
        return failure();
      return module.emitError("lethe: the packed device arena (")
             << lastArena << " bytes) exceeds the budget ("
             << result.budgetBytes << " bytes) and re-planning for "
             << attempt.plan.budget << " bytes failed: " << replanError;
    }
    std::optional<int64_t> planBudget = getI64(*work, attrs::kBudgetBytes);
    if (result.attempts == 1)
      result.budgetBytes = planBudget.value_or(-1);
    result.planBudgetBytes = planBudget.value_or(-1);
    recordDecisions(*work, result);

    PassManager program(context);
    buildProgramPhase(program, attempt);
    if (failed(program.run(*work)))
      return failure();
    int64_t arena = getI64(*work, attrs::kDeviceArenaBytes).value_or(0);
    lastArena = arena;
    if (result.budgetBytes >= 0 && arena > result.budgetBytes) {
      // Fragmentation: plan for less, by what packing lost.
      if (result.attempts > maxReplans)
        return module.emitError("lethe: the device arena (")
               << arena << " bytes) exceeds the budget (" << result.budgetBytes
               << " bytes) after " << maxReplans
               << " re-plans for fragmentation; try a larger budget";
      attempt.plan.budget =
          std::to_string(*planBudget - (arena - result.budgetBytes));
      if (keepRemarks)
        module.emitRemark("lethe-pipeline: the packed device arena (")
            << arena << " bytes) exceeds the budget (" << result.budgetBytes
            << " bytes); planning again for " << attempt.plan.budget
            << " bytes";
      continue;
    }
    // The program is checked against the budget the user asked for.
    if (result.budgetBytes >= 0)
      (*work)->setAttr(attrs::kBudgetBytes,
                       Builder(context).getI64IntegerAttr(result.budgetBytes));
    PassManager verify(context);
    verify.addPass(createVerifyProgram());
    if (failed(verify.run(*work)))
      return failure();
    module.getBodyRegion().takeBody(work->getBodyRegion());
    module->setAttrs((*work)->getAttrDictionary());
    return success();
  }
  return failure();
}

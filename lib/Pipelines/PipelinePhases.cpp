//===- PipelinePhases.cpp - Building and registering the pipeline -------===//
//
// Part of Lethe. The pipeline's options, its phases as pass pipelines, and
// `lethe-pipeline`'s registration; the search that re-plans for packing
// is in Pipelines.cpp.
//
//===----------------------------------------------------------------------===//

#include "PipelinePhases.h"

#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace lethe;
using namespace lethe::pipeline;

llvm::Expected<LethePipelineConfig>
lethe::parseLethePipelineOptions(StringRef text) {
  LethePipelineOptions own;
  std::string planText;
  for (StringRef option : splitPassOptions(text)) {
    StringRef key = option.split('=').first.trim();
    if (key != own.contention.ArgStr && key != own.annotateCosts.ArgStr) {
      (planText += option.str()) += " ";
      continue;
    }
    std::string error;
    llvm::raw_string_ostream errors(error);
    if (failed(own.parseFromString(option, errors)))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "invalid option '" + option + "'" +
              (error.empty() ? "" : ": " + StringRef(error).trim()));
  }
  llvm::Expected<PlanActivationsOptions> plan =
      parsePlanActivationsOptions(planText);
  if (!plan)
    return plan.takeError();
  LethePipelineConfig config;
  config.plan = std::move(*plan);
  config.contention = own.contention;
  config.annotateCosts = own.annotateCosts;
  return config;
}

void pipeline::addCostPass(OpPassManager &pm,
                           const LethePipelineConfig &config) {
  if (!config.annotateCosts)
    return;
  AnnotateCostsOptions costs;
  costs.device = config.plan.device;
  pm.addPass(createAnnotateCosts(costs));
}

LogicalResult pipeline::runCostPass(ModuleOp module,
                                    const LethePipelineConfig &config) {
  PassManager costs(module.getContext());
  addCostPass(costs, config);
  return costs.run(module);
}

void pipeline::addPlanPass(OpPassManager &pm, const LethePipelineConfig &config,
                           StringRef budget,
                           std::shared_ptr<AutoFamilies> families) {
  PlanActivationsOptions plan = config.plan;
  plan.budget = budget.str();
  pm.addPass(families
                 ? createPlanActivations(std::move(plan), std::move(families))
                 : createPlanActivations(std::move(plan)));
}

void lethe::buildPlanPhase(OpPassManager &pm,
                           const LethePipelineConfig &config) {
  addCostPass(pm, config);
  addPlanPass(pm, config, config.plan.budget);
}

void pipeline::buildProgramOrder(OpPassManager &pm,
                                 const LethePipelineConfig &config,
                                 bool materialized, bool measured) {
  if (!materialized) {
    MaterializeOptions materialize;
    materialize.device = config.plan.device;
    pm.addPass(createMaterialize(materialize));
  }
  ScheduleProgramOptions schedule;
  schedule.device = config.plan.device;
  schedule.contention = config.contention;
  schedule.writeStreams = !measured;
  pm.addPass(createScheduleProgram(schedule));
}

void pipeline::buildProgram(OpPassManager &pm,
                            const LethePipelineConfig &config,
                            bool materialized) {
  buildProgramOrder(pm, config, materialized);
  AssignBuffersOptions buffers;
  buffers.alignment = config.plan.alignment;
  pm.addPass(createAssignBuffers(buffers));
}

void lethe::buildProgramPhase(OpPassManager &pm,
                              const LethePipelineConfig &config) {
  buildProgram(pm, config, /*materialized=*/false);
}

void lethe::buildLethePipeline(OpPassManager &pm,
                               const LethePipelineConfig &config) {
  buildPlanPhase(pm, config);
  buildProgramPhase(pm, config);
  pm.addPass(createVerifyProgram());
}

namespace {
/// What `lethe-pipeline` runs: the phases as runLethePipeline runs them,
/// planning again when packing leaves the arena above the budget,
/// so that the textual pipeline accepts what `lethe compile` accepts. It
/// loops over whole pass pipelines, so it is the pipeline's own driver
/// rather than a pass of its own (it has no registration).
class ReplanningPipeline
    : public PassWrapper<ReplanningPipeline, OperationPass<ModuleOp>> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ReplanningPipeline)

  explicit ReplanningPipeline(LethePipelineConfig config)
      : config(std::move(config)) {}
  StringRef getArgument() const final { return kPipelineArgument; }
  StringRef getDescription() const final {
    return "lethe-pipeline, re-planning for packing";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    // What the phases create, loaded before they run.
    OpPassManager pm(ModuleOp::getOperationName());
    buildLethePipeline(pm, config);
    pm.getDependentDialects(registry);
  }
  void runOnOperation() override {
    if (failed(runLethePipeline(getOperation(), config, nullptr,
                                /*keepRemarks=*/true)))
      signalPassFailure();
  }

private:
  LethePipelineConfig config;
};
} // namespace

void lethe::registerLethePipelines() {
  registerPassPipeline(
      kPipelineArgument,
      "Plan, materialize, schedule, allocate and verify a training step "
      "(lethe-annotate-costs, lethe-plan, lethe-materialize, lethe-schedule, "
      "lethe-assign-buffers, lethe-verify), planning again for a lower peak "
      "when packing leaves the arena above the budget; takes every "
      "lethe-plan option and these",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        llvm::Expected<LethePipelineConfig> config =
            parseLethePipelineOptions(text);
        if (!config)
          return errorHandler(llvm::toString(config.takeError()));
        pm.addPass(std::make_unique<ReplanningPipeline>(std::move(*config)));
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> print) {
        LethePipelineOptions options;
        print(options);
      });
}

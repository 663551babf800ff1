//===- SimulateCommand.cpp - `lethe simulate` and `lethe compile` ---------===//

#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Driver/Commands.h"
#include "lethe/Driver/GraphLoader.h"
#include "lethe/Driver/Simulation.h"
#include "lethe/Target/Cpp/LetheToCpp.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <map>
#include <optional>

using namespace mlir;
using namespace lethe;

namespace {
/// Loads the graph, compiles it with the pipeline and simulates the result.
struct CompiledStep {
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  SimulationReport report;
  /// `lethe compile`: the plan compiled, as `lethe plan` states it.
  std::optional<PlannedStep> plan;
};
} // namespace

LethePipelineConfig lethe::pipelineConfig(const CommandOptions &options) {
  LethePipelineConfig config;
  config.plan = options.plan;
  config.contention = options.contention;
  config.annotateCosts = false;
  return config;
}

/// The plan `lethe compile` compiled, as `lethe plan` states it (the same
/// PlannedStep, written by the same planToJson): planned again for the plan
/// budget the pipeline kept (the planner is a function of the budget;
/// agreeWithPipeline does the same), stated for the budget asked for, and
/// checked to make the decisions the program was compiled from.
static FailureOr<PlannedStep> compiledPlan(func::FuncOp func,
                                           const CommandOptions &options,
                                           const DeviceProfile &device,
                                           const PipelineOutcome &outcome) {
  PlanActivationsOptions planOptions = options.plan;
  if (outcome.planBudgetBytes >= 0)
    planOptions.budget = std::to_string(outcome.planBudgetBytes);
  FailureOr<PlannedStep> step =
      planStep(func, planOptions, device, [](const llvm::Twine &message) {
        llvm::errs() << "error: " << message << "\n";
      });
  if (failed(step))
    return failure();
  if (outcome.budgetBytes >= 0) {
    step->plan.budgetBytes = outcome.budgetBytes;
    step->options.budgetBytes = outcome.budgetBytes;
  }
  // Decisions by (exported node, output), as both name them.
  std::map<std::pair<int64_t, unsigned>, std::string> compiled, planned;
  for (const PipelineOutcome::Decision &d : outcome.decisions)
    compiled[{d.nodeId, d.result}] = d.decision;
  for (const ActivationDecision &d : step->plan.decisions) {
    const GraphValue &value = step->graph.getValue(d.value);
    if (value.isInput())
      continue;
    const GraphNode &producer = step->graph.getNode(value.producer);
    planned[{producer.sourceId.value_or(-1), value.resultIndex}] =
        stringifyDecision(d.decision).str();
  }
  if (!step->plan.feasible || planned != compiled)
    return func.emitError("lethe compile: planning again for the plan "
                          "budget (")
           << outcome.planBudgetBytes
           << " B) does not give the plan compiled; no plan document";
  return step;
}

static FailureOr<CompiledStep> compileStep(const CommandOptions &options,
                                           MLIRContext &context,
                                           bool withUnplanned,
                                           bool withPlan = false) {
  CompiledStep step;
  LoadOptions loadOptions;
  loadOptions.device = options.plan.device;
  step.module = loadTrainingGraph(options.graphPath, context, loadOptions);
  if (!step.module)
    return failure();
  func::FuncOp func = getTrainingFunction(*step.module);
  if (!func)
    return failure();
  llvm::Expected<DeviceProfile> device =
      DeviceProfile::load(options.plan.device);
  if (!device) {
    llvm::errs() << "error: " << toString(device.takeError()) << "\n";
    return failure();
  }
  SimulationReport &report = step.report;
  report.graphName = llvm::sys::path::filename(options.graphPath).str();
  report.device = device->name;
  report.policy = options.plan.policy;
  if (withUnplanned) {
    FailureOr<ProgramSimulation> unplanned = simulateUnplanned(func, *device);
    if (failed(unplanned))
      return failure();
    report.unplanned = std::move(*unplanned);
  }

  // Only the training function is compiled; helpers the loader kept go.
  for (Operation &op : llvm::make_early_inc_range(*step.module->getBody()))
    if (&op != func.getOperation() && isa<func::FuncOp>(op))
      op.erase();
  // The step as given, to state the plan from (the pipeline consumes it).
  OwningOpRef<ModuleOp> source;
  if (withPlan)
    source = step.module->clone();
  if (failed(runLethePipeline(*step.module, pipelineConfig(options),
                              &report.outcome)))
    return failure();
  if (withPlan) {
    FailureOr<PlannedStep> plan = compiledPlan(
        getTrainingFunction(*source), options, *device, report.outcome);
    if (failed(plan))
      return failure();
    step.plan = std::move(*plan);
  }
  step.func = getTrainingFunction(*step.module);
  FailureOr<ProgramSimulation> planned = simulateProgram(step.func, *device);
  if (failed(planned))
    return failure();
  report.planned = std::move(*planned);
  readCompiledFigures(*step.module, step.func, report);
  return step;
}

LogicalResult lethe::runSimulateCommand(const CommandOptions &options,
                                        MLIRContext &context) {
  FailureOr<CompiledStep> step =
      compileStep(options, context, /*withUnplanned=*/true);
  if (failed(step))
    return failure();
  const SimulationReport &report = step->report;
  OutputFiles outputs;
  if (!options.jsonPath.empty() &&
      failed(writeOutputFile(
          outputs, options.jsonPath,
          [&](raw_ostream &os) {
            os << llvm::formatv("{0:2}", simulationToJson(report)) << "\n";
          },
          /*json=*/true)))
    return failure();
  if (!options.tracePath.empty() &&
      failed(writeOutputFile(
          outputs, options.tracePath,
          [&](raw_ostream &os) {
            writeChromeTrace(
                buildProgramTimeline(report.planned, report.budgetBytes), os);
          },
          /*json=*/true)))
    return failure();
  if (!options.plotPath.empty() &&
      failed(writeOutputFile(outputs, options.plotPath, [&](raw_ostream &os) {
        writeSvg(buildMemoryPlot(report), os);
      })))
    return failure();
  printSimulationReport(report, llvm::outs());
  return commitOutputFiles(outputs);
}

LogicalResult lethe::runCompileCommand(const CommandOptions &options,
                                       MLIRContext &context) {
  if (options.outputDir.empty()) {
    llvm::errs() << "error: lethe compile needs an output directory (-o DIR)\n";
    return failure();
  }
  FailureOr<CompiledStep> step =
      compileStep(options, context, /*withUnplanned=*/false,
                  /*withPlan=*/true);
  if (failed(step))
    return failure();
  // The program the runtime runs, lowered from a copy before anything is
  // written, so that a failed lowering leaves no files.
  std::string program;
  {
    OwningOpRef<ModuleOp> lowered = step->module->clone();
    llvm::raw_string_ostream os(program);
    if (failed(translateProgramToCpp(*lowered, os, LowerToRuntimeOptions())))
      return failure();
  }
  if (std::error_code error =
          llvm::sys::fs::create_directories(options.outputDir)) {
    llvm::errs() << "error: cannot create '" << options.outputDir
                 << "': " << error.message() << "\n";
    return failure();
  }
  auto path = [&](StringRef name) {
    SmallString<256> file(options.outputDir);
    llvm::sys::path::append(file, name);
    return file.str().str();
  };
  OutputFiles outputs;
  if (failed(
          writeOutputFile(outputs, path("step.mlir"),
                          [&](raw_ostream &os) { step->module->print(os); })) ||
      failed(writeOutputFile(outputs, path("step.cpp"),
                             [&](raw_ostream &os) { os << program; })) ||
      // The plan as `lethe plan --json` writes it, the simulated program as
      // `lethe simulate --json` does: one writer each.
      failed(writeOutputFile(
          outputs, path("plan.json"),
          [&](raw_ostream &os) {
            writePlanJson(os, step->plan->plan, step->plan->graph);
          },
          /*json=*/true)) ||
      failed(writeOutputFile(
          outputs, path("simulation.json"),
          [&](raw_ostream &os) {
            os << llvm::formatv("{0:2}", simulationToJson(step->report))
               << "\n";
          },
          /*json=*/true)) ||
      failed(writeOutputFile(
          outputs, path("trace.json"),
          [&](raw_ostream &os) {
            writeChromeTrace(buildProgramTimeline(step->report.planned,
                                                  step->report.budgetBytes),
                             os);
          },
          /*json=*/true)) ||
      failed(commitOutputFiles(outputs)))
    return failure();
  if (options.build &&
      failed(buildProgramLibrary(path("step.cpp"), path("step.so"))))
    return failure();
  printSimulationReport(step->report, llvm::outs());
  llvm::outs() << "  wrote        " << path("step.mlir") << ", "
               << path("step.cpp") << ", " << path("plan.json") << ", "
               << path("simulation.json") << ", " << path("trace.json");
  if (options.build)
    llvm::outs() << ", " << path("step.so");
  llvm::outs() << "\n";
  return success();
}

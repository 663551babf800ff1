//===- SimulateCommand.cpp - `lethe simulate` and `lethe compile` ---------===//

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Driver/Commands.h"
#include "lethe/Driver/GraphLoader.h"
#include "lethe/Driver/Simulation.h"
#include "lethe/Target/Cpp/LetheToCpp.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace lethe;

namespace {
/// Loads the graph, compiles it with the pipeline and simulates the result.
struct CompiledStep {
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  SimulationReport report;
};
} // namespace

LethePipelineConfig lethe::pipelineConfig(const CommandOptions &options) {
  LethePipelineConfig config;
  config.plan = options.plan;
  config.contention = options.contention;
  config.annotateCosts = false;
  return config;
}

static FailureOr<CompiledStep> compileStep(const CommandOptions &options,
                                           MLIRContext &context,
                                           bool withUnplanned) {
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
  if (failed(runLethePipeline(*step.module, pipelineConfig(options),
                              &report.outcome)))
    return failure();
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

/// The plan document of `lethe compile`: the planner's predictions, the
/// decisions and what the program needs at run time.
static llvm::json::Value compiledPlanJson(const CompiledStep &step) {
  const SimulationReport &report = step.report;
  llvm::json::Object json = *simulationToJson(report).getAsObject();
  if (auto plan = LetheDialect::PlanAttrHelper(step.func->getContext())
                      .getAttr(step.func)) {
    json["plan_policy"] = stringifyPolicy(plan.getPolicy()).str();
    json["plan_budget_bytes"] = plan.getBudgetBytes();
    json["plan_feasible"] = plan.getFeasible();
    json["plan_peak_bytes"] = plan.getPeakBytes();
    json["plan_baseline_peak_bytes"] = plan.getBaselinePeakBytes();
    json["plan_step_us"] = plan.getStepUs().convertToDouble();
    json["plan_baseline_step_us"] = plan.getBaselineStepUs().convertToDouble();
    json["plan_overhead"] = plan.getOverhead().convertToDouble();
    if (std::optional<llvm::APFloat> bound = plan.getLowerBoundOverhead())
      json["plan_lower_bound_overhead"] = bound->convertToDouble();
  }
  json["values"] = compiledDecisionsToJson(report.outcome);
  return json;
}

LogicalResult lethe::runCompileCommand(const CommandOptions &options,
                                       MLIRContext &context) {
  if (options.outputDir.empty()) {
    llvm::errs() << "error: lethe compile needs an output directory (-o DIR)\n";
    return failure();
  }
  FailureOr<CompiledStep> step =
      compileStep(options, context, /*withUnplanned=*/false);
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
      failed(writeOutputFile(
          outputs, path("plan.json"),
          [&](raw_ostream &os) {
            os << llvm::formatv("{0:2}", compiledPlanJson(*step)) << "\n";
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
               << path("trace.json");
  if (options.build)
    llvm::outs() << ", " << path("step.so");
  llvm::outs() << "\n";
  return success();
}

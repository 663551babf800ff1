//===- ReportCommand.cpp - `lethe report` ---------------------------------===//

#include "lethe/Driver/Commands.h"
#include "lethe/Driver/GraphLoader.h"
#include "lethe/Driver/Report.h"

using namespace mlir;
using namespace lethe;

LogicalResult
lethe::writeOutputFile(OutputFiles &outputs, StringRef path,
                       const std::function<void(raw_ostream &)> &write,
                       bool json) {
  if (llvm::Error error = outputs.add(path, write, json)) {
    llvm::errs() << "error: " << llvm::toString(std::move(error)) << "\n";
    return failure();
  }
  return success();
}

LogicalResult lethe::commitOutputFiles(OutputFiles &outputs) {
  if (llvm::Error error = outputs.commit()) {
    llvm::errs() << "error: " << llvm::toString(std::move(error)) << "\n";
    return failure();
  }
  return success();
}

LogicalResult lethe::runReportCommand(const CommandOptions &options,
                                      MLIRContext &context) {
  LoadOptions loadOptions;
  loadOptions.device = options.plan.device;
  OwningOpRef<ModuleOp> module =
      loadTrainingGraph(options.graphPath, context, loadOptions);
  if (!module)
    return failure();
  func::FuncOp func = getTrainingFunction(*module);
  if (!func)
    return failure();
  LifetimeAnalysis analysis(func);
  if (!analysis.isValid())
    return failure();
  StepReport report =
      buildStepReport(analysis, *module, options.plan.device, options.top);
  OutputFiles outputs;
  if (!options.jsonPath.empty() &&
      failed(writeOutputFile(
          outputs, options.jsonPath,
          [&](raw_ostream &os) { writeStepReportJSON(report, os); },
          /*json=*/true)))
    return failure();
  if (!options.tracePath.empty() &&
      failed(writeOutputFile(
          outputs, options.tracePath,
          [&](raw_ostream &os) {
            writeChromeTrace(buildUnplannedTimeline(analysis.getGraph(),
                                                    analysis.getProfile()),
                             os);
          },
          /*json=*/true)))
    return failure();
  printStepReport(report, llvm::outs());
  return commitOutputFiles(outputs);
}

//===- ReportCommand.cpp - `lethe report` ---------------------------------===//

#include "lethe/Driver/Commands.h"
#include "lethe/Driver/GraphLoader.h"
#include "lethe/Driver/Report.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace lethe;

LogicalResult
lethe::writeOutputFile(StringRef path,
                       const std::function<void(raw_ostream &)> &write) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
  if (!file) {
    llvm::errs() << "error: " << error << "\n";
    return failure();
  }
  write(file->os());
  file->os().flush();
  if (file->os().has_error()) {
    llvm::errs() << "error: could not write '" << path << "'\n";
    file->os().clear_error();
    return failure();
  }
  file->keep();
  return success();
}

LogicalResult lethe::runReportCommand(const CommandOptions &options,
                                      MLIRContext &context) {
  LoadOptions loadOptions;
  loadOptions.device = options.device;
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
      buildStepReport(analysis, *module, options.device, options.top);
  printStepReport(report, llvm::outs());
  if (!options.jsonPath.empty() &&
      failed(writeOutputFile(options.jsonPath, [&](raw_ostream &os) {
        writeStepReportJSON(report, os);
      })))
    return failure();
  if (!options.tracePath.empty() &&
      failed(writeOutputFile(options.tracePath, [&](raw_ostream &os) {
        writeChromeTrace(buildUnplannedTimeline(analysis.getGraph(),
                                                analysis.getProfile()),
                         os);
      })))
    return failure();
  return success();
}

//===- Commands.h - The driver's commands -----------------------*- C++ -*-===//
//
// One function per `lethe` command; Driver.cpp parses options into
// CommandOptions and dispatches. Each command writes its output files only
// when it succeeds, and all of them or none (nothing half-written).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DRIVER_COMMANDS_H
#define LETHE_DRIVER_COMMANDS_H

#include "lethe/Planner/Plan.h"
#include "lethe/Support/Files.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/LogicalResult.h"

#include "lethe/Pipelines/Pipelines.h"

#include <functional>
#include <string>

namespace lethe {

struct CommandOptions {
  std::string graphPath;
  /// Output files; empty = not requested.
  std::string jsonPath;
  std::string tracePath;
  unsigned top = 10;
  /// The planner's options as given (`lethe plan`, `simulate`, `compile`);
  /// `plan.device` is every command's device profile.
  PlanActivationsOptions plan;
  /// `lethe simulate`: the memory plot (SVG); `lethe compile`: the output
  /// directory; both: copies vs collectives (auto, on, off).
  std::string plotPath;
  std::string outputDir;
  std::string contention = LethePipelineConfig().contention;
  /// `lethe compile --build`: also build DIR/step.so.
  bool build = false;
};

/// The pipeline's configuration for the driver's options: the planner's
/// options, the device and contention; op times come from the loader
/// (measured, else the cost model), so costs are not annotated again.
LethePipelineConfig pipelineConfig(const CommandOptions &options);

llvm::LogicalResult runReportCommand(const CommandOptions &options,
                                     mlir::MLIRContext &context);

/// `lethe plan`: plans under `options.plan`; an infeasible budget is an
/// error stating the least budget the policy can meet (exit 1; `--json`
/// still says so with `feasible: false`).
llvm::LogicalResult runPlanCommand(const CommandOptions &options,
                                   mlir::MLIRContext &context);

/// `lethe simulate`: compiles the graph with the pipeline under the
/// budget and reports the simulated run of the program (and of the
/// unplanned one): summary, `--json`, `--trace`, `--plot`.
llvm::LogicalResult runSimulateCommand(const CommandOptions &options,
                                       mlir::MLIRContext &context);

/// `lethe compile`: compiles the graph and writes DIR/step.mlir (the
/// allocated program), DIR/step.cpp (the program for the CUDA runtime, as
/// `lethe-translate --lethe-to-cpp` prints it), DIR/plan.json and
/// DIR/trace.json; with `build`, also DIR/step.so (buildProgramLibrary).
llvm::LogicalResult runCompileCommand(const CommandOptions &options,
                                      mlir::MLIRContext &context);

/// Builds the program C++ at `cppPath` into the shared library lethe-run
/// loads, at `libraryPath`: $CXX (else c++, clang++ or g++ on the PATH)
/// with lethe-c/Runtime.h from $LETHE_INCLUDE_DIR, the install beside the
/// lethe binary or its source tree; no CUDA is needed. Errors say what is
/// missing; a failed build leaves no library.
llvm::LogicalResult buildProgramLibrary(llvm::StringRef cppPath,
                                        llvm::StringRef libraryPath);

/// Writes the `lethe plan --json` document of `plan` (the C API returns the
/// same), indented by 2, with a newline; it names nodes by their
/// `lethe.node_id`, never by position.
void writePlanJson(llvm::raw_ostream &os, const Plan &plan,
                   const TrainingGraph &graph);

/// Writes one output file of a command to a temporary in `outputs`; the
/// command calls commitOutputFiles once all are written, so a failed
/// command leaves no file, partial or whole. `json` checks that the content
/// parses as JSON. Both print their error.
llvm::LogicalResult
writeOutputFile(OutputFiles &outputs, llvm::StringRef path,
                const std::function<void(llvm::raw_ostream &)> &write,
                bool json = false);
llvm::LogicalResult commitOutputFiles(OutputFiles &outputs);

} // namespace lethe

#endif // LETHE_DRIVER_COMMANDS_H

//===- GraphLoader.h - Read any supported graph into canonical form -*- C++ -*-===//
//
// One entry point for the driver, the C API and the Python bindings: a
// JSON exported graph, or MLIR (Lethe's canonical form, generic-form
// `aten.*` / `stablehlo.*` exports, or upstream tensor dialects), comes back
// as a module whose training function is in Lethe's canonical form with a
// time on every node.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DRIVER_GRAPHLOADER_H
#define LETHE_DRIVER_GRAPHLOADER_H

#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>

namespace lethe {

struct LoadOptions {
  /// Device profile used to cost nodes that carry no measured time
  /// (lethe-annotate-costs's default).
  std::string device = AnnotateCostsOptions().device;
  /// Refuse a graph no analysis can take, with TrainingGraph::fromFunction's
  /// located error. A caller that builds the TrainingGraph next anyway
  /// (planStep: the same errors) passes false, not to build it twice.
  bool checkAnalysable = true;
};

/// Loads `path` (`-` for stdin): JSON if its text starts with `{`, else
/// MLIR, whatever its name. The file must be regular and at most
/// kMaxInputBytes (lethe/Support/Files.h). Errors are emitted through the
/// context's diagnostic engine with the offending location; returns null on
/// failure.
mlir::OwningOpRef<mlir::ModuleOp> loadTrainingGraph(llvm::StringRef path,
                                                    mlir::MLIRContext &context,
                                                    const LoadOptions &options);

/// Loads a graph held in `buffer` (its identifier names it in errors): JSON
/// if `json`, else MLIR text. The file overload reads the file and calls this.
mlir::OwningOpRef<mlir::ModuleOp>
loadTrainingGraph(std::unique_ptr<llvm::MemoryBuffer> buffer, bool json,
                  mlir::MLIRContext &context, const LoadOptions &options);

/// The training function of a loaded module: `@step` if present, else the
/// only function with a body. Emits an error and returns null otherwise.
mlir::func::FuncOp getTrainingFunction(mlir::ModuleOp module);

/// Registers every dialect a loaded graph may contain.
void registerLoaderDialects(mlir::MLIRContext &context);

} // namespace lethe

#endif // LETHE_DRIVER_GRAPHLOADER_H

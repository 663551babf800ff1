//===- GraphFile.h - Training steps read from JSON graph files --*- C++ -*-===//
//
// The tests over the bundled corpus (graphs/) all start the same way: read
// the file, import it, build the TrainingGraph of its function.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_PLANNER_GRAPHFILE_H
#define LETHE_UNITTESTS_PLANNER_GRAPHFILE_H

#include "lethe/Analysis/TrainingGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace lethe::testing {

/// The training step in the JSON graph file `path`, imported into
/// `context`; `module` keeps the IR the graph refers to.
llvm::Expected<TrainingGraph>
loadGraphFile(llvm::StringRef path, mlir::MLIRContext &context,
              mlir::OwningOpRef<mlir::ModuleOp> &module);

} // namespace lethe::testing

#endif // LETHE_UNITTESTS_PLANNER_GRAPHFILE_H

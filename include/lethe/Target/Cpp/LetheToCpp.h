//===- LetheToCpp.h - Allocated lethe program -> C++ ------------*- C++ -*-===//
//
// The last step of the pipeline: an allocated program (docs/Pipeline.md §6)
// lowered by lethe-lower-to-runtime and printed by MLIR's EmitC C++ emitter
// as a program for the CUDA runtime (docs/Lowering.md).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_TARGET_CPP_LETHETOCPP_H
#define LETHE_TARGET_CPP_LETHETOCPP_H

#include "lethe/Conversion/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace lethe {

/// Lowers `module` to EmitC in place and prints it as C++ to `os`. On
/// failure the errors are reported at their ops and nothing is printed.
mlir::LogicalResult translateProgramToCpp(mlir::ModuleOp module,
                                          llvm::raw_ostream &os,
                                          const LowerToRuntimeOptions &options);

/// `lethe-translate --lethe-to-cpp` (with `--lethe-program-name`).
void registerLetheToCppTranslation();

} // namespace lethe

#endif // LETHE_TARGET_CPP_LETHETOCPP_H

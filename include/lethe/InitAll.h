//===- InitAll.h - Register everything Lethe provides -----------*- C++ -*-===//
//
// One place that lists Lethe's dialects, passes and translations, shared by
// lethe-opt, lethe-translate, the C API and the pass plugin.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_INITALL_H
#define LETHE_INITALL_H

#include "lethe/Conversion/Passes.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Import/JsonImporter.h"
#include "lethe/Pipelines/Pipelines.h"
#include "lethe/Target/Cpp/LetheToCpp.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/DialectRegistry.h"

namespace lethe {

/// The lethe dialect plus the upstream dialects imported graphs may use.
inline void registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<LetheDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::linalg::LinalgDialect,
                  mlir::tensor::TensorDialect, mlir::tosa::TosaDialect>();
}

/// Lethe's passes and pipelines.
inline void registerAllPasses() {
  registerLethePasses();
  registerLetheConversionPasses();
  registerLethePipelines();
}

/// Lethe's translations (importers and emitters).
inline void registerAllTranslations() {
  registerImportGraphJsonTranslation();
  registerLetheToCppTranslation();
}

} // namespace lethe

#endif // LETHE_INITALL_H

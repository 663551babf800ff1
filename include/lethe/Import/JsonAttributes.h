//===- JsonAttributes.h - JSON values as types and attributes -*- C++ -*-===//
//
// The JSON importer's conversions of values (docs/Import.md): dtype names to
// element types, and `args` / `kwargs` values to attributes.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_JSONATTRIBUTES_H
#define LETHE_IMPORT_JSONATTRIBUTES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

namespace lethe {

/// The element types of JSON dtypes (PyTorch names, with or without the
/// `torch.` prefix).
llvm::StringMap<mlir::Type> getJsonElementTypes(mlir::MLIRContext *context);

/// JSON -> attribute, losslessly but for one case: llvm::json cannot tell a
/// negative integral float (`-2.0`) from an integer, so it becomes i64. An
/// object with an empty key is an error, emitted through `error` (which
/// starts the diagnostic: where, and about what).
mlir::FailureOr<mlir::Attribute>
convertJsonValue(const llvm::json::Value &value, mlir::MLIRContext *context,
                 llvm::function_ref<mlir::InFlightDiagnostic()> error);

} // namespace lethe

#endif // LETHE_IMPORT_JSONATTRIBUTES_H

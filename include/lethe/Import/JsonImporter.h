//===- JsonImporter.h - Import a JSON training-step graph -------*- C++ -*-===//
//
// Reads the JSON graph schema of graphs/SCHEMA.md (a joint forward+backward
// ATen graph with per-op times) into Lethe's canonical graph form; see
// docs/Import.md.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_JSONIMPORTER_H
#define LETHE_IMPORT_JSONIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace lethe {

/// Imports the JSON graph `json` (read from `fileName`, used in locations)
/// into a new module holding one `func.func @step`. On bad input, emits an
/// error naming the node (id and name) at its location in the file and
/// returns null; nothing is printed on success. Loads the dialects it needs.
mlir::OwningOpRef<mlir::ModuleOp> importGraphJson(llvm::StringRef json,
                                                  llvm::StringRef fileName,
                                                  mlir::MLIRContext *context);

/// Imports the main buffer of `sourceMgr`.
mlir::OwningOpRef<mlir::ModuleOp> importGraphJson(llvm::SourceMgr &sourceMgr,
                                                  mlir::MLIRContext *context);

/// Registers `--import-graph-json` with mlir-translate's registry.
void registerImportGraphJsonTranslation();

} // namespace lethe

#endif // LETHE_IMPORT_JSONIMPORTER_H

//===- JsonTranslation.cpp - The import-graph-json translation ------------===//
//
// Registers the JSON importer (JsonImporter.cpp) as lethe-translate's
// --import-graph-json, with the compact diagnostics a one-line export needs.
//
//===----------------------------------------------------------------------===//

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Import/Diagnostics.h"
#include "lethe/Import/JsonImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace lethe;

void lethe::registerImportGraphJsonTranslation() {
  static TranslateToMLIRRegistration registration(
      "import-graph-json",
      "import a JSON training-step graph (graphs/SCHEMA.md) into the lethe "
      "graph form",
      [](llvm::SourceMgr &sourceMgr, MLIRContext *context) {
        // mlir-translate's handler quotes the whole source line of each
        // error; for a one-line export that is the whole file.
        CompactDiagnosticHandler compact(context, llvm::errs(), &sourceMgr);
        return OwningOpRef<Operation *>(
            importGraphJson(sourceMgr, context).release());
      },
      [](DialectRegistry &registry) {
        registry.insert<LetheDialect, func::FuncDialect>();
      });
}

//===- lethe-translate.cpp - Lethe translation driver ---------------------===//
//
// Registers Lethe's translations (graph importers, and later the C++
// emitter) and hands over to mlirTranslateMain. No logic lives here.
//
//===----------------------------------------------------------------------===//

#include "lethe/InitAll.h"
#include "lethe/Support/Files.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  // mlirTranslateMain reads its input whole: refuse endless ones first.
  if (llvm::Error error = lethe::checkInputArguments(
          llvm::ArrayRef<const char *>(argv + 1, argc - 1), {"-o"})) {
    llvm::errs() << "error: " << llvm::toString(std::move(error)) << "\n";
    return 1;
  }
  lethe::registerAllTranslations();
  return mlir::failed(mlir::mlirTranslateMain(
      argc, argv, "Lethe translation driver\n"));
}

//===- lethe-translate.cpp - Lethe translation driver ---------------------===//
//
// Registers Lethe's translations (graph importers, and later the C++
// emitter) and hands over to mlirTranslateMain. No logic lives here.
//
//===----------------------------------------------------------------------===//

#include "lethe/InitAll.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  lethe::registerAllTranslations();
  return mlir::failed(mlir::mlirTranslateMain(
      argc, argv, "Lethe translation driver\n"));
}

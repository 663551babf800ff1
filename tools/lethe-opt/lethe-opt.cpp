//===- lethe-opt.cpp - Lethe optimizer driver -----------------------------===//
//
// Registers the lethe dialect, the upstream dialects imported graphs may use
// and Lethe's passes, then hands over to MlirOptMain. No logic lives here.
//
//===----------------------------------------------------------------------===//

#include "lethe/InitAll.h"
#include "lethe/TestPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  lethe::registerAllDialects(registry);
  lethe::registerAllPasses();
  lethe::test::registerTestPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Lethe activation-memory optimizer\n", registry));
}

//===- LethePlugin.cpp - Lethe as a plugin of upstream mlir-opt -----------===//
//
// Lets an unmodified `mlir-opt-22` (Debian's, which links libMLIR.so) read
// lethe IR and run Lethe's passes:
//
//   mlir-opt-22 --load-dialect-plugin=lib/LethePlugin.so \
//               --load-pass-plugin=lib/LethePlugin.so in.mlir --lethe-...
//
//===----------------------------------------------------------------------===//

#include "lethe/InitAll.h"

#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

using namespace mlir;

extern "C" LLVM_ATTRIBUTE_WEAK DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Lethe", LLVM_VERSION_STRING,
          [](DialectRegistry *registry) {
            lethe::registerAllDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Lethe", LLVM_VERSION_STRING,
          []() { lethe::registerAllPasses(); }};
}

//===- lethe-json-fuzzer.cpp - libFuzzer target for the JSON importer -----===//
//
// Feeds arbitrary bytes to lethe::importGraphJson. A crash, a sanitizer
// report or a failed assertion is a bug; so is a graph the importer accepts
// but TrainingGraph::fromFunction rejects (the importer's contract). Built
// only with -DLETHE_ENABLE_FUZZERS=ON (scripts/fuzz-json-importer.sh).
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Import/JsonImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

using namespace mlir;

namespace {
/// Inputs per context: attributes and types are uniqued in the context for
/// its lifetime, so a long run would otherwise only grow.
constexpr unsigned kInputsPerContext = 2000;

MLIRContext &getContext() {
  static std::unique_ptr<MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses % kInputsPerContext == 0) {
    context = std::make_unique<MLIRContext>(MLIRContext::Threading::DISABLED);
    context->loadDialect<lethe::LetheDialect, func::FuncDialect>();
    // Errors are the expected outcome for most inputs: keep them quiet.
    context->getDiagEngine().registerHandler(
        [](Diagnostic &) { return success(); });
  }
  return *context;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &context = getContext();
  OwningOpRef<ModuleOp> module = lethe::importGraphJson(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.json",
      &context);
  if (!module)
    return 0;
  auto funcs = module->getOps<func::FuncOp>();
  if (funcs.empty() ||
      failed(lethe::TrainingGraph::fromFunction(*funcs.begin()))) {
    fprintf(stderr, "imported graph rejected by TrainingGraph::fromFunction\n");
    abort();
  }
  return 0;
}

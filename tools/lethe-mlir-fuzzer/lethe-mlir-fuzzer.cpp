//===- lethe-mlir-fuzzer.cpp - libFuzzer target for the MLIR route --------===//
//
// Feeds arbitrary bytes, as MLIR text, through what `lethe simulate` does
// with an MLIR graph: the loader (parser, lethe-import-ops for generic-form
// and upstream-dialect graphs, the cost model), then the compilation
// pipeline (plan, materialize, schedule, assign buffers, verify) under a
// budget of 60% of the unplanned peak. A crash, a sanitizer report or a
// failed assertion is a bug; so is a graph the loader accepts but
// TrainingGraph::fromFunction rejects (the loader's contract). Built only
// with -DLETHE_ENABLE_FUZZERS=ON (scripts/fuzz.sh).
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Driver/GraphLoader.h"
#include "lethe/Pipelines/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

using namespace mlir;

namespace {
/// Inputs per context: attributes and types are uniqued in the context for
/// its lifetime, so a long run would otherwise only grow.
constexpr unsigned kInputsPerContext = 500;

MLIRContext &getContext() {
  static std::unique_ptr<MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses % kInputsPerContext == 0) {
    context = std::make_unique<MLIRContext>(MLIRContext::Threading::DISABLED);
    lethe::registerLoaderDialects(*context);
    // Errors (and the planner's remarks) are the expected outcome for most
    // inputs: keep them quiet.
    context->getDiagEngine().registerHandler(
        [](Diagnostic &) { return success(); });
  }
  return *context;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &context = getContext();
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.mlir");
  lethe::LoadOptions options;
  OwningOpRef<ModuleOp> module = lethe::loadTrainingGraph(
      std::move(buffer), /*json=*/false, context, options);
  if (!module)
    return 0;
  func::FuncOp func = lethe::getTrainingFunction(*module);
  if (!func || failed(lethe::TrainingGraph::fromFunction(func))) {
    fprintf(stderr, "loaded graph rejected by TrainingGraph::fromFunction\n");
    abort();
  }
  // As `lethe simulate` does: only the training function is compiled.
  for (Operation &op : llvm::make_early_inc_range(*module->getBody()))
    if (&op != func.getOperation() && isa<func::FuncOp>(op))
      op.erase();
  lethe::LethePipelineConfig config;
  config.plan.budget = "60%";
  config.plan.device = options.device;
  config.annotateCosts = false;
  (void)lethe::runLethePipeline(*module, config);
  return 0;
}

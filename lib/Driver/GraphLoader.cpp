//===- GraphLoader.cpp - Read any supported graph into canonical form -----===//

#include "lethe/Driver/GraphLoader.h"
#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Import/Diagnostics.h"
#include "lethe/Import/JsonImporter.h"
#include "lethe/InitAll.h"
#include "lethe/Support/DeviceProfile.h"
#include "lethe/Support/Files.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace lethe;

void lethe::registerLoaderDialects(MLIRContext &context) {
  DialectRegistry registry;
  registerAllDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
}

func::FuncOp lethe::getTrainingFunction(ModuleOp module) {
  if (auto step = module.lookupSymbol<func::FuncOp>("step"))
    return step;
  func::FuncOp found;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    if (found) {
      module.emitError("several functions and none named @step: cannot tell "
                       "which one is the training step");
      return {};
    }
    found = func;
  }
  if (!found)
    module.emitError("no training function (a func.func with a body) found");
  return found;
}

/// Whether every op of `func` is already in canonical form and timed.
static bool needsImport(func::FuncOp func) {
  bool foreign = false;
  func.walk([&](Operation *op) {
    if (!isa<func::FuncOp, func::ReturnOp, NodeOp, CollectiveOp>(op))
      foreign = true;
  });
  return foreign;
}

static bool needsCosts(func::FuncOp func) {
  bool untimed = false;
  func.walk([&](Operation *op) {
    if (auto node = dyn_cast<NodeOp>(op); node && !node.getTimeUsAttr())
      untimed = true;
    if (auto coll = dyn_cast<CollectiveOp>(op); coll && !coll.getTimeUsAttr())
      untimed = true;
  });
  return untimed;
}

OwningOpRef<ModuleOp> lethe::loadTrainingGraph(StringRef path,
                                               MLIRContext &context,
                                               const LoadOptions &options) {
  registerLoaderDialects(context);
  // Check the device up front: a graph whose ops all carry measured times
  // never consults it, and a typo must not pass silently.
  if (llvm::Expected<DeviceProfile> profile = DeviceProfile::load(options.device);
      !profile) {
    emitError(UnknownLoc::get(&context)) << llvm::toString(profile.takeError());
    return {};
  }
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readInputFile(path);
  if (!buffer) {
    emitError(UnknownLoc::get(&context)) << llvm::toString(buffer.takeError());
    return {};
  }
  // By content, not by name: an export may be called anything.
  bool json = looksLikeJson((*buffer)->getBuffer());
  return loadTrainingGraph(std::move(*buffer), json, context, options);
}

OwningOpRef<ModuleOp>
lethe::loadTrainingGraph(std::unique_ptr<llvm::MemoryBuffer> buffer, bool json,
                         MLIRContext &context, const LoadOptions &options) {
  registerLoaderDialects(context);
  if (llvm::Expected<DeviceProfile> profile = DeviceProfile::load(options.device);
      !profile) {
    emitError(UnknownLoc::get(&context)) << llvm::toString(profile.takeError());
    return {};
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());

  OwningOpRef<ModuleOp> module;
  if (json) {
    module = importGraphJson(sourceMgr, &context);
  } else {
    // Generic-form exports name ops of dialects we do not register.
    bool allowed = context.allowsUnregisteredDialects();
    context.allowUnregisteredDialects(true);
    module = parseLocatedModule(sourceMgr, &context);
    context.allowUnregisteredDialects(allowed);
  }
  if (!module)
    return {};
  // Generic-form and upstream-dialect graphs go through the importer first:
  // it also inlines private callees, which leaves the one step function.
  bool foreign = llvm::any_of(module->getOps<func::FuncOp>(), needsImport);
  if (foreign) {
    PassManager importPm(&context);
    importPm.addPass(createImportOps());
    if (failed(importPm.run(*module)))
      return {};
  }
  func::FuncOp func = getTrainingFunction(*module);
  if (!func)
    return {};
  if (!func.isExternal() &&
      llvm::none_of(func.getBody().getOps(), [](Operation &op) {
        return isa<NodeOp, CollectiveOp>(op);
      })) {
    func.emitError("the training function has no ops: nothing to plan");
    return {};
  }

  PassManager pm(&context);
  if (foreign || needsCosts(func)) {
    AnnotateCostsOptions costOptions;
    costOptions.device = options.device;
    pm.addPass(createAnnotateCosts(costOptions));
  }
  if (!pm.getPasses().empty() && failed(pm.run(*module)))
    return {};
  // A loaded graph is one every analysis can take: what the parser and the
  // dialect's verifiers accept can still be unanalysable (a value of
  // dynamic shape has no size; found by the MLIR fuzzer). Refuse it here,
  // with the analysis' located error, not in whatever consumer comes first.
  if (options.checkAnalysable && failed(TrainingGraph::fromFunction(func)))
    return {};
  return module;
}

//===- GraphFile.cpp - Training steps read from JSON graph files ----------===//

#include "GraphFile.h"

#include "lethe/Driver/GraphLoader.h"
#include "lethe/Import/JsonImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace lethe;

llvm::Expected<TrainingGraph>
lethe::testing::loadGraphFile(llvm::StringRef path, mlir::MLIRContext &context,
                              mlir::OwningOpRef<mlir::ModuleOp> &module) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read " + path);
  module = importGraphJson((*buffer)->getBuffer(), path, &context);
  if (!module)
    return llvm::createStringError("cannot import " + path);
  mlir::FailureOr<TrainingGraph> graph = TrainingGraph::fromFunction(
      *module->getOps<mlir::func::FuncOp>().begin());
  if (mlir::failed(graph))
    return llvm::createStringError("no training step in " + path);
  return std::move(*graph);
}

void lethe::testing::loadCorpusGraph(const char *name,
                                     mlir::MLIRContext &context,
                                     mlir::OwningOpRef<mlir::ModuleOp> &module,
                                     std::optional<TrainingGraph> &graph,
                                     std::optional<DeviceProfile> &device) {
  std::string path = std::string(LETHE_GRAPHS_DIR) + "/" + name;
  llvm::Expected<TrainingGraph> loaded = loadGraphFile(path, context, module);
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  graph.emplace(std::move(*loaded));
  llvm::Expected<DeviceProfile> profile = DeviceProfile::load("h200");
  ASSERT_TRUE(static_cast<bool>(profile))
      << llvm::toString(profile.takeError());
  device.emplace(std::move(*profile));
}

bool lethe::testing::loadCorpusGraphAsPlanned(
    const char *name, mlir::MLIRContext &context,
    mlir::OwningOpRef<mlir::ModuleOp> &module,
    std::optional<TrainingGraph> &graph, std::optional<DeviceProfile> &device) {
  registerLoaderDialects(context);
  module = loadTrainingGraph(std::string(LETHE_GRAPHS_DIR) + "/" + name,
                             context, {});
  if (!module) {
    ADD_FAILURE() << "cannot load " << name;
    return false;
  }
  mlir::FailureOr<TrainingGraph> loaded =
      TrainingGraph::fromFunction(getTrainingFunction(*module));
  if (mlir::failed(loaded)) {
    ADD_FAILURE() << "no training step in " << name;
    return false;
  }
  graph.emplace(std::move(*loaded));
  llvm::Expected<DeviceProfile> profile = DeviceProfile::load("h200");
  if (!profile) {
    ADD_FAILURE() << llvm::toString(profile.takeError());
    return false;
  }
  device.emplace(std::move(*profile));
  return true;
}

void lethe::testing::CorpusGraphTest::SetUp() {
  loadCorpusGraph(GetParam(), context, module, graph, device);
}

std::optional<int64_t>
lethe::testing::budgetAtFraction(Evaluator &evaluator,
                                 const ActivationAnalysis &analysis,
                                 double fraction) {
  llvm::Expected<Evaluation> unplanned = evaluator.evaluate(
      std::vector<Decision>(analysis.getActivations().size(),
                            Decision::Retain));
  if (!unplanned) {
    ADD_FAILURE() << llvm::toString(unplanned.takeError());
    return std::nullopt;
  }
  return static_cast<int64_t>(fraction *
                              static_cast<double>(unplanned->peakBytes));
}

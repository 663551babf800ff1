//===- TestLayers.cpp - Print the layers the planner finds ----------------===//
//
// `-test-lethe-layers` prints, per function, the repeated layers that
// `full`, `every-n` and `selective-op` work on (lethe/Planner/Layers.h):
// where they came from and, per layer, its name and forward nodes.
//
//===----------------------------------------------------------------------===//

#include "lethe/Planner/Layers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace lethe;

namespace {
struct TestLayersPass
    : public PassWrapper<TestLayersPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestLayersPass)

  StringRef getArgument() const final { return "test-lethe-layers"; }
  StringRef getDescription() const final {
    return "Print the repeated layers the fixed policies work on";
  }

  void runOnOperation() override {
    FailureOr<TrainingGraph> graph =
        TrainingGraph::fromFunction(getOperation());
    if (failed(graph))
      return signalPassFailure();
    LayerInfo layers = findLayers(*graph);
    llvm::outs() << "func @" << getOperation().getSymName() << ": "
                 << layers.numLayers() << " layers";
    if (layers.numLayers() > 0)
      llvm::outs() << (layers.fromScopes ? " from scopes"
                                         : " from repeated structure");
    llvm::outs() << "\n";
    for (auto [index, name] : llvm::enumerate(layers.names)) {
      llvm::outs() << "  " << index << " " << name << ": nodes";
      for (auto [node, layer] : llvm::enumerate(layers.layerOf))
        if (layer == static_cast<int32_t>(index))
          llvm::outs() << " " << node;
      llvm::outs() << "\n";
    }
    markAllAnalysesPreserved();
  }
};
} // namespace

namespace lethe::test {
void registerTestLayersPass() { PassRegistration<TestLayersPass>(); }
} // namespace lethe::test

//===- TestLifetimes.cpp - Print the lifetime analysis --------------------===//
//
// `-test-lethe-lifetimes` prints every storage's live interval and the
// memory profile of each function, for FileCheck tests of the analysis.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Lifetimes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace lethe;

namespace {
struct TestLifetimesPass
    : public PassWrapper<TestLifetimesPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestLifetimesPass)

  StringRef getArgument() const final { return "test-lethe-lifetimes"; }
  StringRef getDescription() const final {
    return "Print live intervals and the memory profile of each function";
  }

  void runOnOperation() override {
    auto &analysis = getAnalysis<LifetimeAnalysis>();
    if (!analysis.isValid())
      return signalPassFailure();
    llvm::outs() << "func @" << getOperation().getSymName() << "\n";
    analysis.getLifetimes().print(llvm::outs());
    analysis.getProfile().print(llvm::outs(), analysis.getGraph());
    markAllAnalysesPreserved();
  }
};
} // namespace

namespace lethe::test {
void registerTestLifetimesPass() { PassRegistration<TestLifetimesPass>(); }
} // namespace lethe::test

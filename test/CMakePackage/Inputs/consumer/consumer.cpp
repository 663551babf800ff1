// Parses a lethe graph, runs a Lethe pass through the pass manager and
// prints the result: what a compiler embedding Lethe's passes does.
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

int main() {
  mlir::MLIRContext context;
  context.loadDialect<lethe::LetheDialect, mlir::func::FuncDialect>();
  const char *source = R"mlir(
    func.func @step(%x: tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16> {
      %0 = lethe.node "aten.mm.default" fwd (%x, %x)
          : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
      return %0 : tensor<1024x1024xbf16>
    })mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  if (!module)
    return 1;
  mlir::PassManager pm(&context);
  lethe::AnnotateCostsOptions options;
  options.device = "h100";
  pm.addPass(lethe::createAnnotateCosts(options));
  if (mlir::failed(pm.run(*module)))
    return 1;
  module->print(llvm::outs());
  return 0;
}

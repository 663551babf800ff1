//===- LetheToCpp.cpp - Allocated lethe program -> C++ --------------------===//

#include "lethe/Target/Cpp/LetheToCpp.h"

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

LogicalResult
lethe::translateProgramToCpp(ModuleOp module, llvm::raw_ostream &os,
                             const LowerToRuntimeOptions &options) {
  PassManager pm(module.getContext());
  pm.addPass(createLowerToRuntime(options));
  if (failed(pm.run(module)))
    return failure();
  // Print into a buffer first, so that a failing emitter writes nothing.
  std::string text;
  llvm::raw_string_ostream buffer(text);
  if (failed(emitc::translateToCpp(module, buffer)))
    return failure();
  os << text;
  return success();
}

void lethe::registerLetheToCppTranslation() {
  static llvm::cl::opt<std::string> programName(
      "lethe-program-name",
      llvm::cl::desc("--lethe-to-cpp: the program's name (default: the "
                     "module's lethe.model, else the function's name)"),
      llvm::cl::init(""));
  TranslateFromMLIRRegistration registration(
      "lethe-to-cpp",
      "lower an allocated lethe program to C++ calling the CUDA runtime",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("--lethe-to-cpp translates a module");
        LowerToRuntimeOptions options;
        options.programName = programName;
        return translateProgramToCpp(module, os, options);
      },
      [](DialectRegistry &registry) {
        registry.insert<LetheDialect, emitc::EmitCDialect, func::FuncDialect>();
      });
}

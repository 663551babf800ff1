//===- LetheToCpp.cpp - Allocated lethe program -> C++ --------------------===//

#include "lethe/Target/Cpp/LetheToCpp.h"

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Import/Diagnostics.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

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
  // Parsed here rather than by TranslateFromMLIRRegistration, so that the
  // parser's errors print as `lethe` prints them too: mlir-translate's
  // handler quotes whole lines (an exported program's signature is
  // kilobytes long) and the whole module with an error about it.
  TranslateRegistration registration(
      "lethe-to-cpp",
      "lower an allocated lethe program to C++ calling the CUDA runtime",
      [](const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
         llvm::raw_ostream &os, MLIRContext *context) -> LogicalResult {
        DialectRegistry registry;
        registry.insert<LetheDialect, emitc::EmitCDialect, func::FuncDialect>();
        context->appendDialectRegistry(registry);
        // Not under -verify-diagnostics, whose handler must see them all.
        std::optional<CompactDiagnosticHandler> compact;
        llvm::cl::Option *verify =
            llvm::cl::getRegisteredOptions().lookup("verify-diagnostics");
        if (!verify || !verify->getNumOccurrences())
          compact.emplace(context, llvm::errs(), sourceMgr.get());
        bool printOp = context->shouldPrintOpOnDiagnostic();
        context->printOpOnDiagnostic(false);
        auto restore = llvm::make_scope_exit(
            [&] { context->printOpOnDiagnostic(printOp); });
        OwningOpRef<ModuleOp> module = parseLocatedModule(*sourceMgr, context);
        if (!module)
          return failure();
        LowerToRuntimeOptions options;
        options.programName = programName;
        return translateProgramToCpp(*module, os, options);
      });
}

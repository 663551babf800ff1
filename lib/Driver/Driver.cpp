//===- Driver.cpp - The `lethe` command-line driver -----------------------===//

#include "lethe/Driver/Driver.h"
#include "lethe/Driver/Commands.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace lethe;
namespace cl = llvm::cl;

namespace {
/// Options shared by the commands, registered once per subcommand.
struct DriverCommandLine {
  cl::OptionCategory category{"Lethe options"};
  cl::SubCommand report{"report",
                        "Memory profile and predicted step time of the "
                        "unplanned step"};

  cl::opt<std::string> graph{cl::Positional, cl::Required,
                             cl::desc("<graph.json | graph.mlir>"),
                             cl::sub(report), cl::cat(category)};
  cl::opt<std::string> device{
      "device", cl::init("h200"),
      cl::desc("Device profile: h100, h200, a100, or a JSON file path"),
      cl::value_desc("name|file"), cl::sub(report), cl::cat(category)};
  cl::opt<std::string> json{"json", cl::desc("Also write the numbers as JSON"),
                            cl::value_desc("file"), cl::sub(report), cl::cat(category)};
  cl::opt<std::string> trace{
      "trace",
      cl::desc("Write a Chrome-trace / Perfetto timeline (ui.perfetto.dev)"),
      cl::value_desc("file"), cl::sub(report), cl::cat(category)};
  cl::opt<unsigned> top{"top", cl::init(10),
                        cl::desc("How many of the largest live tensors to list"),
                        cl::sub(report), cl::cat(category)};

  CommandOptions toOptions() const {
    CommandOptions options;
    options.graphPath = graph;
    options.device = device;
    options.jsonPath = json;
    options.tracePath = trace;
    options.top = top;
    return options;
  }
};
} // namespace

int lethe::runLetheDriver(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  DriverCommandLine commandLine;
  // Only Lethe's options in --help, not every LLVM and MLIR flag linked in.
  cl::HideUnrelatedOptions(commandLine.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Lethe: plan training-step activation memory (retain, recompute, "
      "offload)\n\n"
      "  lethe report GRAPH [--device D] [--json FILE] [--trace FILE]\n");

  MLIRContext context;
  // Diagnostics print with their source location (the node of an exported
  // graph, or the line of an MLIR file).
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context, llvm::errs());

  LogicalResult result = failure();
  if (commandLine.report) {
    result = runReportCommand(commandLine.toOptions(), context);
  } else {
    llvm::errs() << "error: no command given; run 'lethe --help'\n";
    return 1;
  }
  return succeeded(result) ? 0 : 1;
}

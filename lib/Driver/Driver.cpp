//===- Driver.cpp - The `lethe` command-line driver -----------------------===//

#include "lethe/Driver/Driver.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Driver/Commands.h"
#include "lethe/Import/Diagnostics.h"
#include "lethe/Pipelines/Pipelines.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>

using namespace mlir;
using namespace lethe;
namespace cl = llvm::cl;

namespace {
/// Makes `option`, declared by a pass, a flag of the driver's `commands`
/// too (it stays its pass's), listed in the driver's help under `category`.
void addToCommands(cl::Option &option,
                   llvm::ArrayRef<cl::SubCommand *> commands,
                   cl::OptionCategory &category) {
  // addArgument registers an option in the subcommands it names: name only
  // the commands for the call, then all of them.
  llvm::SmallPtrSet<cl::SubCommand *, 1> own = option.Subs;
  option.Subs.clear();
  for (cl::SubCommand *command : commands)
    option.addSubCommand(*command);
  option.addArgument();
  option.Subs.insert(own.begin(), own.end());
  option.addCategory(category);
}

/// The driver's command line. The planner's flags are the lethe-plan
/// pass's options and `--contention` is lethe-pipeline's (Passes.td,
/// Pipelines.h): names, help and defaults declared once, there; only the
/// driver's own flags (files, `--top`, `--build`) are declared here.
struct DriverCommandLine {
  cl::OptionCategory category{"Lethe options"};
  cl::SubCommand report{"report",
                        "Memory profile and predicted step time of the "
                        "unplanned step"};
  cl::SubCommand plan{"plan", "Decide retain / recompute / offload for every "
                              "activation under a device-memory budget"};
  cl::SubCommand simulate{"simulate",
                          "Compile under a budget and simulate the program "
                          "on the device profile"};
  cl::SubCommand compile{"compile",
                         "Compile under a budget: write the allocated "
                         "program, the plan, the simulated program and the "
                         "trace"};

  /// `lethe plan`, `simulate`, `compile`: every lethe-plan option (but
  /// `bound`, which only `lethe plan` reports); `device` for `report` too.
  PlanOptionFlags planFlags;
  /// `lethe simulate`, `compile`: lethe-pipeline's `contention`.
  LethePipelineOptions pipelineFlags;
  /// `--plan FILE`, the name `plan-file` had before it was the pass's.
  std::optional<cl::alias> planFileAlias;

  cl::opt<std::string> graph{
      cl::Positional,   cl::Required,     cl::desc("<graph.json | graph.mlir>"),
      cl::sub(report),  cl::sub(plan),    cl::sub(simulate),
      cl::sub(compile), cl::cat(category)};
  cl::opt<std::string> json{"json",
                            cl::desc("Also write the numbers as JSON"),
                            cl::value_desc("file"),
                            cl::sub(report),
                            cl::sub(plan),
                            cl::sub(simulate),
                            cl::cat(category)};
  cl::opt<std::string> trace{
      "trace",
      cl::desc("Write a Chrome-trace / Perfetto timeline (ui.perfetto.dev)"),
      cl::value_desc("file"),
      cl::sub(report),
      cl::sub(plan),
      cl::sub(simulate),
      cl::cat(category)};
  cl::opt<unsigned> top{
      "top",
      cl::init(10),
      cl::desc("How many of the largest live tensors (report) or decisions "
               "(plan) to list"),
      cl::sub(report),
      cl::sub(plan),
      cl::cat(category)};

  // `lethe simulate` / `lethe compile`.
  cl::opt<std::string> plot{
      "plot",
      cl::desc("Write an SVG of device memory over time (planned, "
               "unplanned, budget)"),
      cl::value_desc("file"), cl::sub(simulate), cl::cat(category)};
  cl::opt<std::string> output{
      "o",
      cl::desc("Directory for step.mlir, step.cpp, plan.json, "
               "simulation.json and trace.json"),
      cl::value_desc("dir"), cl::sub(compile), cl::cat(category)};
  cl::opt<bool> build{"build",
                      cl::desc("Also build step.so, the program lethe-run "
                               "loads (needs a C++ compiler, not CUDA)"),
                      cl::sub(compile), cl::cat(category)};

  DriverCommandLine() {
    for (cl::Option *option : planFlags.getOptions()) {
      StringRef name = option->ArgStr;
      if (name == "device")
        addToCommands(*option, {&report, &plan, &simulate, &compile}, category);
      else if (name == "bound")
        addToCommands(*option, {&plan}, category);
      else
        addToCommands(*option, {&plan, &simulate, &compile}, category);
    }
    // Planning needs a budget here (the pass takes none as no limit).
    cl::Option *budget = planFlags.lookup("budget");
    assert(budget && "lethe-plan has a budget option");
    budget->setNumOccurrencesFlag(cl::Required);
    planFileAlias.emplace("plan", cl::aliasopt(*planFlags.lookup("plan-file")),
                          cl::desc("Alias for --plan-file"));
    addToCommands(pipelineFlags.contention, {&simulate, &compile}, category);
  }

  CommandOptions toOptions() const {
    CommandOptions options;
    options.graphPath = graph;
    options.plan = planFlags.getValues();
    options.jsonPath = json;
    options.tracePath = trace;
    options.top = top;
    options.plotPath = plot;
    options.outputDir = output;
    options.contention = pipelineFlags.contention;
    options.build = build;
    return options;
  }
};

/// `lethe calibrate ARGS` runs `lethe-calibrate ARGS` from beside this
/// executable: measuring needs the CUDA runtime, which the compiler does not
/// link (docs/CostModel.md, "Calibrating a device").
int runCalibrate(int argc, char **argv) {
  std::string self =
      llvm::sys::fs::getMainExecutable(argv[0], (void *)&runCalibrate);
  llvm::SmallString<256> tool(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(tool, "lethe-calibrate");
  if (!llvm::sys::fs::can_execute(tool)) {
    llvm::errs() << "error: 'lethe calibrate' runs " << tool
                 << ", which is not built (it comes with the CUDA runtime: "
                    "LETHE_BUILD_RUNTIME, or scripts/build-runtime.sh)\n";
    return 1;
  }
  std::vector<llvm::StringRef> args = {tool};
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(tool, args, std::nullopt, {}, 0, 0,
                                     &error);
  if (rc < 0) {
    llvm::errs() << "error: cannot run " << tool << ": " << error << "\n";
    return 1;
  }
  return rc;
}
} // namespace

int lethe::runLetheDriver(int argc, char **argv) {
  if (argc > 1 && llvm::StringRef(argv[1]) == "calibrate")
    return runCalibrate(argc, argv);
  llvm::InitLLVM initLLVM(argc, argv);
  DriverCommandLine commandLine;
  // Only Lethe's options in --help, not every LLVM and MLIR flag linked in.
  cl::HideUnrelatedOptions(commandLine.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Lethe: plan training-step activation memory (retain, recompute, "
      "offload)\n\n"
      "  lethe report GRAPH [--device D] [--json FILE] [--trace FILE]\n"
      "  lethe plan GRAPH --budget B [--policy P | --plan-file FILE] "
      "[--device D] "
      "[--json FILE] [--trace FILE]\n"
      "  lethe simulate GRAPH --budget B [--policy P] [--device D] "
      "[--json FILE] [--trace FILE] [--plot FILE]\n"
      "  lethe compile GRAPH --budget B [--policy P] [--device D] -o DIR "
      "[--build]\n"
      "  lethe calibrate [--out FILE] [--gpus N] [--quick] ...   measure "
      "this machine's GPUs into a device profile (runs lethe-calibrate; "
      "--help)\n");

  // `--budget=` would otherwise mean "no limit".
  if ((commandLine.plan || commandLine.simulate || commandLine.compile) &&
      llvm::StringRef(commandLine.planFlags.getValues().budget)
          .trim()
          .empty()) {
    llvm::errs() << "error: --budget needs a value: bytes, a size (2GiB), "
                    "a percentage of the unplanned peak (60%) or least\n";
    return 1;
  }

  // One thread, as the C API's: no command runs anything in parallel, and
  // without threads the context's attribute and type uniquing takes no
  // locks (a whole `lethe plan` builds millions of attributes).
  MLIRContext context(MLIRContext::Threading::DISABLED);
  // The constructor leaves the uniquers locking: only this call turns
  // their locks off (~2% of a `lethe plan` at 100k ops was taking them).
  context.disableMultithreading();
  // A failing pass would attach the whole function to its error.
  context.printOpOnDiagnostic(false);
  // Diagnostics print with their source location (the node of an exported
  // graph, or the line of an MLIR file) and only the part of a long line
  // around it.
  CompactDiagnosticHandler diagnostics(&context, llvm::errs());

  LogicalResult result = failure();
  if (commandLine.report) {
    result = runReportCommand(commandLine.toOptions(), context);
  } else if (commandLine.plan) {
    result = runPlanCommand(commandLine.toOptions(), context);
  } else if (commandLine.simulate) {
    result = runSimulateCommand(commandLine.toOptions(), context);
  } else if (commandLine.compile) {
    result = runCompileCommand(commandLine.toOptions(), context);
  } else {
    llvm::errs() << "error: no command given; run 'lethe --help'\n";
    return 1;
  }
  return succeeded(result) ? 0 : 1;
}

//===- Driver.cpp - The `lethe` command-line driver -----------------------===//

#include "lethe/Driver/Driver.h"
#include "lethe/Driver/Commands.h"
#include "lethe/Import/Diagnostics.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace lethe;
namespace cl = llvm::cl;

namespace {
/// Options shared by the commands, registered once per subcommand.
struct DriverCommandLine {
  /// The planner's defaults: the lethe-plan pass's, declared in Passes.td
  /// (first, so that the options below are initialized from it).
  const PlanActivationsOptions defaults;
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
                         "program, the plan and the trace"};

  cl::opt<std::string> graph{
      cl::Positional,   cl::Required,     cl::desc("<graph.json | graph.mlir>"),
      cl::sub(report),  cl::sub(plan),    cl::sub(simulate),
      cl::sub(compile), cl::cat(category)};
  cl::opt<std::string> device{
      "device",
      cl::init(defaults.device),
      cl::desc("Device profile: h100, h200, a100, or a JSON file path"),
      cl::value_desc("name|file"),
      cl::sub(report),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
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

  // `lethe plan`: the options of the lethe-plan pass (docs/Planner.md),
  // with its defaults; PlanStepTest checks that every one is here.
  cl::opt<std::string> budget{
      "budget",
      cl::Required,
      cl::desc("Device bytes the step may allocate at any instant: bytes, "
               "a size (2GiB, 800MB) or a percentage of the unplanned peak "
               "(60%)"),
      cl::value_desc("B"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
  cl::opt<std::string> policy{
      "policy",
      cl::init(defaults.policy),
      cl::desc("none, full, every-n, selective-op, offload-all or auto"),
      cl::value_desc("P"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
  cl::opt<int> everyN{"n",
                      cl::init(defaults.everyN),
                      cl::desc("every-n: checkpoint layers 0, n, 2n, ..."),
                      cl::sub(plan),
                      cl::sub(simulate),
                      cl::sub(compile),
                      cl::cat(category)};
  cl::list<std::string> keepOps{
      "keep-ops",
      cl::CommaSeparated,
      cl::desc("selective-op: op kinds whose outputs are kept (default: "
               "matmul-like ops and attention)"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
  cl::opt<bool> offloadKept{"offload-kept",
                            cl::init(defaults.offloadKept),
                            cl::desc("selective-op: send the kept outputs to "
                                     "host instead"),
                            cl::sub(plan),
                            cl::sub(simulate),
                            cl::sub(compile),
                            cl::cat(category)};
  cl::opt<std::string> minOffloadBytes{
      "min-offload-bytes",
      cl::init(defaults.minOffloadBytes),
      cl::desc("Never offload a storage smaller than this"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
  cl::opt<std::string> hostBudget{
      "host-budget",
      cl::init(defaults.hostBudget),
      cl::desc("Pinned host bytes offloaded storages may occupy (default: "
               "the device profile's)"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
  cl::opt<std::string> solver{"solver",
                              cl::init(defaults.solver),
                              cl::desc("auto policy: fast, exact or auto"),
                              cl::sub(plan),
                              cl::sub(simulate),
                              cl::sub(compile),
                              cl::cat(category)};
  cl::opt<bool> replayRng{
      "replay-rng",
      cl::init(defaults.replayRng),
      cl::desc("Allow recomputing RNG ops (only sound when the runtime "
               "replays their RNG state)"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
  cl::opt<bool> bound{
      "bound", cl::init(defaults.bound),
      cl::desc("Also compute a lower bound on the step-time overhead of "
               "any plan at the budget, and the plan's gap to it"),
      cl::sub(plan), cl::cat(category)};
  cl::opt<int64_t> alignment{
      "alignment",
      cl::init(defaults.alignment),
      cl::desc("Plan every allocated storage at its size rounded up to this "
               "(a power of two): the device arena's alignment"),
      cl::value_desc("bytes"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};
  cl::opt<std::string> planFile{
      "plan",
      cl::init(defaults.planFile),
      cl::desc("Evaluate (and compile) the decisions in this JSON file "
               "instead of planning: {\"decisions\": [{\"node_id\": N or "
               "\"node\": NAME, \"output\": K, \"decision\": retain, "
               "recompute or offload}]}, as `lethe plan --json` writes "
               "them"),
      cl::value_desc("FILE"),
      cl::sub(plan),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};

  // `lethe simulate` / `lethe compile`.
  cl::opt<std::string> plot{
      "plot",
      cl::desc("Write an SVG of device memory over time (planned, "
               "unplanned, budget)"),
      cl::value_desc("file"), cl::sub(simulate), cl::cat(category)};
  cl::opt<std::string> output{
      "o",
      cl::desc("Directory for step.mlir, step.cpp, plan.json and trace.json"),
      cl::value_desc("dir"), cl::sub(compile), cl::cat(category)};
  cl::opt<bool> build{"build",
                      cl::desc("Also build step.so, the program lethe-run "
                               "loads (needs a C++ compiler, not CUDA)"),
                      cl::sub(compile), cl::cat(category)};
  cl::opt<std::string> contention{
      "contention",
      cl::init("auto"),
      cl::desc("How host copies share time with collectives: auto (from "
               "the device profile and a simulation), on (separate), off "
               "(overlap), yield"),
      cl::sub(simulate),
      cl::sub(compile),
      cl::cat(category)};

  CommandOptions toOptions() const {
    CommandOptions options;
    options.graphPath = graph;
    options.plan.device = device;
    options.jsonPath = json;
    options.tracePath = trace;
    options.top = top;
    options.plan.budget = budget;
    options.plan.policy = policy;
    options.plan.everyN = everyN;
    options.plan.keepOps.assign(keepOps.begin(), keepOps.end());
    options.plan.offloadKept = offloadKept;
    options.plan.minOffloadBytes = minOffloadBytes;
    options.plan.hostBudget = hostBudget;
    options.plan.solver = solver;
    options.plan.replayRng = replayRng;
    options.plan.bound = bound;
    options.plan.alignment = alignment;
    options.plan.planFile = planFile;
    options.plotPath = plot;
    options.outputDir = output;
    options.contention = contention;
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
      "  lethe plan GRAPH --budget B [--policy P | --plan FILE] [--device D] "
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
      llvm::StringRef(commandLine.budget).trim().empty()) {
    llvm::errs() << "error: --budget needs a value: bytes, a size (2GiB) or "
                    "a percentage of the unplanned peak (60%)\n";
    return 1;
  }

  MLIRContext context;
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

//===- Lethe.cpp - C API of Lethe -----------------------------------------===//
//
// Thin wrappers over the library functions the `lethe` driver calls
// (GraphLoader, Report): each entry point runs with a diagnostic handler that
// collects every error into the returned status instead of printing it.
//
//===----------------------------------------------------------------------===//

#include "lethe-c/Lethe.h"

#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Driver/Commands.h"
#include "lethe/Driver/GraphLoader.h"
#include "lethe/Driver/Report.h"
#include "lethe/Driver/Simulation.h"
#include "lethe/Import/Diagnostics.h"
#include "lethe/Pipelines/Pipelines.h"
#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Simulator/Timeline.h"
#include "lethe/Support/Files.h"
#include "lethe/Support/JsonSyntax.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <memory>

using namespace mlir;

struct LetheGraphImpl {
  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
  std::string device;
};

struct LethePlanImpl {
  LetheGraphImpl *graph;
  lethe::PlannedStep step;
};

namespace {

LetheString makeString(llvm::StringRef text) {
  char *data = static_cast<char *>(std::malloc(text.size() + 1));
  if (!data)
    return {nullptr, 0};
  std::memcpy(data, text.data(), text.size());
  data[text.size()] = '\0';
  return {data, text.size()};
}

LetheStatus okStatus() { return {{nullptr, 0}}; }

LetheStatus errorStatus(llvm::StringRef message) {
  return {makeString(message.empty() ? "lethe: unknown error" : message)};
}

/// Returns the JSON document `text` in `out`, unless it does not parse (a
/// bare `inf` or `nan`): callers get JSON or an error, never something else.
LetheStatus returnJson(llvm::StringRef text, LetheString *out) {
  if (llvm::Error invalid = lethe::checkJsonSyntax(text))
    return errorStatus("lethe: internal error: the result is not valid JSON (" +
                       llvm::toString(std::move(invalid)) + ")");
  *out = makeString(text);
  return okStatus();
}

/// Collects the errors (and the notes attached to them) emitted in a
/// context while it is alive, one per line, with their locations.
class ErrorCollector {
public:
  explicit ErrorCollector(MLIRContext &context)
      : handler(&context, [this](Diagnostic &diag) {
          // Errors go to the status; warnings and remarks are dropped rather
          // than printed by a library.
          if (diag.getSeverity() == DiagnosticSeverity::Error) {
            append(diag);
            for (Diagnostic &note : diag.getNotes())
              append(note);
          }
          return mlir::success();
        }) {}

  LetheStatus status(llvm::StringRef fallback) const {
    return errorStatus(messages.empty() ? fallback : llvm::StringRef(messages));
  }

private:
  void append(Diagnostic &diag) {
    llvm::raw_string_ostream os(messages);
    if (!messages.empty())
      os << "\n";
    // The message itself names the node.
    lethe::printFilePosition(os, lethe::firstFilePosition(diag.getLocation()));
    os << lethe::truncateText(diag.str(), lethe::kMaxMessageBytes);
  }

  std::string messages;
  ScopedDiagnosticHandler handler;
};

/// The planner's options from the C struct (NULL strings, zero numbers:
/// the lethe-plan pass's defaults), on the graph's device.
lethe::PlanActivationsOptions planOptions(const LetheGraphImpl &graph,
                                          const LethePlanOptions *options) {
  lethe::PlanActivationsOptions text;
  text.device = graph.device;
  if (options) {
    if (options->budget)
      text.budget = options->budget;
    if (options->policy)
      text.policy = options->policy;
    if (options->every_n)
      text.everyN = options->every_n;
    if (options->keep_ops) {
      llvm::SmallVector<llvm::StringRef> kinds;
      llvm::StringRef(options->keep_ops).split(kinds, ',', -1, false);
      for (llvm::StringRef kind : kinds)
        text.keepOps.push_back(kind.trim().str());
    }
    text.offloadKept = options->offload_kept != 0;
    if (options->min_offload_bytes)
      text.minOffloadBytes = options->min_offload_bytes;
    if (options->host_budget)
      text.hostBudget = options->host_budget;
    if (options->solver)
      text.solver = options->solver;
    text.replayRng = options->replay_rng != 0;
    text.bound = options->bound != 0;
  }
  return text;
}

/// The planner's options from the lethe-plan pass's option text (NULL: the
/// defaults), on the graph's device.
llvm::Expected<lethe::PlanActivationsOptions>
planOptions(const LetheGraphImpl &graph, const char *text) {
  llvm::Expected<lethe::PlanActivationsOptions> options =
      lethe::parsePlanActivationsOptions(text ? text : "");
  if (!options)
    return options.takeError();
  // The device is the graph's: its op times were filled in for it.
  if (options->device != lethe::PlanActivationsOptions().device &&
      options->device != graph.device)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "device '" + options->device + "' is not the graph's ('" +
            graph.device +
            "'): a graph is planned for the device it was "
            "loaded for");
  options->device = graph.device;
  return options;
}

/// Plans `graph` under `options` (planStep, as every route plans).
LetheStatus planGraph(LetheGraph graph,
                      const lethe::PlanActivationsOptions &options,
                      LethePlan *plan) {
  if (!graph || !plan)
    return errorStatus("lethe: null graph or output");
  *plan = nullptr;
  ErrorCollector errors(*graph->context);
  func::FuncOp func = lethe::getTrainingFunction(*graph->module);
  if (!func)
    return errors.status("lethe: no training function");
  llvm::Expected<lethe::DeviceProfile> device =
      lethe::DeviceProfile::load(options.device);
  if (!device)
    return errorStatus(llvm::toString(device.takeError()));
  std::string message;
  // `auto`'s ladder, kept for the least-budget search of an infeasible
  // plan, which replays it instead of building it again (as `lethe plan`).
  auto families = std::make_shared<lethe::AutoFamilies>();
  FailureOr<lethe::PlannedStep> step = lethe::planStep(
      func, options, *device,
      [&](const llvm::Twine &error) { message = error.str(); },
      families.get());
  if (!message.empty())
    return errorStatus(message);
  if (failed(step))
    return errors.status("lethe: the graph cannot be planned");
  // The planner's own plan, judged by its peak, unlike `lethe plan`'s
  // (agreeWithPipeline): the torch backend runs it under PyTorch's
  // allocator, where Lethe's arena packing does not apply;
  // letheGraphCompile re-plans for packing as `lethe compile` does.
  if (!step->plan.feasible) {
    // The least budget stated is the one letheGraphCompile meets: the
    // planner's least peak once packed.
    lethe::LethePipelineConfig config;
    config.plan = options;
    config.annotateCosts = false;
    FailureOr<int64_t> least =
        lethe::findLeastFunctionBudget(*graph->module, func, config, families);
    if (succeeded(least))
      step->plan.leastFeasibleBudget = *least;
  }
  *plan = new LethePlanImpl{graph, std::move(*step)};
  return okStatus();
}

/// Compiles `graph` under `options` with the whole pipeline.
LetheStatus compileGraph(LetheGraph graph,
                         const lethe::PlanActivationsOptions &options,
                         LetheString *program, LetheString *json) {
  ErrorCollector errors(*graph->context);
  OwningOpRef<ModuleOp> module = graph->module->clone();
  lethe::LethePipelineConfig config;
  config.plan = options;
  config.annotateCosts = false;
  lethe::SimulationReport report;
  if (failed(lethe::runLethePipeline(*module, config, &report.outcome)))
    return errors.status("lethe: the graph cannot be compiled");
  func::FuncOp func = lethe::getTrainingFunction(*module);
  if (!func)
    return errors.status("lethe: no training function");
  llvm::Expected<lethe::DeviceProfile> device =
      lethe::DeviceProfile::load(options.device);
  if (!device)
    return errorStatus(llvm::toString(device.takeError()));
  FailureOr<lethe::ProgramSimulation> planned =
      lethe::simulateProgram(func, *device);
  if (failed(planned))
    return errors.status("lethe: the program cannot be simulated");
  report.planned = std::move(*planned);
  report.device = device->name;
  report.policy = config.plan.policy;
  lethe::readCompiledFigures(*module, func, report);
  if (program) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    *program = makeString(text);
  }
  if (json) {
    llvm::json::Object document =
        *lethe::simulationToJson(report).getAsObject();
    document["values"] = lethe::compiledDecisionsToJson(report.outcome);
    LetheStatus status = returnJson(
        llvm::formatv("{0:2}", llvm::json::Value(std::move(document))).str(),
        json);
    if (!letheStatusIsSuccess(status) && program) {
      letheStringDestroy(*program);
      *program = {nullptr, 0};
    }
    return status;
  }
  return okStatus();
}

/// Writes through a temporary renamed into place on success.
LetheStatus writeFile(const char *path,
                      llvm::function_ref<void(llvm::raw_ostream &)> write,
                      bool json = false) {
  lethe::OutputFiles outputs;
  if (llvm::Error error = outputs.add(path, write, json))
    return errorStatus("lethe: " + llvm::toString(std::move(error)));
  if (llvm::Error error = outputs.commit())
    return errorStatus("lethe: " + llvm::toString(std::move(error)));
  return okStatus();
}

LetheStatus load(std::unique_ptr<llvm::MemoryBuffer> buffer, bool json,
                 const char *device, LetheGraph *graph) {
  if (!graph)
    return errorStatus("lethe: no LetheGraph to store the result in");
  *graph = nullptr;
  auto impl = std::make_unique<LetheGraphImpl>();
  impl->context =
      std::make_unique<MLIRContext>(MLIRContext::Threading::DISABLED);
  // The constructor leaves the uniquers locking; this turns them off.
  impl->context->disableMultithreading();
  // A failing pass would attach the whole function to its error.
  impl->context->printOpOnDiagnostic(false);
  // NULL: the planner's default device.
  impl->device = device ? device : lethe::PlanActivationsOptions().device;
  ErrorCollector errors(*impl->context);
  lethe::LoadOptions options;
  options.device = impl->device;
  impl->module = lethe::loadTrainingGraph(std::move(buffer), json,
                                          *impl->context, options);
  if (!impl->module)
    return errors.status("lethe: could not load the graph");
  *graph = impl.release();
  return okStatus();
}

} // namespace

extern "C" {

int letheStatusIsSuccess(LetheStatus status) {
  return status.message.data == nullptr;
}

void letheStatusDestroy(LetheStatus status) {
  letheStringDestroy(status.message);
}

void letheStringDestroy(LetheString string) { std::free(string.data); }

const char *letheVersion(void) { return "0.1.0"; }

LetheStatus lethePlanOptionDefaults(LetheString *options) {
  if (!options)
    return errorStatus("lethe: null output");
  // As the pass prints itself: "lethe-plan{alignment=256 bound=false ...}".
  std::string printed;
  llvm::raw_string_ostream os(printed);
  lethe::createPlanActivations()->printAsTextualPipeline(os);
  *options =
      makeString(llvm::StringRef(printed).split('{').second.rsplit('}').first);
  return okStatus();
}

LetheStatus letheGraphLoadFile(const char *path, const char *device,
                               LetheGraph *graph) {
  if (!path)
    return errorStatus("lethe: no graph path given");
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      lethe::readInputFile(path);
  if (!buffer)
    return errorStatus("lethe: " + llvm::toString(buffer.takeError()));
  bool json = lethe::looksLikeJson((*buffer)->getBuffer());
  return load(std::move(*buffer), json, device, graph);
}

LetheStatus letheGraphLoadString(const char *data, size_t length,
                                 const char *format, const char *name,
                                 const char *device, LetheGraph *graph) {
  if (!data && length)
    return errorStatus("lethe: no graph text given");
  llvm::StringRef kind = format ? format : "";
  if (kind != "json" && kind != "mlir")
    return errorStatus(("lethe: unknown graph format '" + kind +
                        "' (expected 'json' or 'mlir')")
                           .str());
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(data, length),
                                           name ? name : "<string>");
  return load(std::move(buffer), kind == "json", device, graph);
}

void letheGraphDestroy(LetheGraph graph) { delete graph; }

LetheStatus letheGraphPrint(LetheGraph graph, LetheString *mlir) {
  if (!graph || !mlir)
    return errorStatus("lethe: null graph or output");
  std::string text;
  llvm::raw_string_ostream os(text);
  graph->module->print(os);
  *mlir = makeString(text);
  return okStatus();
}

LetheStatus letheGraphReport(LetheGraph graph, unsigned top,
                             LetheString *json) {
  if (!graph || !json)
    return errorStatus("lethe: null graph or output");
  ErrorCollector errors(*graph->context);
  func::FuncOp func = lethe::getTrainingFunction(*graph->module);
  if (!func)
    return errors.status("lethe: no training function");
  lethe::LifetimeAnalysis analysis(func);
  if (!analysis.isValid())
    return errors.status("lethe: the graph's lifetimes could not be analysed");
  lethe::StepReport report =
      lethe::buildStepReport(analysis, *graph->module, graph->device, top);
  std::string text;
  llvm::raw_string_ostream os(text);
  lethe::writeStepReportJSON(report, os);
  return returnJson(text, json);
}

LetheStatus letheGraphWriteTrace(LetheGraph graph, const char *path) {
  if (!graph || !path)
    return errorStatus("lethe: null graph or path");
  ErrorCollector errors(*graph->context);
  func::FuncOp func = lethe::getTrainingFunction(*graph->module);
  if (!func)
    return errors.status("lethe: no training function");
  lethe::LifetimeAnalysis analysis(func);
  if (!analysis.isValid())
    return errors.status("lethe: the graph's lifetimes could not be analysed");
  return writeFile(
      path,
      [&](llvm::raw_ostream &os) {
        lethe::writeChromeTrace(lethe::buildUnplannedTimeline(
                                    analysis.getGraph(), analysis.getProfile()),
                                os);
      },
      /*json=*/true);
}

LetheStatus letheGraphPlan(LetheGraph graph, const LethePlanOptions *options,
                           LethePlan *plan) {
  if (!graph || !plan)
    return errorStatus("lethe: null graph or output");
  return planGraph(graph, planOptions(*graph, options), plan);
}

LetheStatus letheGraphPlanWithOptions(LetheGraph graph, const char *options,
                                      LethePlan *plan) {
  if (!graph || !plan)
    return errorStatus("lethe: null graph or output");
  *plan = nullptr;
  llvm::Expected<lethe::PlanActivationsOptions> parsed =
      planOptions(*graph, options);
  if (!parsed)
    return errorStatus(llvm::toString(parsed.takeError()));
  return planGraph(graph, *parsed, plan);
}

void lethePlanDestroy(LethePlan plan) { delete plan; }

int lethePlanIsFeasible(LethePlan plan) {
  return plan && plan->step.plan.feasible;
}

LetheStatus lethePlanJson(LethePlan plan, LetheString *json) {
  if (!plan || !json)
    return errorStatus("lethe: null plan or output");
  std::string text;
  llvm::raw_string_ostream os(text);
  lethe::writePlanJson(os, plan->step.plan, plan->step.graph);
  // The document alone, as the C API has always returned it.
  text.pop_back();
  return returnJson(text, json);
}

LetheStatus lethePlanWriteTrace(LethePlan plan, const char *path) {
  if (!plan || !path)
    return errorStatus("lethe: null plan or path");
  const lethe::PlannedStep &step = plan->step;
  lethe::Schedule schedule;
  llvm::Expected<lethe::SimResult> sim = lethe::simulatePlan(
      step.graph, step.device, step.options, step.plan, &schedule);
  if (!sim)
    return errorStatus(llvm::toString(sim.takeError()));
  lethe::Timeline timeline =
      lethe::buildTimeline(step.graph, schedule, *sim, step.plan.budgetBytes);
  return writeFile(
      path,
      [&](llvm::raw_ostream &os) { lethe::writeChromeTrace(timeline, os); },
      /*json=*/true);
}

LetheStatus letheGraphCompile(LetheGraph graph, const LethePlanOptions *options,
                              LetheString *program, LetheString *json) {
  if (!graph)
    return errorStatus("lethe: null graph");
  return compileGraph(graph, planOptions(*graph, options), program, json);
}

LetheStatus letheGraphCompileWithOptions(LetheGraph graph, const char *options,
                                         LetheString *program,
                                         LetheString *json) {
  if (!graph)
    return errorStatus("lethe: null graph");
  llvm::Expected<lethe::PlanActivationsOptions> parsed =
      planOptions(*graph, options);
  if (!parsed)
    return errorStatus(llvm::toString(parsed.takeError()));
  return compileGraph(graph, *parsed, program, json);
}

} // extern "C"

//===- PlanCommand.cpp - `lethe plan` -------------------------------------===//
//
// Plans a graph under a budget and prints what a person needs to judge the
// plan: peak and step time against the unplanned step, counts per
// decision, the largest decisions and why. `--json` writes the same for
// programs, `--trace` the simulated timeline.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Driver/Commands.h"
#include "lethe/Driver/GraphLoader.h"
#include "lethe/Pipelines/Pipelines.h"
#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Simulator/Timeline.h"

#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace lethe;

namespace {

struct DecisionCounts {
  int64_t count[3] = {0, 0, 0};
  int64_t bytes[3] = {0, 0, 0};
};

DecisionCounts countDecisions(const Plan &plan, const TrainingGraph &graph) {
  DecisionCounts counts;
  for (const ActivationDecision &d : plan.decisions) {
    unsigned k = static_cast<unsigned>(d.decision);
    ++counts.count[k];
    counts.bytes[k] += graph.storageBytes(d.value);
  }
  return counts;
}

void printPlan(const Plan &plan, const TrainingGraph &graph,
               const CommandOptions &options, llvm::raw_ostream &os) {
  auto percent = [](double x) { return llvm::formatv("{0:F1}%", 100.0 * x); };
  os << "plan:             policy " << stringifyPolicy(plan.policy) << " on "
     << options.plan.device << ", budget " << formatBytes(plan.budgetBytes);
  if (plan.baselinePeakBytes > 0)
    os << " ("
       << percent(static_cast<double>(plan.budgetBytes) /
                  static_cast<double>(plan.baselinePeakBytes))
       << " of the unplanned peak)";
  os << "\n";
  os << "peak memory:      " << formatBytes(plan.peakBytes) << " ("
     << plan.peakBytes << " B), unplanned " << formatBytes(plan.baselinePeakBytes)
     << "\n";
  double overhead = plan.baselineStepUs > 0
                        ? plan.stepUs / plan.baselineStepUs - 1.0
                        : 0.0;
  os << llvm::formatv("step time:        {0:F3} ms, unplanned {1:F3} ms "
                      "(overhead {2:F2}%)\n",
                      plan.stepUs / 1000.0, plan.baselineStepUs / 1000.0,
                      100.0 * overhead);
  DecisionCounts counts = countDecisions(plan, graph);
  os << llvm::formatv("decisions:        {0} retained ({1}), {2} recomputed "
                      "({3}), {4} offloaded ({5})\n",
                      counts.count[0], formatBytes(counts.bytes[0]),
                      counts.count[1], formatBytes(counts.bytes[1]),
                      counts.count[2], formatBytes(counts.bytes[2]));
  if (const std::optional<OverheadBound> &bound = plan.lowerBound) {
    if (!bound->feasible)
      os << "lower bound:      no plan fits this budget (the relaxation "
            "proves it)\n";
    else
      os << llvm::formatv("lower bound:      overhead >= {0:F2}% for any "
                          "plan; this plan's gap {1:F2} points{2} (bound "
                          "solved in {3:F1} ms)\n",
                          100.0 * bound->overhead,
                          100.0 * (overhead - bound->overhead),
                          bound->converged ? "" : " (bound not converged)",
                          bound->solveMs);
  }
  os << llvm::formatv("solve time:       {0:F1} ms\n", plan.solveMs);

  // The largest recomputed or offloaded activations.
  std::vector<const ActivationDecision *> dropped;
  for (const ActivationDecision &d : plan.decisions)
    if (d.decision != Decision::Retain)
      dropped.push_back(&d);
  llvm::stable_sort(dropped, [&](const ActivationDecision *x,
                                 const ActivationDecision *y) {
    return graph.storageBytes(x->value) > graph.storageBytes(y->value);
  });
  if (dropped.empty())
    return;
  os << "largest decisions:\n";
  for (size_t i = 0; i < dropped.size() && i < options.top; ++i) {
    const ActivationDecision &d = *dropped[i];
    os << llvm::formatv("  {0,-10} {1,10}  {2}\n             {3}\n",
                        stringifyDecision(d.decision),
                        formatBytes(graph.storageBytes(d.value)),
                        describeValue(graph, d.value), d.reason);
  }
}

} // namespace

// Streamed, not built as a json::Value and printed: at 100k ops building
// and freeing the Value was ~4% of a whole `lethe plan`. Members are
// written in the order llvm::json prints an Object's (sorted by key), so
// the document is the one the Value printed.
void lethe::writePlanJson(llvm::raw_ostream &os, const Plan &plan,
                          const TrainingGraph &graph) {
  DecisionCounts counts = countDecisions(plan, graph);
  // Nodes by their id (`lethe.node_id`: the exported node's), never by
  // position: the node and output the decision is about, and the nodes its
  // placement names.
  auto idOf = [&](NodeId node) -> llvm::json::Value {
    if (node < 0)
      return nullptr;
    if (const std::optional<int64_t> &id = graph.getNode(node).sourceId)
      return *id;
    return nullptr;
  };
  auto writeValue = [&](llvm::json::OStream &j, const ActivationDecision &d) {
    j.attribute("bytes", graph.storageBytes(d.value));
    j.attribute("decision", stringifyDecision(d.decision));
    j.attribute("id", stableValueId(graph, d.value));
    j.attribute("name", describeValue(graph, d.value));
    const GraphValue &decided = graph.getValue(d.value);
    if (!decided.isInput()) {
      const GraphNode &producer = graph.getNode(decided.producer);
      if (!producer.name.empty())
        j.attribute("node", producer.name);
      if (producer.sourceId)
        j.attribute("node_id", *producer.sourceId);
      j.attribute("output", decided.resultIndex);
    }
    if (d.decision == Decision::Offload)
      j.attribute("prefetch_after", idOf(d.prefetchAfter));
    j.attribute("reason", d.reason);
    if (d.decision != Decision::Retain)
      j.attributeArray(d.decision == Decision::Recompute ? "recomputed_ops"
                                                         : "rederived_views",
                       [&] {
                         for (NodeId node : d.recomputeNodes)
                           j.object([&] {
                             j.attribute("node_id", idOf(node));
                             j.attribute("op", graph.getNode(node).kind);
                           });
                       });
    if (d.decision == Decision::Offload)
      j.attribute("release_after", idOf(d.releaseAfter));
    if (d.decision != Decision::Retain)
      j.attribute("restore_before", idOf(d.firstBackwardUse));
  };
  double overhead =
      plan.baselineStepUs > 0 ? plan.stepUs / plan.baselineStepUs - 1.0 : 0.0;
  const std::optional<OverheadBound> &bound = plan.lowerBound;
  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("baseline_peak_bytes", plan.baselinePeakBytes);
    j.attribute("baseline_step_us", plan.baselineStepUs);
    j.attribute("budget_bytes", plan.budgetBytes);
    j.attributeObject("counts", [&] {
      j.attribute("offload", counts.count[2]);
      j.attribute("recompute", counts.count[1]);
      j.attribute("retain", counts.count[0]);
    });
    j.attribute("feasible", plan.feasible);
    if (bound)
      j.attribute("gap", bound->feasible && plan.feasible
                             ? llvm::json::Value(overhead - bound->overhead)
                             : nullptr);
    if (plan.leastFeasibleBudget)
      j.attribute("least_feasible_budget_bytes", *plan.leastFeasibleBudget);
    if (plan.leastWithRngReplay)
      j.attribute("least_budget_with_replay_rng_bytes",
                  *plan.leastWithRngReplay);
    if (bound) {
      j.attributeObject("lower_bound", [&] {
        j.attribute("columns", bound->columns);
        j.attribute("converged", bound->converged);
        j.attribute("feasible", bound->feasible);
        j.attribute("points", bound->points);
        j.attribute("rounds", bound->rounds);
        j.attribute("rows", bound->rows);
        j.attribute("solve_ms", bound->solveMs);
        j.attribute("step_us", bound->stepUs);
      });
      // null when the relaxation proves that no plan fits.
      j.attribute("lower_bound_overhead",
                  bound->feasible ? llvm::json::Value(bound->overhead)
                                  : nullptr);
    }
    j.attribute("overhead", overhead);
    j.attribute("peak_bytes", plan.peakBytes);
    j.attribute("policy", stringifyPolicy(plan.policy));
    j.attribute("solve_ms", plan.solveMs);
    j.attribute("step_us", plan.stepUs);
    j.attributeArray("values", [&] {
      for (const ActivationDecision &d : plan.decisions)
        j.object([&] { writeValue(j, d); });
    });
  });
  os << "\n";
}

LogicalResult lethe::runPlanCommand(const CommandOptions &given,
                                    MLIRContext &context) {
  CommandOptions options = given;
  llvm::Expected<DeviceProfile> device =
      DeviceProfile::load(options.plan.device);
  if (!device) {
    llvm::errs() << "error: cannot load device profile: "
                 << llvm::toString(device.takeError()) << "\n";
    return failure();
  }
  LoadOptions loadOptions;
  loadOptions.device = options.plan.device;
  // planStep refuses an unanalysable graph, with the loader's error.
  loadOptions.checkAnalysable = false;
  OwningOpRef<ModuleOp> module =
      loadTrainingGraph(options.graphPath, context, loadOptions);
  if (!module)
    return failure();
  func::FuncOp func = getTrainingFunction(*module);
  if (!func)
    return failure();
  // `auto`'s ladder, built once for this plan and the re-plans that make
  // it agree with the pipeline.
  auto families = std::make_shared<AutoFamilies>();
  // "least": the least budget `lethe compile` meets, packing included.
  if (isLeastBudget(options.plan.budget)) {
    LethePipelineConfig config = pipelineConfig(options);
    if (failed(resolveLeastBudget(*module, config, families)))
      return failure();
    options.plan.budget = config.plan.budget;
  }
  // In place: the program check reuses the planner's analysis of its graph.
  auto step = std::make_unique<PlannedStep>();
  if (failed(planStepInPlace(
          *step, func, options.plan, *device,
          [](const llvm::Twine &message) {
            llvm::errs() << "error: " << message << "\n";
          },
          families.get())))
    return failure();
  // Feasible means `lethe compile` succeeds: the plan is the one it keeps
  // once packed, and the least budget stated is the one it meets.
  if (failed(agreeWithPipeline(*module, func, pipelineConfig(options), *device,
                               *step, families))) {
    llvm::errs() << "error: cannot plan again for the packed arena\n";
    return failure();
  }
  TrainingGraph *graph = &step->graph;
  Plan *plan = &step->plan;
  if (!plan->feasible) {
    if (plan->leastFeasibleBudget)
      plan->leastWithRngReplay = leastWithRngReplay(
          *module, func, pipelineConfig(options), *plan->leastFeasibleBudget);
    llvm::errs() << "error: " << infeasibleMessage(*plan) << "\n";
    // The JSON says so too, for programs that ask.
    OutputFiles outputs;
    if (!options.jsonPath.empty() &&
        succeeded(writeOutputFile(
            outputs, options.jsonPath,
            [&](llvm::raw_ostream &os) { writePlanJson(os, *plan, *graph); },
            /*json=*/true)))
      (void)commitOutputFiles(outputs);
    return failure();
  }
  OutputFiles outputs;
  if (!options.jsonPath.empty() &&
      failed(writeOutputFile(
          outputs, options.jsonPath,
          [&](llvm::raw_ostream &os) { writePlanJson(os, *plan, *graph); },
          /*json=*/true)))
    return failure();
  if (!options.tracePath.empty()) {
    Schedule schedule;
    llvm::Expected<SimResult> sim =
        simulatePlan(*graph, step->device, step->options, *plan, &schedule);
    if (!sim) {
      // At the node when the error is about one.
      Operation *where = func;
      std::string message = llvm::toString(llvm::handleErrors(
          sim.takeError(), [&](const ScheduleOpError &error) -> llvm::Error {
            if (error.node >= 0 &&
                static_cast<size_t>(error.node) < graph->getNodes().size() &&
                graph->getNode(error.node).irOp)
              where = graph->getNode(error.node).irOp;
            return llvm::createStringError(error.message);
          }));
      return where->emitError("cannot simulate the plan: ") << message;
    }
    Timeline timeline =
        buildTimeline(*graph, schedule, *sim, plan->budgetBytes);
    if (failed(writeOutputFile(
            outputs, options.tracePath,
            [&](llvm::raw_ostream &os) { writeChromeTrace(timeline, os); },
            /*json=*/true)))
      return failure();
  }
  printPlan(*plan, *graph, options, llvm::outs());
  LogicalResult committed = commitOutputFiles(outputs);
  // The process ends next (runLetheDriver, its one caller): the module and
  // the step are left to the OS, as clang's -disable-free leaves its AST
  // (freeing the 100,000 ops and the graph of a 100k-op step was ~1.3% of
  // the run).
  llvm::BuryPointer(module.release().getOperation());
  llvm::BuryPointer(std::move(step));
  return committed;
}

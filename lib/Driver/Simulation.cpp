//===- Simulation.cpp - Simulate a compiled step, for people and tools ----===//

#include "lethe/Driver/Simulation.h"

#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace lethe;

FailureOr<ProgramSimulation>
lethe::simulateProgram(func::FuncOp func, const DeviceProfile &device) {
  FailureOr<ProgramSchedule> program = buildProgramSchedule(func);
  if (failed(program))
    return failure();
  const DeviceProfile profile = deviceForFunction(device, func);
  llvm::Expected<SimResult> result = simulate(program->schedule, profile);
  double graphStepUs = 0.0;
  if (result) {
    SimOptions options;
    options.recordTimeline = false;
    options.launch = LaunchMode::Graph;
    llvm::Expected<SimResult> graph =
        simulate(program->schedule, profile, options);
    if (graph)
      graphStepUs = graph->stepUs;
    else
      result = graph.takeError();
  }
  if (!result) {
    // At the op when the error is about one.
    Operation *where = func;
    std::string message = llvm::toString(llvm::handleErrors(
        result.takeError(), [&](const ScheduleOpError &error) -> llvm::Error {
          if (error.op >= 0 &&
              static_cast<size_t>(error.op) < program->irOps.size() &&
              program->irOps[error.op])
            where = program->irOps[error.op];
          return llvm::createStringError(error.message);
        }));
    return where->emitError("lethe: cannot simulate the program: ") << message;
  }
  return ProgramSimulation{std::move(*program), std::move(*result),
                           graphStepUs};
}

FailureOr<ProgramSimulation>
lethe::simulateUnplanned(func::FuncOp func, const DeviceProfile &device) {
  // The function alone, without decisions: materialized as `none`.
  OwningOpRef<ModuleOp> module = ModuleOp::create(func.getLoc());
  Operation *copy = func->clone();
  copy->removeAttr(LetheDialect::PlanAttrHelper::getNameStr());
  copy->walk([](NodeOp node) {
    node->removeAttr(LetheDialect::DecisionsAttrHelper::getNameStr());
    node->removeAttr(LetheDialect::PlacementAttrHelper::getNameStr());
  });
  module->getBody()->push_back(copy);
  PassManager pm(func.getContext());
  pm.addPass(createMaterialize());
  ScopedDiagnosticHandler dropRemarks(func.getContext(), [](Diagnostic &diag) {
    return success(diag.getSeverity() == DiagnosticSeverity::Remark);
  });
  if (failed(pm.run(*module)))
    return failure();
  return simulateProgram(cast<func::FuncOp>(copy), device);
}

void lethe::readCompiledFigures(ModuleOp module, func::FuncOp func,
                                SimulationReport &report) {
  auto i64 = [&](StringRef name) -> int64_t {
    auto attr = module->getAttrOfType<IntegerAttr>(name);
    return attr ? attr.getInt() : 0;
  };
  report.arenaBytes =
      i64(LetheDialect::DeviceArenaBytesAttrHelper::getNameStr());
  report.maxLiveBytes = i64(LetheDialect::MaxLiveBytesAttrHelper::getNameStr());
  report.hostArenaBytes =
      i64(LetheDialect::HostArenaBytesAttrHelper::getNameStr());
  report.hostMaxLiveBytes =
      i64(LetheDialect::HostMaxLiveBytesAttrHelper::getNameStr());
  if (auto budget = LetheDialect::BudgetBytesAttrHelper(module->getContext())
                        .getAttr(module))
    report.budgetBytes = budget.getInt();
  if (auto plan =
          LetheDialect::PlanAttrHelper(func->getContext()).getAttr(func)) {
    report.predictedStepUs = plan.getStepUs().convertToDouble();
    report.predictedPeakBytes = plan.getPeakBytes();
    report.policy = stringifyPolicy(plan.getPolicy()).str();
  }
}

namespace {
struct Counts {
  unsigned retain = 0, recompute = 0, offload = 0;
};
Counts countDecisions(const PipelineOutcome &outcome) {
  Counts counts;
  for (const PipelineOutcome::Decision &d : outcome.decisions) {
    if (d.decision == "recompute")
      ++counts.recompute;
    else if (d.decision == "offload")
      ++counts.offload;
    else
      ++counts.retain;
  }
  return counts;
}
std::string percent(double fraction) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%+.2f%%", 100.0 * fraction);
  return text;
}
} // namespace

void lethe::printSimulationReport(const SimulationReport &report,
                                  llvm::raw_ostream &os) {
  const SimResult &run = report.planned.result;
  os << "Simulated step of " << report.graphName << " on " << report.device
     << " (policy " << report.policy << ", budget "
     << (report.budgetBytes >= 0 ? formatBytes(report.budgetBytes)
                                 : std::string("none"))
     << ")\n";
  Counts counts = countDecisions(report.outcome);
  os << "  decisions    " << counts.retain << " retain, " << counts.recompute
     << " recompute, " << counts.offload << " offload";
  if (report.outcome.attempts > 1)
    os << " (re-planned " << report.outcome.attempts - 1
       << "x for arena fragmentation)";
  os << "\n";
  os << llvm::format("  step         %.1f us", run.stepUs);
  if (report.unplanned && report.unplanned->result.stepUs > 0)
    os << " (unplanned "
       << llvm::format("%.1f", report.unplanned->result.stepUs) << " us, "
       << percent(run.stepUs / report.unplanned->result.stepUs - 1.0) << ")";
  os << "\n";
  os << "  peak         " << formatBytes(run.peakBytes);
  if (report.unplanned)
    os << " (unplanned " << formatBytes(report.unplanned->result.peakBytes)
       << ")";
  os << "\n";
  os << "  arena        " << formatBytes(report.arenaBytes) << " for max-live "
     << formatBytes(report.maxLiveBytes) << " ("
     << percent(report.maxLiveBytes
                    ? static_cast<double>(report.arenaBytes) /
                              static_cast<double>(report.maxLiveBytes) -
                          1.0
                    : 0.0)
     << ")\n";
  os << "  host arena   " << formatBytes(report.hostArenaBytes) << "\n";
  os << llvm::format("  exposed copy %.1f us, exposed comm %.1f us\n",
                     run.exposedCopyUs, run.exposedCommUs);
  os << "  busy         ";
  for (unsigned s = 0; s < kNumStreams; ++s)
    os << (s ? ", " : "") << stringifyStream(static_cast<Stream>(s)) << " "
       << llvm::format("%.1f us", run.busyUs[s]);
  os << "\n";
  if (report.predictedStepUs)
    os << llvm::format(
        "  planner      %.1f us predicted (%s)\n", *report.predictedStepUs,
        percent(run.stepUs / *report.predictedStepUs - 1.0).c_str());
}

static llvm::json::Object busyJson(const SimResult &run) {
  llvm::json::Object busy;
  for (unsigned s = 0; s < kNumStreams; ++s)
    busy[stringifyStream(static_cast<Stream>(s))] = run.busyUs[s];
  return busy;
}

llvm::json::Value lethe::simulationToJson(const SimulationReport &report) {
  const SimResult &run = report.planned.result;
  Counts counts = countDecisions(report.outcome);
  llvm::json::Object json{
      {"graph", report.graphName},
      {"device", report.device},
      {"policy", report.policy},
      {"budget_bytes", report.budgetBytes},
      {"step_us", run.stepUs},
      {"graph_step_us", report.planned.graphStepUs},
      {"peak_bytes", run.peakBytes},
      {"arena_bytes", report.arenaBytes},
      {"max_live_bytes", report.maxLiveBytes},
      {"host_arena_bytes", report.hostArenaBytes},
      {"host_peak_bytes", run.hostPeakBytes},
      {"exposed_copy_us", run.exposedCopyUs},
      {"exposed_comm_us", run.exposedCommUs},
      {"busy_us", busyJson(run)},
      {"counts", llvm::json::Object{{"retain", counts.retain},
                                    {"recompute", counts.recompute},
                                    {"offload", counts.offload}}},
      {"plan_attempts", report.outcome.attempts},
      {"plan_budget_bytes", report.outcome.planBudgetBytes},
  };
  if (report.unplanned) {
    json["unplanned_step_us"] = report.unplanned->result.stepUs;
    json["unplanned_graph_step_us"] = report.unplanned->graphStepUs;
    json["unplanned_peak_bytes"] = report.unplanned->result.peakBytes;
    if (report.unplanned->result.stepUs > 0)
      json["overhead"] = run.stepUs / report.unplanned->result.stepUs - 1.0;
  }
  if (report.predictedStepUs)
    json["predicted_step_us"] = *report.predictedStepUs;
  if (report.predictedPeakBytes)
    json["predicted_peak_bytes"] = *report.predictedPeakBytes;
  return json;
}

Timeline lethe::buildProgramTimeline(const ProgramSimulation &simulation,
                                     int64_t budgetBytes) {
  Timeline timeline;
  const Schedule &schedule = simulation.program.schedule;
  const SimResult &run = simulation.result;
  for (auto [index, op] : llvm::enumerate(schedule.ops)) {
    const OpTiming &timing = run.timeline[index];
    double duration = timing.endUs - timing.startUs;
    if (duration <= 0.0)
      continue;
    Operation *irOp = simulation.program.irOps[index];
    TraceSlice &slice = timeline.slices.emplace_back();
    slice.track = stringifyStream(op.stream).str();
    slice.name = describeScheduleOp(irOp);
    slice.startUs = timing.startUs;
    slice.durationUs = duration;
    switch (op.kind) {
    case ScheduleOpKind::Recompute:
      slice.category = "recompute";
      break;
    case ScheduleOpKind::Offload:
      slice.category = "offload";
      break;
    case ScheduleOpKind::Prefetch:
      slice.category = "prefetch";
      break;
    case ScheduleOpKind::Release:
      slice.category = "release";
      break;
    case ScheduleOpKind::Node:
      if (auto node = dyn_cast<NodeOp>(irOp))
        slice.category = stringifyPhase(node.getPhase()).str();
      else if (auto collective = dyn_cast<CollectiveOp>(irOp))
        slice.category = stringifyPhase(collective.getPhase()).str();
      break;
    }
    if (op.copyBytes)
      slice.args.emplace_back("bytes", std::to_string(op.copyBytes));
    // Nodes by their source name, as `lethe report` shows them.
    if (auto node = dyn_cast<NodeOp>(irOp)) {
      slice.args.emplace_back("op", node.getKind().str());
      if (std::optional<StringRef> name = node.getName())
        slice.name = name->str();
    }
  }
  for (const MemoryPoint &point : run.memoryCurve)
    timeline.memory.push_back({point.timeUs, point.bytes});
  timeline.budgetBytes = std::max<int64_t>(0, budgetBytes);
  return timeline;
}

LinePlot lethe::buildMemoryPlot(const SimulationReport &report) {
  LinePlot plot;
  int64_t top = std::max(report.planned.result.peakBytes, report.budgetBytes);
  if (report.unplanned)
    top = std::max(top, report.unplanned->result.peakBytes);
  bool gib = top >= (int64_t(1) << 30);
  double unit = gib ? double(1 << 30) : double(1 << 20);
  plot.title = "Device memory over one step: " + report.graphName + " (" +
               report.policy + ")";
  plot.xLabel = "time (ms)";
  plot.yLabel = gib ? "allocated (GiB)" : "allocated (MiB)";
  auto series = [&](const SimResult &run, StringRef label, StringRef color,
                    bool fill) {
    PlotSeries s;
    s.label = label.str();
    s.color = color.str();
    s.fill = fill;
    for (const MemoryPoint &point : run.memoryCurve)
      s.points.push_back({point.timeUs / 1000.0, point.bytes / unit});
    s.points.push_back({run.stepUs / 1000.0, 0.0});
    return s;
  };
  if (report.unplanned)
    plot.series.push_back(
        series(report.unplanned->result, "unplanned", "#7f7f7f", false));
  plot.series.push_back(
      series(report.planned.result, "planned", "#1f77b4", true));
  if (report.budgetBytes >= 0)
    plot.lines.push_back({"budget", "#d62728", report.budgetBytes / unit});
  if (report.arenaBytes > 0)
    plot.lines.push_back({"arena", "#2ca02c", report.arenaBytes / unit});
  return plot;
}

llvm::json::Array
lethe::compiledDecisionsToJson(const PipelineOutcome &outcome) {
  llvm::json::Array values;
  for (const PipelineOutcome::Decision &d : outcome.decisions) {
    llvm::json::Object value{{"node", d.node},
                             {"output", d.result},
                             {"result", d.result},
                             {"bytes", d.bytes},
                             {"decision", d.decision}};
    if (d.nodeId >= 0)
      value["node_id"] = d.nodeId;
    values.push_back(std::move(value));
  }
  return values;
}

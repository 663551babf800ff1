//===- Report.cpp - Where the memory and time of a step go ----------------===//

#include "lethe/Driver/Report.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace mlir;
using namespace lethe;

Timeline lethe::buildUnplannedTimeline(const TrainingGraph &graph,
                                       const MemoryProfile &profile) {
  Timeline timeline;
  std::vector<double> readyAt(graph.numValues(), 0.0);
  double computeFree = 0.0, commFree = 0.0;
  for (auto [index, node] : llvm::enumerate(graph.getNodes())) {
    bool comm = node.hasFlag(NodeFlagCollective);
    double start = comm ? commFree : computeFree;
    for (ValueId operand : node.operands)
      start = std::max(start, readyAt[operand]);
    double end = start + node.timeUs;
    (comm ? commFree : computeFree) = end;
    for (ValueId result : node.results)
      readyAt[result] = end;
    TraceSlice &slice = timeline.slices.emplace_back();
    slice.track = comm ? "comm" : "compute";
    slice.name = node.name.empty() ? node.kind : node.name;
    slice.category = stringifyPhase(node.phase).str();
    slice.startUs = start;
    slice.durationUs = node.timeUs;
    slice.args.emplace_back("op", node.kind);
    if (!node.scope.empty())
      slice.args.emplace_back("scope", node.scope);
    timeline.memory.push_back({start, profile.liveBytes[index]});
  }
  double endUs = std::max(computeFree, commFree);
  timeline.memory.push_back({endUs, 0});
  return timeline;
}

/// The makespan of the unplanned timeline.
static double stepTimeUs(const Timeline &timeline) {
  double end = 0.0;
  for (const TraceSlice &slice : timeline.slices)
    end = std::max(end, slice.startUs + slice.durationUs);
  return end;
}

StepReport lethe::buildStepReport(const LifetimeAnalysis &analysis,
                                  ModuleOp module, StringRef device,
                                  unsigned topN) {
  const TrainingGraph &graph = analysis.getGraph();
  const MemoryProfile &profile = analysis.getProfile();
  StepReport report;
  if (auto model =
          LetheDialect::ModelAttrHelper(module->getContext()).getAttr(module))
    report.graphName = model.str();
  report.device = device.str();
  report.numNodes = static_cast<int64_t>(graph.numNodes());
  for (const GraphNode &node : graph.getNodes()) {
    switch (node.phase) {
    case Phase::Fwd:
      ++report.numForward;
      report.forwardUs += node.timeUs;
      break;
    case Phase::Bwd:
      ++report.numBackward;
      report.backwardUs += node.timeUs;
      break;
    case Phase::Opt:
      ++report.numOptimizer;
      report.optimizerUs += node.timeUs;
      break;
    }
  }
  report.baselinePeakBytes = profile.peakBytes;
  report.residentBytes = profile.residentBytes;
  report.activationBytes = profile.activationBytes;
  report.numActivations = profile.numActivations;
  report.forwardEndBytes = profile.forwardEndBytes;
  report.baselineStepUs =
      stepTimeUs(buildUnplannedTimeline(graph, profile));
  report.peakNode = profile.peakNode;
  if (profile.peakNode >= 0) {
    const GraphNode &node = graph.getNode(profile.peakNode);
    report.peakOp = node.name.empty() ? node.kind : node.name;
    report.peakKind = node.kind;
  }
  for (ValueId id : llvm::ArrayRef(profile.liveAtPeak).take_front(topN)) {
    LiveTensorEntry &entry = report.topLive.emplace_back();
    entry.value = id;
    entry.description = describeValue(graph, id);
    entry.scope = graph.getNode(graph.getValue(id).producer).scope;
    entry.bytes = graph.getValue(id).bytes;
  }
  if (auto totals = LetheDialect::TotalsAttrHelper(module->getContext())
                        .getAttr(module)) {
    for (NamedAttribute entry : totals.getNumbers()) {
      if (auto f = dyn_cast<FloatAttr>(entry.getValue()))
        report.measured.emplace_back(entry.getName().str(),
                                     f.getValueAsDouble());
      else if (auto i = dyn_cast<IntegerAttr>(entry.getValue()))
        report.measured.emplace_back(entry.getName().str(),
                                     static_cast<double>(i.getInt()));
    }
  }
  return report;
}

static std::optional<double> lookupMeasured(const StepReport &report,
                                            StringRef key) {
  for (const auto &[name, value] : report.measured)
    if (name == key)
      return value;
  return std::nullopt;
}

void lethe::printStepReport(const StepReport &report, raw_ostream &os) {
  os << "Lethe report";
  if (!report.graphName.empty())
    os << ": " << report.graphName;
  os << " (device " << report.device << ")\n";
  os << "nodes:            " << report.numNodes << " (" << report.numForward
     << " fwd, " << report.numBackward << " bwd, " << report.numOptimizer
     << " opt)\n";
  os << "peak memory:      " << formatBytes(report.baselinePeakBytes)
     << " allocated by the step, plus " << formatBytes(report.residentBytes)
     << " of resident inputs\n";
  os << "peak at:          node " << report.peakNode << " " << report.peakOp
     << "\n";
  os << "saved for bwd:    " << formatBytes(report.activationBytes) << " in "
     << report.numActivations << " activations\n";
  os << "live at fwd end:  " << formatBytes(report.forwardEndBytes) << "\n";
  os << llvm::format("step time:        %.1f us (fwd %.1f, bwd %.1f, opt "
                     "%.1f)\n",
                     report.baselineStepUs, report.forwardUs,
                     report.backwardUs, report.optimizerUs);
  if (auto peak = lookupMeasured(report, "act_peak_bytes_eager"))
    os << llvm::format("measured (eager): activation peak %s (model %+.1f%%)",
                       formatBytes(static_cast<int64_t>(*peak)).c_str(),
                       100.0 * (report.baselinePeakBytes / *peak - 1.0));
  auto fwd = lookupMeasured(report, "fwd_ms_sum_ops");
  auto bwd = lookupMeasured(report, "bwd_ms_sum_ops");
  if (fwd && bwd)
    os << llvm::format(", sum of op times %.1f us (model %+.1f%%)",
                       1000.0 * (*fwd + *bwd),
                       100.0 * (report.baselineStepUs / (1000.0 * (*fwd + *bwd)) -
                                1.0));
  if (lookupMeasured(report, "act_peak_bytes_eager") || (fwd && bwd))
    os << "\n";
  os << "largest tensors live at the peak:\n";
  for (const LiveTensorEntry &entry : report.topLive) {
    os << "  " << llvm::format("%12s", formatBytes(entry.bytes).c_str())
       << "  " << entry.description;
    if (!entry.scope.empty())
      os << "  [" << entry.scope << "]";
    os << "\n";
  }
}

void lethe::writeStepReportJSON(const StepReport &report, raw_ostream &os) {
  llvm::json::OStream json(os, 2);
  json.object([&] {
    json.attribute("graph", report.graphName);
    json.attribute("device", report.device);
    json.attribute("num_nodes", report.numNodes);
    json.attribute("num_fwd", report.numForward);
    json.attribute("num_bwd", report.numBackward);
    json.attribute("num_opt", report.numOptimizer);
    json.attribute("baseline_peak_bytes", report.baselinePeakBytes);
    json.attribute("baseline_step_us", report.baselineStepUs);
    json.attribute("fwd_us", report.forwardUs);
    json.attribute("bwd_us", report.backwardUs);
    json.attribute("opt_us", report.optimizerUs);
    json.attribute("resident_bytes", report.residentBytes);
    json.attribute("activation_bytes", report.activationBytes);
    json.attribute("num_activations", report.numActivations);
    json.attribute("fwd_end_bytes", report.forwardEndBytes);
    json.attributeObject("peak_op", [&] {
      json.attribute("node", report.peakNode);
      json.attribute("name", report.peakOp);
      json.attribute("kind", report.peakKind);
    });
    json.attributeArray("top_live", [&] {
      for (const LiveTensorEntry &entry : report.topLive)
        json.object([&] {
          json.attribute("value", entry.value);
          json.attribute("tensor", entry.description);
          json.attribute("bytes", entry.bytes);
          json.attribute("scope", entry.scope);
        });
    });
    if (!report.measured.empty())
      json.attributeObject("measured", [&] {
        for (const auto &[name, value] : report.measured)
          json.attribute(name, value);
      });
  });
  os << "\n";
}

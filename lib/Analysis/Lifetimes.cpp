//===- Lifetimes.cpp - Live intervals and the memory profile --------------===//

#include "lethe/Analysis/Lifetimes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace lethe;

Lifetimes::Lifetimes(const TrainingGraph &graph) : graph(graph) {
  NodeId lastNode = static_cast<NodeId>(graph.numNodes()) - 1;
  intervals.resize(graph.numValues());
  for (auto [id, value] : llvm::enumerate(graph.getValues())) {
    LiveInterval &interval = intervals[id];
    interval.storage = static_cast<ValueId>(id);
    interval.bytes = value.bytes;
    if (value.isInput()) {
      interval.begin = 0;
      interval.end = std::max<NodeId>(lastNode, 0);
    } else {
      interval.begin = interval.end = value.producer;
    }
  }
  // Extend each storage to the last use of any value sharing it.
  for (auto [id, value] : llvm::enumerate(graph.getValues())) {
    if (value.isInput())
      continue;
    LiveInterval &interval = intervals[value.storage];
    if (!value.users.empty())
      interval.end = std::max(interval.end, value.users.back());
    if (value.isOutput)
      interval.end = lastNode;
    const GraphNode &producer = graph.getNode(intervals[value.storage].begin);
    if (producer.phase != Phase::Fwd || graph.getValue(value.storage).isInput())
      continue;
    for (NodeId user : value.users)
      if (graph.getNode(user).phase != Phase::Fwd)
        interval.savedForBackward = true;
  }
}

void Lifetimes::print(raw_ostream &os) const {
  os << "lifetimes: " << graph.numNodes() << " nodes\n";
  for (auto [id, value] : llvm::enumerate(graph.getValues())) {
    if (value.isInput() || graph.isAlias(id) || value.bytes == 0)
      continue;
    const LiveInterval &interval = intervals[id];
    os << "  " << describeValue(graph, id) << ": [" << interval.begin << ", "
       << interval.end << "] " << interval.bytes << " B";
    if (interval.savedForBackward)
      os << " saved";
    os << "\n";
  }
}

MemoryProfile MemoryProfile::compute(const Lifetimes &lifetimes) {
  const TrainingGraph &graph = lifetimes.getGraph();
  MemoryProfile profile;
  size_t numNodes = graph.numNodes();
  std::vector<int64_t> delta(numNodes + 1, 0);
  for (auto [id, value] : llvm::enumerate(graph.getValues())) {
    if (graph.isAlias(id))
      continue;
    if (value.isInput()) {
      profile.residentBytes += value.bytes;
      continue;
    }
    const LiveInterval &interval = lifetimes.getInterval(id);
    delta[interval.begin] += interval.bytes;
    delta[interval.end + 1] -= interval.bytes;
    if (interval.savedForBackward && interval.bytes > 0) {
      profile.activationBytes += interval.bytes;
      ++profile.numActivations;
    }
  }
  profile.liveBytes.resize(numNodes);
  int64_t live = 0;
  for (size_t i = 0; i < numNodes; ++i) {
    live += delta[i];
    profile.liveBytes[i] = live;
    if (profile.peakNode < 0 || live > profile.peakBytes) {
      profile.peakBytes = live;
      profile.peakNode = static_cast<NodeId>(i);
    }
  }
  NodeId firstBackward = graph.firstBackwardNode();
  if (firstBackward > 0)
    profile.forwardEndBytes = profile.liveBytes[firstBackward - 1];
  if (profile.peakNode < 0)
    return profile;
  for (auto [id, value] : llvm::enumerate(graph.getValues())) {
    if (value.isInput() || graph.isAlias(id) || value.bytes == 0)
      continue;
    const LiveInterval &interval = lifetimes.getInterval(id);
    if (interval.begin <= profile.peakNode && profile.peakNode <= interval.end)
      profile.liveAtPeak.push_back(static_cast<ValueId>(id));
  }
  std::stable_sort(profile.liveAtPeak.begin(), profile.liveAtPeak.end(),
                   [&](ValueId a, ValueId b) {
                     return graph.getValue(a).bytes > graph.getValue(b).bytes;
                   });
  return profile;
}

std::string lethe::formatBytes(int64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  unsigned unit = 0;
  while (std::abs(value) >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.2f ", value) << units[unit];
  return out;
}

std::string lethe::describeValue(const TrainingGraph &graph, ValueId id) {
  const GraphValue &value = graph.getValue(id);
  std::string out;
  llvm::raw_string_ostream os(out);
  if (value.isInput()) {
    os << "input #" << value.resultIndex;
    return out;
  }
  const GraphNode &node = graph.getNode(value.producer);
  os << (node.name.empty() ? describeNode(graph, value.producer, false)
                           : node.name);
  if (node.results.size() > 1)
    os << "#" << value.resultIndex;
  os << " (" << node.kind << ")";
  return out;
}

void MemoryProfile::print(raw_ostream &os, const TrainingGraph &graph,
                          unsigned top) const {
  os << "peak memory:      " << formatBytes(peakBytes);
  if (peakBytes >= 1024)
    os << " (" << peakBytes << " B)";
  os << " allocated by the step, plus " << formatBytes(residentBytes)
     << " of resident inputs\n";
  if (peakNode >= 0) {
    const GraphNode &node = graph.getNode(peakNode);
    os << "peak at:          node " << peakNode << " "
       << (node.name.empty() ? node.kind : node.name + " (" + node.kind + ")")
       << ", " << stringifyPhase(node.phase) << "\n";
  }
  os << "saved for bwd:    " << formatBytes(activationBytes) << " in "
     << numActivations << " activations\n";
  os << "live at fwd end:  " << formatBytes(forwardEndBytes) << "\n";
  os << "largest tensors live at the peak:\n";
  for (ValueId id : llvm::ArrayRef(liveAtPeak).take_front(top)) {
    const GraphValue &value = graph.getValue(id);
    os << "  " << llvm::format("%12s", formatBytes(value.bytes).c_str()) << "  "
       << describeValue(graph, id);
    const GraphNode &producer = graph.getNode(value.producer);
    if (!producer.scope.empty())
      os << "  [" << producer.scope << "]";
    os << "\n";
  }
}

LifetimeAnalysis::LifetimeAnalysis(Operation *op) {
  auto func = dyn_cast<func::FuncOp>(op);
  if (!func) {
    op->emitError("lifetime analysis expects a func.func");
    return;
  }
  FailureOr<TrainingGraph> built = TrainingGraph::fromFunction(func);
  if (failed(built))
    return;
  graph = std::make_unique<TrainingGraph>(std::move(*built));
  lifetimes = std::make_unique<Lifetimes>(*graph);
  profile = MemoryProfile::compute(*lifetimes);
}

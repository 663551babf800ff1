//===- Timeline.cpp - A simulated schedule as a trace timeline ------------===//

#include "lethe/Simulator/Timeline.h"

#include <limits>

using namespace lethe;

Timeline lethe::buildTimeline(const TrainingGraph &graph,
                              const Schedule &schedule,
                              const SimResult &result, int64_t budgetBytes) {
  Timeline timeline;
  timeline.budgetBytes =
      budgetBytes == std::numeric_limits<int64_t>::max() ? 0 : budgetBytes;
  for (auto [index, op] : llvm::enumerate(schedule.ops)) {
    if (index >= result.timeline.size())
      break;
    const OpTiming &t = result.timeline[index];
    TraceSlice slice;
    slice.track = stringifyStream(op.stream).str();
    slice.startUs = t.startUs;
    slice.durationUs = t.endUs - t.startUs;
    if (op.node >= 0) {
      const GraphNode &node = graph.getNode(op.node);
      slice.name = node.kind;
      slice.category = op.kind == ScheduleOpKind::Recompute
                           ? "recompute"
                           : stringifyPhase(node.phase).str();
      slice.args.push_back({"node", std::to_string(op.node)});
      if (!node.name.empty())
        slice.args.push_back({"name", node.name});
      if (!node.scope.empty())
        slice.args.push_back({"scope", node.scope});
    } else {
      slice.category = stringifyScheduleOpKind(op.kind).str();
      slice.name = slice.category + " %" + std::to_string(op.storage);
      if (op.copyBytes)
        slice.args.push_back({"bytes", std::to_string(op.copyBytes)});
    }
    // Zero-time ops (releases, views) would be invisible; skip releases
    // that did not wait.
    if (op.kind == ScheduleOpKind::Release && slice.durationUs <= 0.0)
      continue;
    timeline.slices.push_back(std::move(slice));
  }
  for (const MemoryPoint &point : result.memoryCurve)
    timeline.memory.push_back({point.timeUs, point.bytes});
  return timeline;
}

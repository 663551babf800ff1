//===- Timeline.h - A simulated schedule as a trace timeline ----*- C++ -*-===//
//
// Turns a simulated schedule into the Timeline the Chrome-trace writer
// (lethe/Support/Trace.h) takes: one slice per op on its stream's track
// (compute, d2h, h2d, comm), named after its node or the value it copies,
// categorised fwd / bwd / opt / recompute / offload / prefetch / release,
// and the device memory counter.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SIMULATOR_TIMELINE_H
#define LETHE_SIMULATOR_TIMELINE_H

#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/Trace.h"

namespace lethe {

/// `result` must have been simulated with recordTimeline.
Timeline buildTimeline(const TrainingGraph &graph, const Schedule &schedule,
                       const SimResult &result, int64_t budgetBytes = 0);

} // namespace lethe

#endif // LETHE_SIMULATOR_TIMELINE_H

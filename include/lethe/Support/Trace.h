//===- Trace.h - Chrome-trace / Perfetto timelines --------------*- C++ -*-===//
//
// A timeline of work on streams plus a memory counter, written in the Chrome
// trace-event JSON format that chrome://tracing and ui.perfetto.dev open.
// The report (unplanned step) and the simulator (planned step) both fill a
// Timeline and hand it to writeChromeTrace.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SUPPORT_TRACE_H
#define LETHE_SUPPORT_TRACE_H

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lethe {

struct TraceSlice {
  /// Track name: "compute", "d2h", "h2d", "comm".
  std::string track;
  std::string name;
  /// Category shown by the viewer ("fwd", "bwd", "recompute", "offload"...).
  std::string category;
  double startUs = 0.0;
  double durationUs = 0.0;
  /// Extra key/value pairs shown on selection.
  std::vector<std::pair<std::string, std::string>> args;
};

struct MemorySample {
  double timeUs = 0.0;
  int64_t bytes = 0;
};

struct Timeline {
  std::vector<TraceSlice> slices;
  /// Device bytes allocated by the step over time (a step function).
  std::vector<MemorySample> memory;
  /// Drawn as a second counter when non-zero.
  int64_t budgetBytes = 0;
};

/// Writes `timeline` as Chrome trace-event JSON. Tracks are ordered compute,
/// d2h, h2d, comm, then any others in first-appearance order.
void writeChromeTrace(const Timeline &timeline, llvm::raw_ostream &os);

} // namespace lethe

#endif // LETHE_SUPPORT_TRACE_H

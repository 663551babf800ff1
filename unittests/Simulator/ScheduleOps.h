//===- ScheduleOps.h - Schedule ops written by hand, for tests --*- C++ -*-===//
//
// The simulator's tests build schedules op by op; a host copy is the same
// op in each of them.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_SIMULATOR_SCHEDULEOPS_H
#define LETHE_UNITTESTS_SIMULATOR_SCHEDULEOPS_H

#include "lethe/Simulator/Simulator.h"

#include <vector>

namespace lethe::testing {

/// An offload (D2H) or prefetch (H2D) of `bytes` after `deps`.
inline ScheduleOp copyOp(ScheduleOpKind kind, int64_t bytes,
                         std::vector<OpIndex> deps = {}) {
  ScheduleOp op;
  op.kind = kind;
  op.stream = kind == ScheduleOpKind::Offload ? Stream::D2H : Stream::H2D;
  op.copyBytes = bytes;
  op.deps.assign(deps.begin(), deps.end());
  return op;
}

} // namespace lethe::testing

#endif // LETHE_UNITTESTS_SIMULATOR_SCHEDULEOPS_H

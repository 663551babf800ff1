//===- ProgramSchedule.h - A scheduled program as a Schedule ----*- C++ -*-===//
//
// Reads a scheduled (or explicit) program back into the simulator's
// Schedule, so the simulator runs exactly what the IR says:
// - every op in issue order on its stream: nodes and collectives (re-runs
//   inside `lethe.recompute` as recompute ops) take their `time_us`,
//   copies their bytes over the device's bandwidth, barriers, awaits and
//   releases no time;
// - dependences are the awaited timepoints: a barrier is an op of its
//   stream, reached when the ops before it are done; a copy's timepoint is
//   the copy; a join the union of its inputs;
// - buffers are the program's (lethe/Analysis/Program.h): allocated by
//   their defining op, freed by their release.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SIMULATOR_PROGRAMSCHEDULE_H
#define LETHE_SIMULATOR_PROGRAMSCHEDULE_H

#include "lethe/Simulator/Schedule.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace lethe {

struct ProgramSchedule {
  Schedule schedule;
  /// The IR op of every schedule op.
  std::vector<mlir::Operation *> irOps;
};

/// Converts `func`; errors (at the op) on programs it cannot read.
mlir::FailureOr<ProgramSchedule> buildProgramSchedule(mlir::func::FuncOp func);

/// A short name for a schedule op's IR op, for traces: the node kind, or
/// "offload" / "prefetch" / "release" / "barrier" / "await".
std::string describeScheduleOp(mlir::Operation *op);

} // namespace lethe

#endif // LETHE_SIMULATOR_PROGRAMSCHEDULE_H

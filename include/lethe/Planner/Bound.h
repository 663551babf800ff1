//===- Bound.h - A lower bound on any plan's step time ----------*- C++ -*-===//
//
// A certificate for a plan: no plan the planner can express (any retain /
// recompute / offload decisions, any placement of their copies) that fits
// the device-memory budget has a simulated step faster than the bound. It is
// the value of a linear-programming relaxation solved with COIN-OR CLP
// (lib/Planner/Milp.h, beside the exact solver's CBC) over the exact
// solver's model of the graph (ExactModel: activations, chains, the bytes
// every plan keeps at each node, the unplanned timeline). Unlike the exact
// MILP it has no integer variable and one aggregated memory row per node
// (added only where the LP's answer breaks it), so it scales to real
// graphs. docs/Bound.md states the relaxation and why it is valid.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_BOUND_H
#define LETHE_PLANNER_BOUND_H

#include "lethe/Planner/Plan.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace lethe {

struct DeviceProfile;

/// Lower-bounds the step time of every plan of `graph` whose simulated peak
/// is at most `options.budgetBytes`. Reads budgetBytes, minOffloadBytes and
/// replayRng (what may be decided). `baselineStepUs` and
/// `baselinePeakBytes` are the simulated unplanned step's time and peak
/// (Plan::baselineStepUs, Plan::baselinePeakBytes): the overhead is
/// relative to that step, and a budget at or above that peak gives 0.
/// An error only when the LP solver fails before any bound is known.
///
/// `fixed`, where given (one decision per activation of
/// ActivationAnalysis(graph, options), in its order), fixes every
/// activation's decision in the relaxation: the value then bounds only the
/// plans with those decisions (any placement of their copies), and is that
/// plan's price in the relaxation (a checkpoint's decision is not priced:
/// the relaxation gives checkpoints no columns). A plan's simulated step minus its price
/// is what the relaxation's pricing misses; its price minus the bound, what
/// the relaxation gains by deciding otherwise (docs/Bound.md, §3;
/// bench/PlanSearch.cpp prints both for auto's plan). An error where a
/// decision is one the relaxation does not allow the activation.
llvm::Expected<OverheadBound>
boundStepTime(const TrainingGraph &graph, const DeviceProfile &device,
              const PlanOptions &options, double baselineStepUs,
              int64_t baselinePeakBytes, llvm::ArrayRef<Decision> fixed = {});

} // namespace lethe

#endif // LETHE_PLANNER_BOUND_H

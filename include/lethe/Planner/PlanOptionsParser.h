//===- PlanOptionsParser.h - Planner options as people write them -*- C++ -*-===//
//
// The `lethe-plan` pass, the `lethe plan` driver command and the C API take
// the same options as text ("budget=60%", "policy=every-n", "n=2",
// "min-offload-bytes=1MiB"); this turns them into PlanOptions with errors
// that name the option.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_PLANOPTIONSPARSER_H
#define LETHE_PLANNER_PLANOPTIONSPARSER_H

#include "lethe/Planner/Plan.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lethe {

struct PlanOptionText {
  /// Bytes, a size with a unit, or a percentage of the unplanned peak;
  /// empty: no limit.
  std::string budget;
  std::string policy = "auto";
  int everyN = 2;
  std::vector<std::string> keepOps;
  bool offloadKept = false;
  std::string minOffloadBytes = "1MiB";
  /// Empty: the device profile's pinned host memory (no limit if unknown).
  std::string hostBudget;
  /// auto, fast or exact.
  std::string solver = "auto";
  bool replayRng = false;
  /// Also compute a lower bound on any plan's overhead (docs/Bound.md).
  bool bound = false;
  /// The device arena's alignment (a power of two): every storage is
  /// planned at the bytes the arena holds for it, rounded up to this, so
  /// that the planner's peak is the packed arena's lower bound on every
  /// route (lethe-assign-buffers aligns with the same value).
  int64_t alignment = 256;
  /// A plan to evaluate instead of planning (`--plan FILE`, docs/Planner.md
  /// "Plans from elsewhere"): sets the policy to `given`; loadGivenPlan
  /// (lethe/Import/PlanImporter.h) reads it.
  std::string planFile;
};

/// Parses `text`; `unplannedPeakBytes` resolves a percentage budget.
llvm::Expected<PlanOptions> parsePlanOptions(const PlanOptionText &text,
                                             int64_t unplannedPeakBytes,
                                             const DeviceProfile &device);

/// What every route does before it plans `graph` (the lethe-plan pass,
/// `lethe plan`, the C API): rounds the graph's storages up to
/// `text.alignment` and parses `text`, a percentage budget taken of the
/// aligned unplanned peak. Returns the options for planTrainingStep.
llvm::Expected<PlanOptions> preparePlanning(TrainingGraph &graph,
                                            const PlanOptionText &text,
                                            const DeviceProfile &device);

} // namespace lethe

#endif // LETHE_PLANNER_PLANOPTIONSPARSER_H

//===- Evaluator.h - Place, schedule and simulate decisions -----*- C++ -*-===//
//
// The one way every policy, solver and baseline turns per-activation
// decisions into predicted numbers: placeDecisions, buildSchedule,
// walkMemory and simulate, in that order.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_EVALUATOR_H
#define LETHE_PLANNER_EVALUATOR_H

#include "lethe/Planner/Placement.h"

#include <string>

namespace lethe {

struct Evaluation {
  Placement placement;
  Schedule schedule;
  MemoryWalk memory;
  /// Simulated figures (without a timeline).
  double stepUs = 0.0;
  double exposedCopyUs = 0.0;
  int64_t peakBytes = 0;
  int64_t hostPeakBytes = 0;
};

class Evaluator {
public:
  /// `copiesYield`: simulate copies that pause while a collective runs
  /// (planCopiesYield decides it for a plan).
  Evaluator(const ActivationAnalysis &analysis, const DeviceProfile &device,
            bool copiesYield = false)
      : analysis(analysis), device(device), copiesYield(copiesYield) {}

  llvm::Expected<Evaluation>
  evaluate(llvm::ArrayRef<Decision> decisions,
           llvm::ArrayRef<CopyHint> hints = {}) const;

  const ActivationAnalysis &getAnalysis() const { return analysis; }
  const DeviceProfile &getDevice() const { return device; }
  bool getCopiesYield() const { return copiesYield; }

private:
  const ActivationAnalysis &analysis;
  /// A copy: callers may pass a temporary.
  DeviceProfile device;
  bool copiesYield;
};

} // namespace lethe

#endif // LETHE_PLANNER_EVALUATOR_H

//===- Evaluator.cpp - Place, schedule and simulate decisions -------------===//

#include "lethe/Planner/Evaluator.h"

using namespace lethe;

llvm::Expected<Evaluation>
Evaluator::evaluate(llvm::ArrayRef<Decision> decisions,
                    llvm::ArrayRef<CopyHint> hints) const {
  Evaluation result;
  llvm::Expected<Placement> placement =
      placeDecisions(analysis, device, decisions, hints);
  if (!placement)
    return placement.takeError();
  result.placement = std::move(*placement);
  llvm::Expected<Schedule> schedule =
      buildSchedule(analysis, result.placement.decisions);
  if (!schedule)
    return schedule.takeError();
  result.schedule = std::move(*schedule);
  SimOptions options;
  options.recordTimeline = false;
  options.copiesYieldToCollectives = copiesYield;
  llvm::Expected<SimResult> sim = simulate(result.schedule, device, options);
  if (!sim)
    return sim.takeError();
  result.stepUs = sim->stepUs;
  result.exposedCopyUs = sim->exposedCopyUs;
  result.peakBytes = sim->peakBytes;
  result.hostPeakBytes = sim->hostPeakBytes;
  result.memory.deviceAtOp = std::move(sim->memoryAtOp);
  result.memory.peakBytes = sim->peakBytes;
  result.memory.hostPeakBytes = sim->hostPeakBytes;
  result.memory.peakOp = -1;
  for (size_t k = 0; k < result.memory.deviceAtOp.size(); ++k)
    if (result.memory.deviceAtOp[k] == result.peakBytes) {
      result.memory.peakOp = static_cast<OpIndex>(k);
      break;
    }
  return result;
}

//===- Report.h - Where the memory and time of a step go --------*- C++ -*-===//
//
// The `lethe report` numbers: the unplanned step's memory profile and
// predicted step time, for people (print) and programs (JSON), plus its
// timeline for a trace viewer.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DRIVER_REPORT_H
#define LETHE_DRIVER_REPORT_H

#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Support/Trace.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace lethe {

struct LiveTensorEntry {
  ValueId value = -1;
  std::string description;
  std::string scope;
  int64_t bytes = 0;
};

struct StepReport {
  std::string graphName;
  std::string device;
  int64_t numNodes = 0, numForward = 0, numBackward = 0, numOptimizer = 0;
  int64_t baselinePeakBytes = 0;
  int64_t residentBytes = 0;
  int64_t activationBytes = 0;
  int64_t numActivations = 0;
  int64_t forwardEndBytes = 0;
  double baselineStepUs = 0, forwardUs = 0, backwardUs = 0, optimizerUs = 0;
  NodeId peakNode = -1;
  std::string peakOp;
  std::string peakKind;
  std::vector<LiveTensorEntry> topLive;
  /// Figures measured by the exporter (`lethe.totals`), when the graph has
  /// them: act_peak_bytes_eager, fwd_ms_sum_ops, bwd_ms_sum_ops, ...
  std::vector<std::pair<std::string, double>> measured;
};

/// Builds the report of a function analysed by `analysis`. `topN` bounds
/// the live-at-peak list.
StepReport buildStepReport(const LifetimeAnalysis &analysis,
                           mlir::ModuleOp module, llvm::StringRef device,
                           unsigned topN = 10);

void printStepReport(const StepReport &report, llvm::raw_ostream &os);
void writeStepReportJSON(const StepReport &report, llvm::raw_ostream &os);

/// The unplanned step as a timeline: nodes in program order on the compute
/// stream (collectives on the comm stream), each starting when its stream is
/// free and its operands are ready, with the memory counter.
Timeline buildUnplannedTimeline(const TrainingGraph &graph,
                                const MemoryProfile &profile);

} // namespace lethe

#endif // LETHE_DRIVER_REPORT_H

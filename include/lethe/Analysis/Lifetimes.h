//===- Lifetimes.h - Live intervals and the memory profile ------*- C++ -*-===//
//
// Tensor lifetimes of a training step in program order, aliasing respected:
// a storage is live from its producing node to the last node that reads it
// through any alias, or to the end of the step if the step returns it (the
// memory model stated in lethe/Planner/Plan.h). Graph inputs (parameters,
// data, the gradient seed) are resident for the whole step and are counted
// apart from what the step allocates.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_ANALYSIS_LIFETIMES_H
#define LETHE_ANALYSIS_LIFETIMES_H

#include "lethe/Analysis/TrainingGraph.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>

namespace mlir {
class Operation;
} // namespace mlir

namespace lethe {

/// The live interval of one storage, in node indices (inclusive).
struct LiveInterval {
  ValueId storage = -1;
  NodeId begin = 0;
  NodeId end = 0;
  int64_t bytes = 0;
  /// Produced by a forward node and read by a non-forward node: an
  /// activation, saved for backward.
  bool savedForBackward = false;
};

class Lifetimes {
public:
  explicit Lifetimes(const TrainingGraph &graph);

  /// Interval of the storage `value` belongs to (aliases share it). Graph
  /// inputs span the whole step.
  const LiveInterval &getInterval(ValueId value) const {
    return intervals[graph.getValue(value).storage];
  }
  /// One entry per value; only entries of storage owners are meaningful.
  llvm::ArrayRef<LiveInterval> getIntervals() const { return intervals; }

  /// Prints one line per storage the step allocates, in program order.
  void print(llvm::raw_ostream &os) const;

  const TrainingGraph &getGraph() const { return graph; }

private:
  const TrainingGraph &graph;
  std::vector<LiveInterval> intervals;
};

/// Where the memory goes: bytes live at every node, the peak and who holds
/// it.
struct MemoryProfile {
  /// Bytes the step has allocated while node i runs (inputs excluded).
  std::vector<int64_t> liveBytes;
  int64_t peakBytes = 0;
  /// First node where the peak is reached (-1 for an empty graph).
  NodeId peakNode = -1;
  /// Storages live at the peak, largest first (ties by value id).
  std::vector<ValueId> liveAtPeak;
  /// Bytes of activations (storages saved for backward) and their count.
  int64_t activationBytes = 0;
  int64_t numActivations = 0;
  /// Bytes live when the forward part ends (at the last forward node).
  int64_t forwardEndBytes = 0;
  /// Bytes of the step's graph inputs, resident throughout.
  int64_t residentBytes = 0;

  static MemoryProfile compute(const Lifetimes &lifetimes);

  /// A person-readable summary with the `top` largest tensors at the peak.
  void print(llvm::raw_ostream &os, const TrainingGraph &graph,
             unsigned top = 10) const;
};

/// Short description of a value for people: "%name#i (aten.mm.default)".
std::string describeValue(const TrainingGraph &graph, ValueId value);

/// Formats a byte count with a binary unit ("1.50 GiB").
std::string formatBytes(int64_t bytes);

/// The lifetimes of a `func.func` in Lethe's canonical form, as an MLIR
/// analysis (`getAnalysis<LifetimeAnalysis>()`). `isValid()` is false when
/// the function is not a training graph; the error was emitted at the op.
class LifetimeAnalysis {
public:
  explicit LifetimeAnalysis(mlir::Operation *funcOp);
  bool isValid() const { return graph != nullptr; }
  const TrainingGraph &getGraph() const { return *graph; }
  const Lifetimes &getLifetimes() const { return *lifetimes; }
  const MemoryProfile &getProfile() const { return profile; }

private:
  std::unique_ptr<TrainingGraph> graph;
  std::unique_ptr<Lifetimes> lifetimes;
  MemoryProfile profile;
};

} // namespace lethe

#endif // LETHE_ANALYSIS_LIFETIMES_H

//===- Placement.h - From decisions to a placed plan and schedule -*- C++ -*-===//
//
// A solver says, per activation, retain / recompute / offload. Placement
// turns that into a plan a program can follow:
// - restore points: an activation is restored before its first backward
//   use, or earlier when a recompute chain restored at an earlier point
//   reads it (restore points are processed in program order, so a chain's
//   inputs are moved to the chain's point and shared from there);
// - recompute chains: the union of the chains of the activations restored
//   at the same point, run once, in program order, before that point;
// - copies: D2H copies queue FIFO on the D2H stream after the storage's
//   contents are final; the device buffer is released at the first node
//   (at or after the last forward use) by whose end the copy is predicted to
//   be done; H2D copies are placed as late as possible: walking restore
//   deadlines backwards, each copy must end before its deadline and before
//   the next copy in the FIFO starts, and it is issued after the last node
//   ending before that start (never before its release).
// A solver's CopyHint moves an offload's release or prefetch from there.
// Predicted times use the compute stream alone (node times plus recompute
// chains); the simulator then gives the real figures.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_PLACEMENT_H
#define LETHE_PLANNER_PLACEMENT_H

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Plan.h"
#include "lethe/Simulator/Schedule.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace lethe {

/// Where a solver wants an offload's copies to trade time for memory, when
/// hiding them would keep the device buffer at a moment that matters.
struct CopyHint {
  /// Release after this node at the latest; the compute stream then waits
  /// there for the D2H copy if it is not done. -1: release when the copy is
  /// predicted done.
  NodeId releaseBy = -1;
  /// Issue the prefetch after this node at the earliest; its copy may then
  /// end after the restore point, and the compute stream waits. -1: as late
  /// as still hides the copy.
  NodeId prefetchNotBefore = -1;
  /// Issue the prefetch after this node at the latest (never before its
  /// release): the copy then starts there, earlier than it must, to run
  /// beside kernels that lose less to it (docs/Planner.md, *quiet copies*).
  /// -1: as late as still hides the copy.
  NodeId prefetchBy = -1;
  /// Release after this node at the earliest (never at or after the restore
  /// point): later than the copy is predicted done, after the release of an
  /// offload copied after it, whose wait for its own D2H copy then covers
  /// this one's (the D2H stream runs its copies in order). -1: when the copy
  /// is predicted done.
  NodeId releaseNotBefore = -1;

  bool operator==(const CopyHint &other) const {
    return releaseBy == other.releaseBy &&
           prefetchNotBefore == other.prefetchNotBefore &&
           prefetchBy == other.prefetchBy &&
           releaseNotBefore == other.releaseNotBefore;
  }
};

struct Placement {
  /// One per activation (ActivationAnalysis order), fully placed.
  std::vector<ActivationDecision> decisions;
  /// Per node: time of the recompute chain run just before it, and its
  /// nodes in program order (chainAt; empty when none).
  std::vector<double> chainUs;
  /// The chains, one after the other in node order: node i's are
  /// chainNodes[chainBegin[i], chainBegin[i + 1]). One array, not a vector
  /// per node: most nodes have none, and an evaluation of a 100,000-op step
  /// made, zeroed and freed 100,000 empty vectors.
  std::vector<int32_t> chainBegin;
  std::vector<NodeId> chainNodes;
  llvm::ArrayRef<NodeId> chainAt(NodeId node) const {
    return llvm::ArrayRef(chainNodes)
        .slice(chainBegin[node], chainBegin[node + 1] - chainBegin[node]);
  }
  /// Per node: predicted start of the chain before it (chain + node start),
  /// and end of the node, on the compute stream.
  std::vector<double> chainStartUs;
  std::vector<double> nodeEndUs;
  /// Per activation (offload only): predicted D2H end and H2D start.
  std::vector<double> d2hEndUs;
  std::vector<double> h2dStartUs;
  /// Sum of chain times.
  double recomputeUs = 0.0;
};

/// `decisions` as a plan runs them: a checkpoint to recompute or offload
/// that no chain run in the plan reads (every reader retained, or itself
/// such a checkpoint) is retained. It is freed after its last forward use
/// either way, and a restore nothing reads would only cost time and memory
/// (and leave a prefetched buffer no op frees).
std::vector<Decision> effectiveDecisions(const ActivationAnalysis &analysis,
                                         llvm::ArrayRef<Decision> decisions);

/// Places `decisions` (one per activation), following `hints` (empty, or
/// one per activation) for offloads. Decisions the analysis forbids
/// (recompute of a non-recomputable activation, offload of a
/// non-offloadable one) are an error. Placed as effectiveDecisions runs
/// them: the placement's decisions say what runs.
llvm::Expected<Placement> placeDecisions(const ActivationAnalysis &analysis,
                                         const DeviceProfile &device,
                                         llvm::ArrayRef<Decision> decisions,
                                         llvm::ArrayRef<CopyHint> hints = {});
/// The same, writing into `storage`, a placement no longer needed: its
/// arrays' allocations, and those of its decisions' chains, are reused (a
/// fresh placement made and freed one chain a restored activation). The
/// result is the same placement.
llvm::Expected<Placement> placeDecisions(const ActivationAnalysis &analysis,
                                         const DeviceProfile &device,
                                         llvm::ArrayRef<Decision> decisions,
                                         llvm::ArrayRef<CopyHint> hints,
                                         Placement &&storage);

/// The first node in [lo, hi] whose predicted end (`nodeEndUs`) is at or
/// after `t` (hi when none): where a copy ending at `t` is waited for.
NodeId firstNodeEndingAfter(llvm::ArrayRef<double> nodeEndUs, double t,
                            NodeId lo, NodeId hi);
/// The last node in [lo, hi] whose predicted end is at or before `t` (lo
/// when none): the node after which a copy starting at `t` is issued.
NodeId lastNodeEndingBy(llvm::ArrayRef<double> nodeEndUs, double t, NodeId lo,
                        NodeId hi);

/// Where offloads' copies go on a placement's compute-stream times (the
/// copies rule above): `offloaded` (any order; sorted here) restored before
/// `restore[a]`, each as `hints` says (empty, or one per activation). Writes
/// the entries of the offloaded activations in the per-activation arrays
/// `releaseAfter`, `prefetchAfter`, `d2hEndUs` and `h2dStartUs`. Copies
/// change no node time, so a plan that differs from a placed one only in
/// copies (hints, offloads without a re-derived view retained) has its
/// copies placed by this on the placed one's times (the `auto` solver's
/// exact peaks of such trials, AutoSolverSearch.cpp).
void placeCopies(const ActivationAnalysis &analysis,
                 const PlannedCopyCosts &copy, llvm::ArrayRef<double> nodeEndUs,
                 llvm::ArrayRef<double> chainStartUs,
                 llvm::ArrayRef<NodeId> restore, llvm::ArrayRef<CopyHint> hints,
                 std::vector<int32_t> &offloaded,
                 llvm::MutableArrayRef<NodeId> releaseAfter,
                 llvm::MutableArrayRef<NodeId> prefetchAfter,
                 llvm::MutableArrayRef<double> d2hEndUs,
                 llvm::MutableArrayRef<double> h2dStartUs);

/// Completes a plan whose decisions state only retain / recompute / offload
/// (as the exact solver writes them): fills restore points, chains and copy
/// placements; placements already set (>= 0) are kept.
llvm::Error completePlacement(const ActivationAnalysis &analysis,
                              const DeviceProfile &device, Plan &plan);

/// Writes the placed plan out as a schedule. Fails, naming the value and
/// node, on a plan a program could not follow (a value read while dropped, a
/// release before the last forward use, a prefetch before its release).
llvm::Expected<Schedule>
buildSchedule(const ActivationAnalysis &analysis,
              llvm::ArrayRef<ActivationDecision> decisions);
/// The same, writing into `storage`, a schedule no longer needed: its ops
/// are overwritten in place, so their small vectors' and the arrays'
/// allocations are reused instead of made and freed again (an evaluation
/// writes ~10,000 ops at 10k nodes). The result is the same schedule.
/// `walk`, where given, gets walkMemory of it, read off the buffers' lives
/// while they are written (no pass over the ops).
llvm::Expected<Schedule>
buildSchedule(const ActivationAnalysis &analysis,
              llvm::ArrayRef<ActivationDecision> decisions, Schedule &&storage,
              MemoryWalk *walk = nullptr);

/// buildSchedule + simulate.
llvm::Expected<SimResult>
simulateDecisions(const ActivationAnalysis &analysis,
                  const DeviceProfile &device,
                  llvm::ArrayRef<ActivationDecision> decisions,
                  const SimOptions &options = {});

} // namespace lethe

#endif // LETHE_PLANNER_PLACEMENT_H

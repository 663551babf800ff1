//===- CopyModel.h - What-if model of the D2H and H2D queues ----*- C++ -*-===//
//
// The auto solver asks "what if this activation were offloaded too?" many
// times per step. The answer depends on the copy queues: a new D2H copy
// delays every copy issued after it (their releases may move past the
// memory peak), and a new prefetch pushes the prefetches due before it
// earlier (their buffers may now cover the peak). CopyModel keeps both
// queues exactly as placeDecisions (lethe/Planner/Placement.h) builds them
// and answers the question by re-running the two passes with the copy
// inserted.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_COPYMODEL_H
#define LETHE_LIB_PLANNER_COPYMODEL_H

#include "lethe/Planner/Placement.h"
#include "lethe/Simulator/Simulator.h"

#include <utility>
#include <vector>

namespace lethe::planner {

struct CopyEntry {
  int32_t act = -1;
  /// D2H order: (contentReadyAfter, storage); H2D order: (restore, storage).
  std::pair<NodeId, ValueId> d2hKey, h2dKey;
  int64_t bytes = 0;
  NodeId restore = -1;
  CopyHint hint;
  // Results of the passes.
  double d2hEnd = 0.0;
  NodeId release = -1;
  double stallUs = 0.0;
  double h2dStart = 0.0;
  NodeId prefetch = -1;
  /// The start of the prefetch after this one in the H2D pass (+infinity
  /// for the last), which with its release decides its prefetch.
  double h2dNext = 0.0;
};

/// What adding one offload would do, independent of where memory is
/// judged: the new copy's placement and every other copy that moves.
struct CopyWhatIf {
  NodeId release = -1, prefetch = -1;
  double d2hEnd = 0.0, h2dStart = 0.0;
  /// Predicted extra compute-stream wait (release stalls, late prefetches).
  double extraUs = 0.0;
  struct Move {
    uint32_t entry;
    NodeId oldRelease, oldPrefetch, newRelease, newPrefetch;
  };
  std::vector<Move> moved;
};

class CopyModel {
public:
  /// The queues of `placement`, whose offloads followed `hints` (empty, or
  /// one per activation).
  CopyModel(const ActivationAnalysis &analysis, const DeviceProfile &device,
            const Placement &placement, llvm::ArrayRef<CopyHint> hints = {});

  /// Adds an offloaded activation restored before `restore`.
  void add(int32_t act, NodeId restore, CopyHint hint = {});
  /// Adds offloaded activations (activation, restore point) with hidden
  /// copies at once: one merge instead of one insertion each.
  void addAll(llvm::ArrayRef<std::pair<int32_t, NodeId>> offloads);
  /// Recomputes both queues; call after add().
  void update();

  /// What offloading `act` (restored before `restore`) would do: the
  /// answer of add() and update() on a copy of the model, found without
  /// copying the queues, each copy placed again only where what decides
  /// its place moved (its D2H end; its release or next prefetch).
  CopyWhatIf whatIf(int32_t act, NodeId restore, CopyHint hint = {}) const;

  llvm::ArrayRef<CopyEntry> getEntries() const { return entries; }
  double exposureUs() const { return exposure; }

private:
  CopyEntry makeEntry(int32_t act, NodeId restore, CopyHint hint) const;
  /// Runs the D2H FIFO and the H2D as-late-as-possible passes over `list`
  /// taken in the given orders; returns the predicted compute wait.
  double run(std::vector<CopyEntry> &list, llvm::ArrayRef<uint32_t> d2hOrder,
             llvm::ArrayRef<uint32_t> h2dOrder) const;
  // How one copy is placed, for run() and whatIf() alike (whatIf's figures
  // must be run()'s to the bit).
  /// The node copy `e`, its D2H done at `d2hEnd`, is released after, and
  /// the compute stream's stall for it.
  std::pair<NodeId, double> releaseOf(const CopyEntry &e,
                                      double d2hEnd) const;
  /// The node after which copy `e`, released at `release`, is prefetched
  /// and its H2D start, the next prefetch starting at `next`.
  std::pair<NodeId, double> prefetchOf(const CopyEntry &e, NodeId release,
                                       double next) const;
  /// When copy `e`'s H2D really ends, prefetched after `prefetch`, its D2H
  /// done at `d2hEnd`, the H2D link free at `h2dFree`.
  double h2dEndOf(const CopyEntry &e, NodeId prefetch, double d2hEnd,
                  double h2dFree) const;
  /// `order` with `index` inserted where `key` sorts.
  template <typename KeyOf>
  static std::vector<uint32_t> inserted(llvm::ArrayRef<uint32_t> order,
                                        uint32_t index, KeyOf keyOf);

  const ActivationAnalysis &analysis;
  const Placement &placement;
  PlannedCopyCosts copy;
  std::vector<CopyEntry> entries;
  /// Entry indices in D2H (issue) and H2D (deadline) order.
  std::vector<uint32_t> d2hOrder, h2dOrder;
  double exposure = 0.0;
};

template <typename KeyOf>
std::vector<uint32_t> CopyModel::inserted(llvm::ArrayRef<uint32_t> order,
                                          uint32_t index, KeyOf keyOf) {
  std::vector<uint32_t> result;
  result.reserve(order.size() + 1);
  auto key = keyOf(index);
  size_t k = 0;
  while (k < order.size() && keyOf(order[k]) < key)
    result.push_back(order[k++]);
  result.push_back(index);
  for (; k < order.size(); ++k)
    result.push_back(order[k]);
  return result;
}

} // namespace lethe::planner

#endif // LETHE_LIB_PLANNER_COPYMODEL_H

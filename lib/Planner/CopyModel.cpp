//===- CopyModel.cpp - What-if model of the D2H and H2D queues ------------===//

#include "CopyModel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <tuple>

using namespace lethe;
using namespace lethe::planner;

CopyModel::CopyModel(const ActivationAnalysis &analysis,
                     const DeviceProfile &device, const Placement &placement,
                     llvm::ArrayRef<CopyHint> hints)
    : analysis(analysis), placement(placement) {
  copy = plannedCopyCosts(device);
  for (auto [a, d] : llvm::enumerate(placement.decisions))
    if (d.decision == Decision::Offload)
      entries.push_back(makeEntry(static_cast<int32_t>(a), d.firstBackwardUse,
                                  hints.empty() ? CopyHint() : hints[a]));
  for (uint32_t i = 0; i < entries.size(); ++i)
    d2hOrder.push_back(i);
  h2dOrder = d2hOrder;
  llvm::sort(d2hOrder, [&](uint32_t x, uint32_t y) {
    return entries[x].d2hKey < entries[y].d2hKey;
  });
  llvm::sort(h2dOrder, [&](uint32_t x, uint32_t y) {
    return entries[x].h2dKey < entries[y].h2dKey;
  });
  update();
}

CopyEntry CopyModel::makeEntry(int32_t act, NodeId restore,
                               CopyHint hint) const {
  const ActivationInfo &info = analysis.getActivations()[act];
  CopyEntry e;
  e.act = act;
  e.d2hKey = {info.contentReadyAfter, info.storage};
  e.h2dKey = {restore, info.storage};
  e.bytes = info.bytes;
  e.restore = restore;
  e.hint = hint;
  return e;
}

void CopyModel::add(int32_t act, NodeId restore, CopyHint hint) {
  entries.push_back(makeEntry(act, restore, hint));
  uint32_t index = static_cast<uint32_t>(entries.size() - 1);
  d2hOrder = inserted(d2hOrder, index,
                      [&](uint32_t i) { return entries[i].d2hKey; });
  h2dOrder = inserted(h2dOrder, index,
                      [&](uint32_t i) { return entries[i].h2dKey; });
}

void CopyModel::addAll(llvm::ArrayRef<std::pair<int32_t, NodeId>> offloads) {
  std::vector<uint32_t> added;
  for (auto [act, restore] : offloads) {
    added.push_back(static_cast<uint32_t>(entries.size()));
    entries.push_back(makeEntry(act, restore, CopyHint()));
  }
  // Keys are unique (they end with the storage): the merge orders as
  // inserting one at a time would.
  auto mergeBy = [&](std::vector<uint32_t> &order, auto keyOf) {
    std::vector<uint32_t> sorted = added;
    llvm::sort(sorted,
               [&](uint32_t x, uint32_t y) { return keyOf(x) < keyOf(y); });
    std::vector<uint32_t> merged;
    merged.reserve(order.size() + sorted.size());
    std::merge(order.begin(), order.end(), sorted.begin(), sorted.end(),
               std::back_inserter(merged),
               [&](uint32_t x, uint32_t y) { return keyOf(x) < keyOf(y); });
    order = std::move(merged);
  };
  mergeBy(d2hOrder, [&](uint32_t i) { return entries[i].d2hKey; });
  mergeBy(h2dOrder, [&](uint32_t i) { return entries[i].h2dKey; });
}

void CopyModel::update() { exposure = run(entries, d2hOrder, h2dOrder); }

std::pair<NodeId, double> CopyModel::releaseOf(const CopyEntry &e,
                                               double d2hEnd) const {
  const std::vector<double> &nodeEnd = placement.nodeEndUs;
  const ActivationInfo &info = analysis.getActivations()[e.act];
  NodeId release = firstNodeEndingAfter(nodeEnd, d2hEnd, info.lastForwardUse,
                                        e.restore - 1);
  if (e.hint.releaseBy >= 0)
    release =
        std::max(info.lastForwardUse, std::min(release, e.hint.releaseBy));
  return {release, std::max(0.0, d2hEnd - nodeEnd[release])};
}

std::pair<NodeId, double> CopyModel::prefetchOf(const CopyEntry &e,
                                                NodeId release,
                                                double next) const {
  const std::vector<double> &nodeEnd = placement.nodeEndUs;
  double end = std::min(placement.chainStartUs[e.restore], next);
  double start = end - copy.h2dUs(e.bytes);
  NodeId prefetch = lastNodeEndingBy(nodeEnd, start, release, e.restore - 1);
  if (e.hint.prefetchNotBefore >= 0)
    prefetch = std::min(e.restore - 1,
                        std::max(prefetch, e.hint.prefetchNotBefore));
  return {prefetch, std::max(start, nodeEnd[prefetch])};
}

double CopyModel::h2dEndOf(const CopyEntry &e, NodeId prefetch, double d2hEnd,
                           double h2dFree) const {
  double start =
      std::max({placement.nodeEndUs[prefetch], d2hEnd, h2dFree});
  return start + copy.h2dUs(e.bytes);
}

double CopyModel::run(std::vector<CopyEntry> &list,
                      llvm::ArrayRef<uint32_t> d2hSeq,
                      llvm::ArrayRef<uint32_t> h2dSeq) const {
  const std::vector<double> &nodeEnd = placement.nodeEndUs;
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  // D2H: FIFO in issue order; release when predicted done.
  double wait = 0.0;
  double free = 0.0;
  for (uint32_t i : d2hSeq) {
    CopyEntry &e = list[i];
    double start = std::max(nodeEnd[acts[e.act].contentReadyAfter], free);
    e.d2hEnd = start + copy.d2hUs(e.bytes);
    free = e.d2hEnd;
    std::tie(e.release, e.stallUs) = releaseOf(e, e.d2hEnd);
    wait += e.stallUs;
  }
  // H2D: as late as possible, backwards from the deadlines.
  double next = std::numeric_limits<double>::infinity();
  for (size_t k = h2dSeq.size(); k-- > 0;) {
    CopyEntry &e = list[h2dSeq[k]];
    std::tie(e.prefetch, e.h2dStart) = prefetchOf(e, e.release, next);
    e.h2dNext = next;
    next = e.h2dStart;
  }
  // Forward: when the prefetches can really run; the compute stream waits
  // for the ones that end after their deadline (counted once along the
  // running maximum, since one wait delays everything after it).
  double h2dFree = 0.0, worst = 0.0;
  for (uint32_t i : h2dSeq) {
    const CopyEntry &e = list[i];
    h2dFree = h2dEndOf(e, e.prefetch, e.d2hEnd, h2dFree);
    double late = h2dFree - placement.chainStartUs[e.restore];
    if (late > worst) {
      wait += late - worst;
      worst = late;
    }
  }
  return wait;
}

CopyWhatIf CopyModel::whatIf(int32_t act, NodeId restore,
                             CopyHint hint) const {
  // The three passes of run() over the queues with `mine` inserted, on the
  // entries' new figures kept apart (the queues are not copied). Each
  // figure is computed by run()'s expressions from the same operands, so it
  // is the same to the bit: a copy whose operands are the ones it had in
  // update()'s run keeps that run's figures without its node search (the
  // D2H FIFO before the inserted copy and after it once the queue drains;
  // the H2D pass after it where no release moved).
  const std::vector<double> &nodeEnd = placement.nodeEndUs;
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  const CopyEntry mine = makeEntry(act, restore, hint);
  const uint32_t n = static_cast<uint32_t>(entries.size());
  // The inserted copy's index, as add() gives it.
  const uint32_t mineIndex = n;
  auto entry = [&](uint32_t i) -> const CopyEntry & {
    return i == mineIndex ? mine : entries[i];
  };
  // Where `mine` goes in each order (inserted(): before the first key not
  // under its own; keys are unique).
  auto at = [&](llvm::ArrayRef<uint32_t> order, auto keyOf) -> size_t {
    return llvm::partition_point(
               order,
               [&](uint32_t i) { return keyOf(entries[i]) < keyOf(mine); }) -
           order.begin();
  };
  const size_t d2hAt =
      at(d2hOrder, [](const CopyEntry &e) { return e.d2hKey; });
  const size_t h2dAt =
      at(h2dOrder, [](const CopyEntry &e) { return e.h2dKey; });
  auto d2hSeq = [&](size_t k) -> uint32_t {
    return k < d2hAt ? d2hOrder[k] : k == d2hAt ? mineIndex : d2hOrder[k - 1];
  };
  auto h2dSeq = [&](size_t k) -> uint32_t {
    return k < h2dAt ? h2dOrder[k] : k == h2dAt ? mineIndex : h2dOrder[k - 1];
  };
  // The new figures by entry index (`mine` last). A step's queues hold tens
  // of copies (27 on average on BERT's least budget): no allocation.
  llvm::SmallVector<double, 64> d2hEnd(n + 1), h2dStart(n + 1);
  llvm::SmallVector<NodeId, 64> release(n + 1), prefetch(n + 1);

  // D2H: FIFO in issue order (run()).
  double wait = 0.0;
  double free = 0.0;
  for (size_t k = 0; k <= n; ++k) {
    const uint32_t i = d2hSeq(k);
    const CopyEntry &e = entry(i);
    const ActivationInfo &info = acts[e.act];
    double start = std::max(nodeEnd[info.contentReadyAfter], free);
    double end = start + copy.d2hUs(e.bytes);
    d2hEnd[i] = end;
    free = end;
    double stall;
    if (i != mineIndex && end == e.d2hEnd) {
      release[i] = e.release;
      stall = e.stallUs;
    } else {
      std::tie(release[i], stall) = releaseOf(e, end);
    }
    wait += stall;
  }
  // H2D: as late as possible, backwards from the deadlines (run()).
  double next = std::numeric_limits<double>::infinity();
  for (size_t k = n + 1; k-- > 0;) {
    const uint32_t i = h2dSeq(k);
    const CopyEntry &e = entry(i);
    if (i != mineIndex && next == e.h2dNext && release[i] == e.release) {
      prefetch[i] = e.prefetch;
      h2dStart[i] = e.h2dStart;
    } else {
      std::tie(prefetch[i], h2dStart[i]) = prefetchOf(e, release[i], next);
    }
    next = h2dStart[i];
  }
  // Forward: the prefetches' real runs and the compute stream's waits
  // (run()).
  double h2dFree = 0.0, worst = 0.0;
  for (size_t k = 0; k <= n; ++k) {
    const uint32_t i = h2dSeq(k);
    const CopyEntry &e = entry(i);
    h2dFree = h2dEndOf(e, prefetch[i], d2hEnd[i], h2dFree);
    double late = h2dFree - placement.chainStartUs[e.restore];
    if (late > worst) {
      wait += late - worst;
      worst = late;
    }
  }

  CopyWhatIf result;
  result.extraUs = std::max(0.0, wait - exposure);
  for (uint32_t i = 0; i < n; ++i)
    if (release[i] != entries[i].release || prefetch[i] != entries[i].prefetch)
      result.moved.push_back({i, entries[i].release, entries[i].prefetch,
                              release[i], prefetch[i]});
  result.release = release[mineIndex];
  result.prefetch = prefetch[mineIndex];
  result.d2hEnd = d2hEnd[mineIndex];
  result.h2dStart = h2dStart[mineIndex];
  return result;
}

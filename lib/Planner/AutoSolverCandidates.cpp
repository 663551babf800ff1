//===- AutoSolverCandidates.cpp - What the greedy picks from -------------===//
//
// The candidates of the `auto` ladder's greedy (AutoSolver.cpp) and their
// prices: where things are in the current schedule (index), the recompute
// of every retained activation with its marginal chain time at its restore
// point (prepareBatch, computeRecompute, pickRecompute), and the candidates
// that free one op, offloads judged with the copy model and copy-time
// trades (candidatesAt); their order (betterCandidate).
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

using namespace lethe;
using namespace lethe::autosolver;
/// Candidate order: least time per freed byte, then recompute before
/// offload (it uses no copy bandwidth), then hardest alternative first, then
/// largest, then lowest id.
bool lethe::autosolver::betterCandidate(const Candidate &x, const Candidate &y) {
  double sx = x.score(), sy = y.score();
  if (sx != sy)
    return sx < sy;
  if (x.decision != y.decision)
    return x.decision == Decision::Recompute;
  if (x.difficulty != y.difficulty)
    return x.difficulty > y.difficulty;
  if (x.bytes != y.bytes)
    return x.bytes > y.bytes;
  return x.act < y.act;
}

bool Batch::recomputeBefore(int32_t a, int32_t b) const {
  const RecomputeKey &x = recomputeKey[a], &y = recomputeKey[b];
  if (x.score != y.score)
    return x.score < y.score;
  if (x.difficulty != y.difficulty)
    return x.difficulty > y.difficulty;
  if (x.bytes != y.bytes)
    return x.bytes > y.bytes;
  return a < b;
}

const Candidate *
lethe::autosolver::bestCandidate(llvm::ArrayRef<const Candidate *> cands,
                                 const Batch *batch) {
  // A recompute candidate of `batch` is known by its address alone: its
  // activation (Candidate::act) is its index.
  const Candidate *first = batch ? batch->recompute.data() : nullptr;
  const size_t count = batch ? batch->recompute.size() : 0;
  auto indexOf = [&](const Candidate *c) -> ptrdiff_t {
    if (!batch || std::less<const Candidate *>()(c, first) ||
        !std::less<const Candidate *>()(c, first + count))
      return -1;
    return c - first;
  };
  auto scoreOf = [&](const Candidate *c, ptrdiff_t index) {
    return index >= 0 ? batch->recomputeKey[index].score : c->score();
  };
  const Candidate *best = cands.front();
  ptrdiff_t bestIndex = indexOf(best);
  double bestScore = scoreOf(best, bestIndex);
  for (const Candidate *c : cands.drop_front()) {
    ptrdiff_t index = indexOf(c);
    // betterCandidate(*c, *best), its first test on the score kept.
    double score = scoreOf(c, index);
    bool better = score < bestScore;
    if (!better && score == bestScore) {
      if (index >= 0 && bestIndex >= 0) {
        better = batch->recomputeBefore(index, bestIndex);
      } else {
        better = betterCandidate(*c, *best);
      }
    }
    if (better) {
      best = c;
      bestIndex = index;
      bestScore = score;
    }
  }
  return best;
}

double Solver::contentionRate() const {
  auto loss = [](double factor) {
    return factor > 1.0 ? 1.0 - 1.0 / factor : 0.0;
  };
  const double matrix = loss(device.matmulSlowdownWithCopies);
  const double memoryBound = loss(device.memoryBoundSlowdownWithCopies);
  if (matrix <= 0.0 && memoryBound <= 0.0)
    return 0.0;
  double slowed = 0.0, total = 0.0;
  for (size_t i = 0; i < graph.numNodes(); ++i) {
    const GraphNode &node = graph.getNode(i);
    if (node.hasFlag(NodeFlagCollective))
      continue;
    double t = std::max(0.0, node.timeUs);
    total += t;
    switch (kernelClassOf(node)) {
    case KernelClass::Matrix:
      slowed += t * matrix;
      break;
    case KernelClass::MemoryBound:
      slowed += t * memoryBound;
      break;
    case KernelClass::None:
      break;
    }
  }
  return total > 0.0 ? slowed / total : 0.0;
}

std::shared_ptr<const Positions>
Solver::index(const Evaluation &eval) const {
  if (indexedSchedule && indexedSchedule == eval.schedule)
    return indexedPositions;
  auto made = std::make_shared<Positions>();
  Positions &pos = *made;
  const Schedule &schedule = *eval.schedule;
  const size_t numOps = schedule.ops.size();
  const size_t numNodes = graph.numNodes();
  const size_t numActs = acts.size();
  // Each node's op, unknown until the walk reaches it: then above every op
  // before it, which the reads' test below relies on.
  constexpr OpIndex kNotYet = std::numeric_limits<OpIndex>::max();
  pos.nodeOp.assign(numNodes, kNotYet);
  pos.regionStart.assign(numNodes, 0);
  pos.opNode.assign(numOps, static_cast<NodeId>(numNodes));
  pos.producedFree.assign(numActs, static_cast<OpIndex>(numOps) - 1);
  pos.releaseOp.assign(numActs, -1);
  pos.prefetchOp.assign(numActs, -1);
  std::vector<int32_t> producedOf(schedule.buffers.size(), -1);
  for (auto [b, buffer] : llvm::enumerate(schedule.buffers))
    if (buffer.origin == BufferOrigin::Produced)
      producedOf[b] = activationOfValue[buffer.storage];
  // The first op that reads each activation's produced buffer after its
  // forward life; its node (the op's region's) is known only once the walk
  // reaches the node that ends the region.
  std::vector<OpIndex> needOp(numActs, -1);
  // One walk over the ops for everything (each walk was a pass over the
  // whole schedule's memory): each node's op, the run of recompute ops just
  // before it, the node each op up to it belongs to, and the activations'
  // frees, first reads, releases and prefetches.
  size_t chainBegin = 0, unassigned = 0;
  for (size_t k = 0; k < numOps; ++k) {
    const ScheduleOp &op = schedule.ops[k];
    if (op.kind == ScheduleOpKind::Recompute) {
      if (k == 0 || schedule.ops[k - 1].kind != ScheduleOpKind::Recompute)
        chainBegin = k;
    } else if (op.kind == ScheduleOpKind::Node) {
      pos.nodeOp[op.node] = static_cast<OpIndex>(k);
      bool chain =
          k > 0 && schedule.ops[k - 1].kind == ScheduleOpKind::Recompute;
      pos.regionStart[op.node] = static_cast<OpIndex>(chain ? chainBegin : k);
      for (; unassigned <= k; ++unassigned)
        pos.opNode[unassigned] = op.node;
    }
    for (BufferId b : op.frees)
      if (producedOf[b] >= 0)
        pos.producedFree[producedOf[b]] = static_cast<OpIndex>(k);
    // A node whose op is not reached yet comes after k (kNotYet).
    for (BufferId b : op.reads) {
      int32_t a = producedOf[b];
      if (a >= 0 && needOp[a] < 0 &&
          static_cast<OpIndex>(k) > pos.nodeOp[lastForwardUseOf[a]] &&
          op.kind != ScheduleOpKind::Offload)
        needOp[a] = static_cast<OpIndex>(k);
    }
    int32_t a = op.storage >= 0 ? activationOfValue[op.storage] : -1;
    if (op.kind == ScheduleOpKind::Release && a >= 0)
      pos.releaseOp[a] = static_cast<OpIndex>(k);
    if (op.kind == ScheduleOpKind::Prefetch && a >= 0)
      pos.prefetchOp[a] = static_cast<OpIndex>(k);
  }
  for (OpIndex &op : pos.nodeOp)
    if (op == kNotYet)
      op = 0;
  pos.needNode.assign(numActs, -1);
  for (size_t a = 0; a < numActs; ++a)
    if (needOp[a] >= 0)
      pos.needNode[a] = pos.opNode[needOp[a]];
  indexedSchedule = eval.schedule;
  indexedPositions = std::move(made);
  return indexedPositions;
}

void Solver::computeRecompute(Candidate &c, const Placement &placement,
                              const Batch &batch) const {
  const ActivationInfo &act = acts[c.act];
  c.costUs = 0.0;
  c.chainExtra = 0;
  c.newChainNodes.clear();
  llvm::ArrayRef<NodeId> existing = placement.chainAt(c.restore);
  for (NodeId node : act.recomputeNodes) {
    if (std::binary_search(existing.begin(), existing.end(), node) ||
        batch.chain.contains((uint64_t(c.restore) << 32) | uint32_t(node)))
      continue;
    c.newChainNodes.push_back(node);
    // The analysis's flat copies of the node's time, flags and owned
    // result storages: the GraphNode and its results list were a cache
    // miss each (~half of this function).
    const ActivationAnalysis::NodeBrief &n = analysis.getNodeBrief(node);
    if (!n.hasFlag(NodeFlagCollective))
      c.costUs += std::max(0.0, n.timeUs);
    for (int32_t s : analysis.resultStorages(node)) {
      const StorageInfo &result = analysis.getStorages()[s];
      if (result.storage != act.storage)
        c.chainExtra += result.bytes;
    }
  }
  // The chain reads its inputs at c.restore: an offloaded input restored
  // later must now be back by then, and its H2D copy (placed to end just
  // before its own restore point) is exposed where it cannot end in time.
  // Unpriced, such a recompute looks free of copy cost and the next level's
  // polish, finding it undone faster, makes a smaller budget faster.
  double h2dRate = device.h2dBytesPerSec;
  for (ValueId input : act.recomputeInputs) {
    int32_t b = analysis.activationIndex(input);
    if (b < 0 || placement.decisions[b].decision != Decision::Offload ||
        placement.decisions[b].firstBackwardUse <= c.restore)
      continue;
    double h2dUs = static_cast<double>(acts[b].bytes) / h2dRate * 1e6;
    double earliestEnd =
        std::max(placement.d2hEndUs[b],
                 placement.nodeEndUs[placement.decisions[b].releaseAfter]) +
        h2dUs;
    c.costUs += std::max(0.0, earliestEnd - placement.chainStartUs[c.restore]);
  }
}

void Solver::prepareBatch(const Positions &pos, const Evaluation &eval,
                          llvm::ArrayRef<Decision> decisions,
                          Batch &batch) const {
  // Only the candidates in byRestore are ever written (here and by
  // pickRecompute).
  for (auto [restore, a] : batch.byRestore)
    batch.recompute[a] = Candidate();
  batch.recompute.resize(acts.size());
  batch.recomputeKey.resize(acts.size());
  for (std::optional<planner::CopyWhatIf> &w : batch.whatIf)
    w.reset();
  batch.whatIf.resize(acts.size());
  for (auto &w : batch.tradeWhatIf)
    w.reset();
  batch.tradeWhatIf.resize(acts.size());
  batch.restore.assign(acts.size(), -1);
  batch.picked.assign(acts.size(), 0);
  batch.liveIndex.assign(acts.size(), -1);
  batch.keyMoved.clear();
  batch.byRestore.clear();
  batch.chain.clear();
  batch.liveAct.clear();
  batch.liveBegin.clear();
  batch.liveEnd.clear();
  batch.liveGapBegin.clear();
  batch.liveGapEnd.clear();
  batch.liveOffloadable.clear();
  batch.liveBytes.clear();
  batch.offloadScratch.clear();
  for (size_t a = 0; a < acts.size(); ++a) {
    if (decisions[a] != Decision::Retain)
      continue;
    const ActivationInfo &act = acts[a];
    NodeId restore =
        pos.needNode[a] >= 0 ? pos.needNode[a] : act.firstBackwardUse;
    if (restore <= act.lastForwardUse)
      continue;
    batch.restore[a] = restore;
    batch.liveIndex[a] = static_cast<int32_t>(batch.liveAct.size());
    batch.liveAct.push_back(static_cast<int32_t>(a));
    batch.liveBegin.push_back(pos.nodeOp[act.producer]);
    batch.liveEnd.push_back(pos.producedFree[a]);
    batch.liveOffloadable.push_back(act.offloadable);
    batch.liveBytes.push_back(act.bytes);
    batch.liveGapBegin.push_back(std::numeric_limits<size_t>::max());
    batch.liveGapEnd.push_back(0);
    if (!act.recomputable)
      continue;
    Candidate &c = batch.recompute[a];
    c.act = static_cast<int32_t>(a);
    c.decision = Decision::Recompute;
    c.bytes = c.benefit = act.bytes;
    c.restore = restore;
    c.gapBegin = pos.nodeOp[act.lastForwardUse] + 1;
    c.gapEnd = pos.regionStart[restore] - 1;
    batch.liveGapBegin.back() = c.gapBegin;
    batch.liveGapEnd.back() = c.gapEnd;
    c.chainPos = pos.regionStart[restore];
    computeRecompute(c, *eval.placement, batch);
    batch.setRecomputeKey(c);
    batch.byRestore.push_back({restore, static_cast<int32_t>(a)});
  }
  llvm::sort(batch.byRestore);
  batch.sortRecomputes();
}

void Batch::sortRecomputes() {
  recomputeOrder.clear();
  for (auto [restore, a] : byRestore)
    recomputeOrder.push_back(a);
  llvm::sort(recomputeOrder,
             [&](int32_t a, int32_t b) { return recomputeBefore(a, b); });
  orderHead = 0;
  keyMoved.assign(recompute.size(), 0);
  movedKeys.clear();
}

const Candidate *Batch::bestRecomputeAt(size_t op) {
  // Every call reads the moved keys: sort again once they are more than a
  // small share of the candidates (a sort costs about log n calls' reads).
  if (movedKeys.size() > 32 + recomputeOrder.size() / 32)
    sortRecomputes();
  auto frees = [&](int32_t a) {
    int32_t k = liveIndex[a];
    return !picked[a] && op >= liveBegin[k] && op <= liveEnd[k] &&
           op >= liveGapBegin[k] && op <= liveGapEnd[k];
  };
  // Picks are final within the batch: the head never goes back.
  while (orderHead < recomputeOrder.size() && picked[recomputeOrder[orderHead]])
    ++orderHead;
  int32_t best = -1;
  for (size_t i = orderHead; i < recomputeOrder.size(); ++i) {
    int32_t a = recomputeOrder[i];
    if (!keyMoved[a] && frees(a)) {
      best = a;
      break;
    }
  }
  for (int32_t a : movedKeys)
    if (frees(a) && (best < 0 || recomputeBefore(a, best)))
      best = a;
  return best < 0 ? nullptr : &recompute[best];
}

void Solver::pickRecompute(Batch &batch, const Candidate &picked,
                           const Placement &placement) const {
  for (NodeId node : picked.newChainNodes)
    batch.chain.insert((uint64_t(picked.restore) << 32) | uint32_t(node));
  auto range = std::equal_range(
      batch.byRestore.begin(), batch.byRestore.end(),
      std::make_pair(picked.restore, int32_t(-1)),
      [](const std::pair<NodeId, int32_t> &x,
         const std::pair<NodeId, int32_t> &y) { return x.first < y.first; });
  for (auto it = range.first; it != range.second; ++it)
    if (!batch.picked[it->second]) {
      Candidate &c = batch.recompute[it->second];
      computeRecompute(c, placement, batch);
      batch.setRecomputeKey(c);
    }
}

std::vector<const Candidate *>
Solver::candidatesAt(size_t op, const Positions &pos, const Evaluation &eval,
                     Batch &batch, const planner::CopyModel &copies,
                     size_t offloadLimit,
                     llvm::function_ref<std::pair<size_t, size_t>()> overLevel,
                     bool bestRecomputeOnly) {
  const Placement &placement = *eval.placement;
  std::vector<const Candidate *> result;
  const std::vector<NodeId> &restoreOf = batch.restore;
  auto liveAt = [&](size_t k) {
    return op >= static_cast<size_t>(batch.liveBegin[k]) &&
           op <= static_cast<size_t>(batch.liveEnd[k]);
  };
  if (bestRecomputeOnly) {
    if (const Candidate *best = batch.bestRecomputeAt(op))
      result.push_back(best);
  } else {
    for (size_t k = 0; k < batch.liveAct.size(); ++k) {
      int32_t a = batch.liveAct[k];
      if (liveAt(k) && !batch.picked[a] && op >= batch.liveGapBegin[k] &&
          op <= batch.liveGapEnd[k])
        result.push_back(&batch.recompute[a]);
    }
  }
  auto offloadable = [&](int32_t a) {
    int32_t k = batch.liveIndex[a];
    return k >= 0 && liveAt(k) && !batch.picked[a] &&
           batch.liveOffloadable[k] &&
           offloadedBytes + batch.liveBytes[k] <= options.hostBudgetBytes;
  };
  batch.offloadScratch.clear();
  // Offloads cost nothing when their copies hide; judge them hardest to
  // recompute first, stopping at the first free one (none after it can
  // beat it).
  auto freesAt = [&](NodeId release, NodeId prefetch) {
    return static_cast<size_t>(pos.nodeOp[release]) < op &&
           op <= static_cast<size_t>(pos.nodeOp[prefetch]);
  };
  const std::vector<double> &nodeEnd = placement.nodeEndUs;
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  // Offloads whose copies cannot hide around `op` can still free it by
  // releasing before it (waiting for the D2H copy) and prefetching after it
  // (waiting for the H2D copy): judged too, a few per call.
  NodeId peakNode = pos.opNode[op];
  size_t judged = 0, trades = 0;
  const size_t tradeLimit = 8;
  llvm::ArrayRef<planner::CopyEntry> entries = copies.getEntries();
  // Adds the candidate if it frees `op`; returns whether it costs nothing.
  auto consider = [&](Candidate c, const planner::CopyWhatIf &effect) {
    c.gapBegin = pos.nodeOp[effect.release] + 1;
    c.gapEnd = pos.nodeOp[effect.prefetch];
    if (op < c.gapBegin || op > c.gapEnd)
      return false;
    int64_t lost = 0;
    for (const planner::CopyWhatIf::Move &m : effect.moved)
      if (freesAt(m.oldRelease, m.oldPrefetch) &&
          !freesAt(m.newRelease, m.newPrefetch))
        lost += entries[m.entry].bytes;
    c.costUs = effect.extraUs;
    c.benefit = c.bytes - lost;
    if (c.benefit <= 0)
      return false;
    bool free = c.costUs == 0.0 && lost == 0;
    // Hidden copies still slow the kernels they run beside.
    c.contentionUs =
        contentionPerCopyUs * (copy.d2hUs(c.bytes) + copy.h2dUs(c.bytes));
    c.costUs += c.contentionUs;
    batch.offloadScratch.push_back(std::move(c));
    return free;
  };
  auto makeCandidate = [&](int32_t a) {
    const ActivationInfo &act = acts[a];
    Candidate c;
    c.act = a;
    c.decision = Decision::Offload;
    c.bytes = act.bytes;
    c.restore = restoreOf[a];
    c.difficulty = act.recomputable
                       ? act.recomputeUs / static_cast<double>(act.bytes)
                       : std::numeric_limits<double>::infinity();
    return c;
  };
  llvm::SmallVector<int32_t> cannotHide;
  for (int32_t a : offloadOrder) {
    if (!offloadable(a))
      continue;
    const ActivationInfo &act = acts[a];
    NodeId restore = restoreOf[a];
    // Optimistic bounds first: an empty queue on both links.
    double d2hEnd = nodeEnd[act.contentReadyAfter] + copy.d2hUs(act.bytes);
    auto releaseIt = std::lower_bound(nodeEnd.begin() + act.lastForwardUse,
                                      nodeEnd.begin() + restore, d2hEnd - 1e-9);
    NodeId earliestRelease = std::min<NodeId>(
        restore - 1, static_cast<NodeId>(releaseIt - nodeEnd.begin()));
    double latestStart =
        placement.chainStartUs[restore] - copy.h2dUs(act.bytes);
    auto issueIt =
        std::upper_bound(nodeEnd.begin() + earliestRelease,
                         nodeEnd.begin() + restore, latestStart + 1e-9);
    NodeId latestIssue = std::max<NodeId>(
        earliestRelease, static_cast<NodeId>(issueIt - nodeEnd.begin()) - 1);
    if (static_cast<size_t>(pos.nodeOp[earliestRelease]) + 1 > op ||
        static_cast<size_t>(pos.nodeOp[latestIssue]) < op) {
      cannotHide.push_back(a);
      continue;
    }
    if (judged++ >= offloadLimit)
      break;
    std::optional<planner::CopyWhatIf> &effect = batch.whatIf[a];
    if (!effect)
      effect = copies.whatIf(a, restore);
    size_t before = batch.offloadScratch.size();
    if (consider(makeCandidate(a), *effect))
      break;
    if (batch.offloadScratch.size() == before)
      cannotHide.push_back(a);
  }
  // Trading copy time for memory where nothing frees `op` for free: the
  // trade competes on time per byte with the recomputes. It releases before
  // the nodes above the level around `op` and prefetches after them (one
  // trade per node would free the peak node and leave its neighbours, which
  // the same activation can no longer free).
  auto costsTime = [](const Candidate *c) {
    return c->costUs - c->contentionUs > 0.0;
  };
  // Asked only where a trade could follow: it reads every candidate.
  auto anyFree = [&] {
    return llvm::any_of(result,
                        [&](const Candidate *c) { return !costsTime(c); }) ||
           llvm::any_of(batch.offloadScratch,
                        [&](const Candidate &c) { return !costsTime(&c); });
  };
  if (!noTrades && !cannotHide.empty() && !anyFree()) {
    auto [firstOp, lastOp] = overLevel();
    NodeId first = pos.opNode[std::min(firstOp, op)];
    NodeId last = pos.opNode[std::max(lastOp, op)];
    for (int32_t a : cannotHide) {
      if (trades >= tradeLimit)
        break;
      const ActivationInfo &act = acts[a];
      if (peakNode - 1 < act.lastForwardUse || peakNode > restoreOf[a] - 1)
        continue;
      ++trades;
      Candidate c = makeCandidate(a);
      c.hint.releaseBy = std::max<NodeId>(first - 1, act.lastForwardUse);
      c.hint.prefetchNotBefore = std::min<NodeId>(last, restoreOf[a] - 1);
      std::optional<std::pair<CopyHint, planner::CopyWhatIf>> &cached =
          batch.tradeWhatIf[a];
      if (!cached || !(cached->first == c.hint))
        cached.emplace(c.hint, copies.whatIf(a, c.restore, c.hint));
      consider(c, cached->second);
    }
  }
  for (const Candidate &c : batch.offloadScratch)
    result.push_back(&c);
  if (freeOnly)
    llvm::erase_if(result, [](const Candidate *c) {
      return c->costUs - c->contentionUs > 0.0;
    });
  return result;
}

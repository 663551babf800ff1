//===- AutoSolver.cpp - The fast solver of policy `auto` ------------------===//
//
// A ladder of greedy plans at falling memory levels plus fixed-policy seeds;
// see AutoSolver.h for the contract and docs/Planner.md for the argument.
//
// Inside a level the greedy works on the exact memory of the current
// schedule (one entry per op in program order). It repeatedly takes the op
// holding the most memory and frees bytes there with the cheapest candidate
// (predicted time per freed byte), updating an approximate memory array
// (a segment tree with range add) after each pick; then it evaluates the
// whole batch exactly and starts over from the exact memory until the level
// holds. When a batch does not help, single candidates are tried exactly
// (trySingles, AutoSolverSearch.cpp). The reasons given for each decision
// are in AutoSolverExplain.cpp.
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"
#include "PlannerUtils.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

using namespace lethe;
using namespace lethe::autosolver;
using planner::humanBytes;
using planner::humanUs;

namespace {

struct Member {
  std::vector<Decision> decisions;
  std::vector<CopyHint> hints;
  int64_t peak = 0;
  double step = 0.0;
  unsigned level = 0;
};

/// Ladder levels built below the first one that fits the budget.
constexpr unsigned kLookBelow = 3;

} // namespace

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

Positions Solver::index(const Evaluation &eval) const {
  const Schedule &schedule = *eval.schedule;
  const size_t numOps = schedule.ops.size();
  const size_t numNodes = graph.numNodes();
  Positions pos;
  pos.nodeOp.assign(numNodes, 0);
  pos.regionStart.assign(numNodes, 0);
  pos.opNode.assign(numOps, static_cast<NodeId>(numNodes));
  for (size_t k = 0; k < numOps; ++k)
    if (schedule.ops[k].kind == ScheduleOpKind::Node)
      pos.nodeOp[schedule.ops[k].node] = static_cast<OpIndex>(k);
  for (size_t i = 0; i < numNodes; ++i) {
    OpIndex k = pos.nodeOp[i];
    while (k > 0 && schedule.ops[k - 1].kind == ScheduleOpKind::Recompute)
      --k;
    pos.regionStart[i] = k;
  }
  NodeId next = static_cast<NodeId>(numNodes);
  for (size_t k = numOps; k-- > 0;) {
    if (schedule.ops[k].kind == ScheduleOpKind::Node)
      next = schedule.ops[k].node;
    pos.opNode[k] = next;
  }
  const size_t numActs = acts.size();
  pos.producedFree.assign(numActs, static_cast<OpIndex>(numOps) - 1);
  pos.needNode.assign(numActs, -1);
  pos.releaseOp.assign(numActs, -1);
  pos.prefetchOp.assign(numActs, -1);
  std::vector<int32_t> producedOf(schedule.buffers.size(), -1);
  for (auto [b, buffer] : llvm::enumerate(schedule.buffers))
    if (buffer.origin == BufferOrigin::Produced)
      producedOf[b] = analysis.activationIndex(buffer.storage);
  for (size_t k = 0; k < numOps; ++k) {
    const ScheduleOp &op = schedule.ops[k];
    for (BufferId b : op.frees)
      if (producedOf[b] >= 0)
        pos.producedFree[producedOf[b]] = static_cast<OpIndex>(k);
    for (BufferId b : op.reads) {
      int32_t a = producedOf[b];
      if (a >= 0 && pos.needNode[a] < 0 &&
          k > static_cast<size_t>(pos.nodeOp[acts[a].lastForwardUse]) &&
          op.kind != ScheduleOpKind::Offload)
        pos.needNode[a] = pos.opNode[k];
    }
    int32_t a = op.storage >= 0 ? analysis.activationIndex(op.storage) : -1;
    if (op.kind == ScheduleOpKind::Release && a >= 0)
      pos.releaseOp[a] = static_cast<OpIndex>(k);
    if (op.kind == ScheduleOpKind::Prefetch && a >= 0)
      pos.prefetchOp[a] = static_cast<OpIndex>(k);
  }
  return pos;
}

void Solver::computeRecompute(Candidate &c, const Placement &placement,
                              const Batch &batch) const {
  const ActivationInfo &act = acts[c.act];
  c.costUs = 0.0;
  c.chainExtra = 0;
  c.newChainNodes.clear();
  const std::vector<NodeId> &existing = placement.chainNodes[c.restore];
  for (NodeId node : act.recomputeNodes) {
    if (std::binary_search(existing.begin(), existing.end(), node) ||
        batch.chain.contains((uint64_t(c.restore) << 32) | uint32_t(node)))
      continue;
    c.newChainNodes.push_back(node);
    const GraphNode &n = graph.getNode(node);
    if (!n.hasFlag(NodeFlagCollective))
      c.costUs += std::max(0.0, n.timeUs);
    for (ValueId r : n.results) {
      int32_t s = analysis.storageIndex(r);
      if (s >= 0 && analysis.getStorages()[s].storage == r && r != act.storage)
        c.chainExtra += analysis.getStorages()[s].bytes;
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

Batch Solver::prepareBatch(const Positions &pos, const Evaluation &eval,
                           llvm::ArrayRef<Decision> decisions) const {
  Batch batch;
  batch.restore.assign(acts.size(), -1);
  batch.recompute.resize(acts.size());
  batch.picked.assign(acts.size(), 0);
  batch.whatIf.resize(acts.size());
  batch.tradeWhatIf.resize(acts.size());
  batch.offloadMark.assign(acts.size(), 0);
  for (size_t a = 0; a < acts.size(); ++a) {
    if (decisions[a] != Decision::Retain)
      continue;
    const ActivationInfo &act = acts[a];
    NodeId restore =
        pos.needNode[a] >= 0 ? pos.needNode[a] : act.firstBackwardUse;
    if (restore <= act.lastForwardUse)
      continue;
    batch.restore[a] = restore;
    batch.liveAct.push_back(static_cast<int32_t>(a));
    batch.liveBegin.push_back(pos.nodeOp[act.producer]);
    batch.liveEnd.push_back(pos.producedFree[a]);
    if (!act.recomputable)
      continue;
    Candidate &c = batch.recompute[a];
    c.act = static_cast<int32_t>(a);
    c.decision = Decision::Recompute;
    c.bytes = c.benefit = act.bytes;
    c.restore = restore;
    c.gapBegin = pos.nodeOp[act.lastForwardUse] + 1;
    c.gapEnd = pos.regionStart[restore] - 1;
    c.chainPos = pos.regionStart[restore];
    computeRecompute(c, *eval.placement, batch);
    batch.byRestore.push_back({restore, static_cast<int32_t>(a)});
  }
  llvm::sort(batch.byRestore);
  return batch;
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
    if (!batch.picked[it->second])
      computeRecompute(batch.recompute[it->second], placement, batch);
}

std::vector<const Candidate *>
Solver::candidatesAt(
    size_t op, const Positions &pos, const Evaluation &eval, Batch &batch,
    const planner::CopyModel &copies, size_t offloadLimit,
    llvm::function_ref<std::pair<size_t, size_t>()> overLevel) {
  const Placement &placement = *eval.placement;
  std::vector<const Candidate *> result;
  std::vector<uint8_t> &offloadable = batch.offloadMark;
  std::vector<int32_t> marked;
  const std::vector<NodeId> &restoreOf = batch.restore;
  for (size_t k = 0; k < batch.liveAct.size(); ++k) {
    if (op < static_cast<size_t>(batch.liveBegin[k]) ||
        op > static_cast<size_t>(batch.liveEnd[k]))
      continue;
    int32_t a = batch.liveAct[k];
    if (batch.picked[a])
      continue;
    const ActivationInfo &act = acts[a];
    const Candidate &rc = batch.recompute[a];
    if (rc.act >= 0 && op >= rc.gapBegin && op <= rc.gapEnd)
      result.push_back(&rc);
    if (act.offloadable &&
        offloadedBytes + act.bytes <= options.hostBudgetBytes) {
      offloadable[a] = 1;
      marked.push_back(a);
    }
  }
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
    if (!offloadable[a])
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
  bool anyFree =
      llvm::any_of(result, [&](const Candidate *c) { return !costsTime(c); }) ||
      llvm::any_of(batch.offloadScratch,
                   [&](const Candidate &c) { return !costsTime(&c); });
  if (!anyFree && !noTrades && !cannotHide.empty()) {
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
  for (int32_t a : marked)
    offloadable[a] = 0;
  for (const Candidate &c : batch.offloadScratch)
    result.push_back(&c);
  if (freeOnly)
    llvm::erase_if(result, [](const Candidate *c) {
      return c->costUs - c->contentionUs > 0.0;
    });
  return result;
}

llvm::Expected<bool> Solver::reduceTo(int64_t level) {
  MaxTree tree;
  for (unsigned iter = 0; iter < 64; ++iter) {
    if (currentEval.peakBytes <= level)
      return true;
    Positions pos = index(currentEval);
    tree.build(currentEval.memory.deviceAtOp);
    planner::CopyModel copies(analysis, device, *currentEval.placement,
                              currentHints);
    Batch batch = prepareBatch(pos, currentEval, current);
    std::vector<Decision> next = current;
    std::vector<CopyHint> nextHints = currentHints;
    bool any = false;
    auto freedRange = [&](const planner::CopyEntry &e) {
      return std::make_pair<size_t, size_t>(pos.nodeOp[e.release] + 1,
                                            pos.nodeOp[e.prefetch]);
    };
    while (tree.max() > level) {
      size_t op = tree.argmax();
      auto overLevel = [&] {
        // The tree's memory, one op at a time: only when a trade is judged.
        size_t first = op, last = op;
        const size_t numOps = currentEval.schedule->ops.size();
        while (first > 0 && tree.maxIn(first - 1, first - 1) > level)
          --first;
        while (last + 1 < numOps && tree.maxIn(last + 1, last + 1) > level)
          ++last;
        return std::make_pair(first, last);
      };
      std::vector<const Candidate *> cands =
          candidatesAt(op, pos, currentEval, batch, copies, 16, overLevel);
      if (cands.empty())
        break;
      // A copy: the candidate lists are rebuilt as picks change them.
      Candidate best =
          **std::min_element(cands.begin(), cands.end(),
                             [](const Candidate *x, const Candidate *y) {
                               return betterCandidate(*x, *y);
                             });
      llvm::SmallVector<Candidate, 1> picks = {best};
      if (tying)
        appendTiedPicks(op, pos, batch, copies, picks);
      // Offloads move the other copies too: their freed ranges are compared
      // once for all the picks (a tied pick adds many copies).
      std::vector<std::pair<size_t, size_t>> before;
      const size_t entriesBefore = copies.getEntries().size();
      bool offloaded = false;
      std::vector<std::pair<int32_t, NodeId>> hidden;
      for (const Candidate &pick : picks) {
        batch.picked[pick.act] = 1;
        next[pick.act] = pick.decision;
        nextHints[pick.act] = pick.hint;
        any = true;
        if (pick.decision == Decision::Recompute) {
          tree.add(pick.gapBegin, pick.gapEnd, -pick.bytes);
          if (pick.chainExtra > 0)
            tree.add(pick.chainPos, pick.chainPos, pick.chainExtra);
          pickRecompute(batch, pick, *currentEval.placement);
          continue;
        }
        if (!offloaded)
          for (const planner::CopyEntry &e : copies.getEntries())
            before.push_back(freedRange(e));
        offloaded = true;
        offloadedBytes += pick.bytes;
        if (pick.hint == CopyHint())
          hidden.push_back({pick.act, pick.restore});
        else
          copies.add(pick.act, pick.restore, pick.hint);
      }
      if (!offloaded)
        continue;
      copies.addAll(hidden);
      copies.update();
      for (std::optional<planner::CopyWhatIf> &w : batch.whatIf)
        w.reset();
      for (auto &w : batch.tradeWhatIf)
        w.reset();
      llvm::ArrayRef<planner::CopyEntry> entries = copies.getEntries();
      for (size_t i = 0; i < entriesBefore; ++i) {
        std::pair<size_t, size_t> now = freedRange(entries[i]);
        if (now == before[i])
          continue;
        if (before[i].first <= before[i].second)
          tree.add(before[i].first, before[i].second, entries[i].bytes);
        if (now.first <= now.second)
          tree.add(now.first, now.second, -entries[i].bytes);
      }
      for (size_t i = entriesBefore; i < entries.size(); ++i) {
        std::pair<size_t, size_t> mine = freedRange(entries[i]);
        if (mine.first <= mine.second)
          tree.add(mine.first, mine.second, -entries[i].bytes);
      }
    }
    if (any) {
      llvm::Expected<Evaluation> eval = evaluator.evaluate(next, nextHints);
      if (!eval)
        return eval.takeError();
      if (improves(*eval, currentEval)) {
        current = std::move(next);
        currentHints = std::move(nextHints);
        currentEval = std::move(*eval);
        continue;
      }
    }
    // Recount the host bytes of the plan we keep.
    offloadedBytes = 0;
    for (size_t a = 0; a < acts.size(); ++a)
      if (current[a] == Decision::Offload)
        offloadedBytes += acts[a].bytes;
    llvm::Expected<bool> single = trySingles(pos, level);
    if (!single)
      return single.takeError();
    if (!*single)
      return false;
  }
  return currentEval.peakBytes <= level;
}

llvm::Expected<AutoSolution> Solver::solve() {
  AutoSolution solution;
  const int64_t budget = options.budgetBytes;
  current.assign(acts.size(), Decision::Retain);
  currentHints.assign(acts.size(), CopyHint());
  llvm::Expected<Evaluation> base = evaluator.evaluate(current);
  if (!base)
    return base.takeError();
  currentEval = std::move(*base);
  const int64_t baselinePeak = currentEval.peakBytes;

  std::vector<Member> ladder;
  auto record = [&](unsigned level) {
    Member m;
    m.decisions = current;
    m.hints = currentHints;
    m.peak = currentEval.peakBytes;
    m.step = currentEval.stepUs;
    m.level = level;
    ladder.push_back(std::move(m));
  };
  record(0);
  stepBytes = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(solverOptions.levelStep *
                                           static_cast<double>(baselinePeak))));
  // Seeds first: the ladder falls back on them where the greedy is stuck.
  std::vector<Evaluation> seedEvals;
  for (const AutoSeed &seed : seeds) {
    llvm::Expected<Evaluation> eval = evaluator.evaluate(seed.decisions);
    if (!eval)
      return eval.takeError();
    seedEvals.push_back(std::move(*eval));
  }
  // The family's member i is the fastest of ladder plans i to i +
  // kLookBelow (all fit level i): the greedy is path-dependent, and a plan a
  // few levels down is at times faster than the one found at the level. So
  // the ladder is built kLookBelow plans past the first that fits.
  std::optional<size_t> firstFit;
  if (ladder.back().peak <= budget)
    firstFit = 0;
  for (unsigned j = 1; !firstFit || ladder.size() <= *firstFit + kLookBelow;
       ++j) {
    int64_t level = baselinePeak - static_cast<int64_t>(j) * stepBytes;
    if (level < 0)
      break;
    if (currentEval.peakBytes <= level)
      continue; // this level's member is the previous one
    llvm::Expected<bool> reached = reduceTo(level);
    if (!reached)
      return reached.takeError();
    if (!*reached && tying) {
      // The tied greedy is stuck: the ladder goes on untied from here.
      tying = false;
      reached = reduceTo(level);
      if (!reached)
        return reached.takeError();
    }
    if (!*reached) {
      // Stuck: carry on from the seed that fits this level and is fastest
      // once improved at it (the greedy only adds decisions and cannot
      // reshape a plan the way a layer policy does). Judged by its raw
      // step time, a seed far below the level (full) lost to one that
      // improves less, and a few levels down the ladder found the faster
      // plan: a smaller budget was faster.
      State stuck = save();
      std::optional<size_t> pick;
      std::optional<State> picked;
      for (size_t i = 0; i < seeds.size(); ++i) {
        if (seedEvals[i].peakBytes > level ||
            seedEvals[i].hostPeakBytes > options.hostBudgetBytes)
          continue;
        current = seeds[i].decisions;
        currentHints.assign(acts.size(), CopyHint());
        currentEval = seedEvals[i];
        offloadedBytes = 0;
        for (size_t a = 0; a < acts.size(); ++a)
          if (current[a] == Decision::Offload)
            offloadedBytes += acts[a].bytes;
        if (llvm::Error err = improveRestart(level))
          return std::move(err);
        if (!picked || currentEval.stepUs < picked->eval.stepUs) {
          pick = i;
          picked = save();
        }
      }
      if (pick) {
        restore(std::move(*picked));
        if (llvm::Error err = probeBelow(level))
          return std::move(err);
      } else {
        // No seed fits either: keep what is needed only after the peak op
        // off it (late prefetches), where the ladder would otherwise end.
        restore(std::move(stuck));
        llvm::Expected<bool> late =
            solverOptions.latePrefetch ? reduceLate(level) : false;
        if (!late)
          return late.takeError();
        // A chain-reader move paid step time for its lower peak: the plan it
        // started from is a member too (between two levels), and faster.
        if (std::optional<State> from = std::exchange(chainReadersFrom, {});
            from && from->eval.peakBytes < ladder.back().peak) {
          State reached = save();
          restore(std::move(*from));
          if (llvm::Error err = polishFully(currentEval.peakBytes))
            return std::move(err);
          record(j);
          restore(std::move(reached));
        }
        if (!*late) {
          // The greedy got part of the way and nothing goes further: the
          // last member lies between two levels (else the least peak the
          // ladder reaches stays a level above the one it got to).
          if (currentEval.peakBytes < ladder.back().peak) {
            if (llvm::Error err = polishFully(currentEval.peakBytes))
              return std::move(err);
            record(j);
          }
          break;
        }
      }
    }
    // While tied, a level's plan is the greedy's: the searches below act on
    // single activations, and would untie the plan one level at a time.
    if (!tying) {
      llvm::Expected<bool> polished = polish(level);
      if (!polished)
        return polished.takeError();
      if (llvm::Error err = replaceTrades(level))
        return std::move(err);
      if (llvm::Error err = swapCostly(level))
        return std::move(err);
    }
    if (!tying) {
      // The member is the plan with its costliest decisions flipped where
      // that is faster, but never faster than a member above (a larger
      // budget would not see it: AutoMonotoneTest); the ladder goes on
      // from the plan the greedy built, whose path the flips do not change.
      double floor = 0.0;
      for (const Member &m : ladder)
        floor = std::max(floor, m.step);
      State path = save();
      if (llvm::Error err = flipCostly(level, floor))
        return std::move(err);
      record(j);
      restore(std::move(path));
    } else {
      record(j);
    }
    if (!firstFit && ladder.back().peak <= budget) {
      firstFit = ladder.size() - 1;
      // Tied picks free a class at a time and overshoot the level: the
      // ladder goes on untied from the last tied plan above the budget, so
      // that the plan returned is refined at the budget's own levels.
      if (tying && *firstFit > 0) {
        const Member &above = ladder[*firstFit - 1];
        j = above.level;
        current = above.decisions;
        currentHints = above.hints;
        llvm::Expected<Evaluation> eval =
            evaluator.evaluate(current, currentHints);
        if (!eval)
          return eval.takeError();
        currentEval = std::move(*eval);
        offloadedBytes = 0;
        for (size_t a = 0; a < acts.size(); ++a)
          if (current[a] == Decision::Offload)
            offloadedBytes += acts[a].bytes;
        ladder.resize(*firstFit);
        firstFit.reset();
        tying = false;
      }
    }
  }
  solution.levels = static_cast<unsigned>(ladder.size());

  // Seeds.
  struct Scored {
    double key;
    int rank;
    size_t index;
  };
  // A seed that needs more pinned host memory than the host budget (an
  // offloading seed under host_budget=0) is no plan at any device budget:
  // it may neither set the least budget reported nor be returned.
  auto hostFits = [&](const Evaluation &eval) {
    return eval.hostPeakBytes <= options.hostBudgetBytes;
  };
  int64_t least = ladder.back().peak;
  for (const Evaluation &eval : seedEvals)
    if (hostFits(eval))
      least = std::min(least, eval.peakBytes);
  solution.leastPeakBytes = least;

  // The fastest member that fits: the first ladder member that fits (keys
  // only grow along the ladder) against every fitting seed. A member's key
  // is the running maximum of the members' step times, so that the choice
  // is that of a fixed family whatever the budget (docs/Planner.md).
  std::optional<Scored> best;
  auto consider = [&](Scored s) {
    if (!best || s.key < best->key ||
        (s.key == best->key && std::make_pair(s.rank, s.index) <
                                   std::make_pair(best->rank, best->index)))
      best = s;
  };
  double key = 0.0;
  for (size_t i = 0; i < ladder.size(); ++i) {
    size_t fastest = i;
    for (size_t k = i + 1; k < ladder.size() && k <= i + kLookBelow; ++k)
      if (ladder[k].step < ladder[fastest].step)
        fastest = k;
    key = std::max(key, ladder[fastest].step);
    if (ladder[fastest].peak <= budget) {
      consider({key, 0, fastest});
      break;
    }
  }
  for (size_t i = 0; i < seeds.size(); ++i)
    if (seedEvals[i].peakBytes <= budget && hostFits(seedEvals[i]))
      consider({seedEvals[i].stepUs, 1, i});

  if (!best) {
    solution.feasible = false;
    // Report the plan with the least peak.
    size_t bestSeed = seeds.size();
    for (size_t i = 0; i < seeds.size(); ++i)
      if (hostFits(seedEvals[i]) &&
          seedEvals[i].peakBytes < ladder.back().peak &&
          (bestSeed == seeds.size() ||
           seedEvals[i].peakBytes < seedEvals[bestSeed].peakBytes))
        bestSeed = i;
    if (bestSeed < seeds.size()) {
      solution.decisions = seeds[bestSeed].decisions;
      solution.reasons = seeds[bestSeed].reasons;
      solution.evaluation = std::move(seedEvals[bestSeed]);
      solution.chosen = "seed " + seeds[bestSeed].name;
      return solution;
    }
    best = Scored{0.0, 0, ladder.size() - 1};
  } else {
    solution.feasible = true;
  }
  if (best->rank == 1) {
    const AutoSeed &seed = seeds[best->index];
    solution.decisions = seed.decisions;
    solution.reasons.clear();
    for (const std::string &reason : seed.reasons)
      solution.reasons.push_back(reason + " [auto: the " + seed.name +
                                 " plan is the fastest that fits]");
    solution.evaluation = std::move(seedEvals[best->index]);
    solution.chosen = "seed " + seed.name;
    return solution;
  }
  const Member &member = ladder[best->index];
  solution.decisions = member.decisions;
  llvm::Expected<Evaluation> eval =
      evaluator.evaluate(member.decisions, member.hints);
  if (!eval)
    return eval.takeError();
  solution.evaluation = std::move(*eval);
  for (size_t a = 0; a < acts.size(); ++a)
    solution.decisions[a] =
        solution.evaluation.placement->decisions[a].decision;
  solution.chosen = llvm::formatv("ladder level {0}", member.level).str();
  solution.reasons.resize(acts.size());
  for (size_t a = 0; a < acts.size(); ++a)
    solution.reasons[a] = explain(a, solution.decisions, solution.evaluation);
  return solution;
}

llvm::Expected<AutoSolution> lethe::solveAuto(const Evaluator &evaluator,
                                              const PlanOptions &options,
                                              llvm::ArrayRef<AutoSeed> seeds,
                                              const AutoSolverOptions &solver) {
  return Solver(evaluator, options, seeds, solver).solve();
}

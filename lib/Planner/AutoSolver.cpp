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
// holds. When a batch does not help, single candidates are tried exactly.
//
//===----------------------------------------------------------------------===//

#include "lethe/Planner/AutoSolver.h"

#include "CopyModel.h"
#include "PlannerUtils.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

using namespace lethe;
using planner::humanBytes;
using planner::humanUs;

namespace {

/// Range add, range max with the leftmost argmax.
class MaxTree {
public:
  void build(llvm::ArrayRef<int64_t> values) {
    size = std::max<size_t>(1, values.size());
    maxv.assign(4 * size, std::numeric_limits<int64_t>::min());
    lazy.assign(4 * size, 0);
    arg.assign(4 * size, 0);
    if (!values.empty())
      buildNode(1, 0, size - 1, values);
  }
  void add(size_t lo, size_t hi, int64_t delta) {
    if (lo > hi || hi >= size)
      return;
    addNode(1, 0, size - 1, lo, hi, delta);
  }
  int64_t max() const { return maxv[1]; }
  size_t argmax() const { return arg[1]; }
  int64_t maxIn(size_t lo, size_t hi) {
    if (lo > hi || hi >= size)
      return std::numeric_limits<int64_t>::min();
    return queryNode(1, 0, size - 1, lo, hi);
  }

private:
  void pull(size_t node) {
    size_t l = 2 * node, r = 2 * node + 1;
    if (maxv[l] >= maxv[r]) {
      maxv[node] = maxv[l];
      arg[node] = arg[l];
    } else {
      maxv[node] = maxv[r];
      arg[node] = arg[r];
    }
    maxv[node] += lazy[node];
  }
  void buildNode(size_t node, size_t lo, size_t hi,
                 llvm::ArrayRef<int64_t> values) {
    if (lo == hi) {
      maxv[node] = values[lo];
      arg[node] = lo;
      return;
    }
    size_t mid = (lo + hi) / 2;
    buildNode(2 * node, lo, mid, values);
    buildNode(2 * node + 1, mid + 1, hi, values);
    pull(node);
  }
  void addNode(size_t node, size_t lo, size_t hi, size_t ql, size_t qh,
               int64_t delta) {
    if (qh < lo || hi < ql)
      return;
    if (ql <= lo && hi <= qh) {
      maxv[node] += delta;
      lazy[node] += delta;
      return;
    }
    size_t mid = (lo + hi) / 2;
    addNode(2 * node, lo, mid, ql, qh, delta);
    addNode(2 * node + 1, mid + 1, hi, ql, qh, delta);
    pull(node);
  }
  int64_t queryNode(size_t node, size_t lo, size_t hi, size_t ql, size_t qh) {
    if (qh < lo || hi < ql)
      return std::numeric_limits<int64_t>::min();
    if (ql <= lo && hi <= qh)
      return maxv[node];
    size_t mid = (lo + hi) / 2;
    int64_t best = std::max(queryNode(2 * node, lo, mid, ql, qh),
                            queryNode(2 * node + 1, mid + 1, hi, ql, qh));
    return best + lazy[node];
  }

  size_t size = 1;
  std::vector<int64_t> maxv, lazy;
  std::vector<size_t> arg;
};

/// Where things are in the current schedule.
struct Positions {
  std::vector<OpIndex> nodeOp;
  /// First op of the recompute chain run before node i (nodeOp[i] if none).
  std::vector<OpIndex> regionStart;
  /// The node whose region an op belongs to (after-ops of node i belong to
  /// node i + 1).
  std::vector<NodeId> opNode;
  /// Per activation: op that frees its produced buffer (last op if never).
  std::vector<OpIndex> producedFree;
  /// Per retained activation: the node before which it is needed again
  /// after its forward life (its restore point if it were dropped).
  std::vector<NodeId> needNode;
  /// Per offloaded activation: its release and prefetch ops.
  std::vector<OpIndex> releaseOp, prefetchOp;
};

struct Candidate {
  int32_t act = -1;
  Decision decision = Decision::Retain;
  double costUs = 0.0;
  int64_t bytes = 0;
  /// Bytes freed at the op considered (the activation's bytes, less what
  /// other offloads stop freeing there because of this one).
  int64_t benefit = 0;
  /// Tie-break for equal cost per byte: how hard the alternative is
  /// (recompute time per byte for an offload; infinity if it cannot be
  /// recomputed).
  double difficulty = 0.0;
  size_t gapBegin = 0, gapEnd = 0;
  size_t chainPos = 0;
  int64_t chainExtra = 0;
  NodeId restore = -1;
  /// Offload: the copy placement it needs (default: hidden copies).
  CopyHint hint;
  llvm::SmallVector<NodeId, 4> newChainNodes;

  double score() const {
    return costUs / static_cast<double>(std::max<int64_t>(1, benefit));
  }
};

/// Candidate order: least time per freed byte, then recompute before
/// offload (it uses no copy bandwidth), then hardest alternative first, then
/// largest, then lowest id.
bool betterCandidate(const Candidate &x, const Candidate &y) {
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

/// State of one greedy batch: positions are those of the schedule the
/// batch started from.
struct Batch {
  /// Per activation: restore point if dropped (-1: not a candidate).
  std::vector<NodeId> restore;
  /// Per activation: its recompute candidate (act = -1 if none).
  std::vector<Candidate> recompute;
  std::vector<uint8_t> picked;
  /// (restore, activation), sorted.
  std::vector<std::pair<NodeId, int32_t>> byRestore;
  /// Chain nodes added by the batch: (restore << 32) | node.
  llvm::DenseSet<uint64_t> chain;
  /// Per activation: what offloading it would do to the copy queues as they
  /// stand (cleared when the queues change).
  std::vector<std::optional<planner::CopyWhatIf>> whatIf;
  /// The same for the copy-time trade at a peak node (the node, the what-if).
  std::vector<std::optional<std::pair<NodeId, planner::CopyWhatIf>>>
      tradeWhatIf;
  /// The activations that may be dropped, with the ops their produced
  /// buffer is live between, as flat arrays (scanned at every pick).
  std::vector<int32_t> liveAct;
  std::vector<OpIndex> liveBegin, liveEnd;
  /// Scratch of candidatesAt: offload candidates judged in the last call,
  /// and marks of the activations that may be offloaded at its op.
  std::vector<Candidate> offloadScratch;
  std::vector<uint8_t> offloadMark;
};

struct Member {
  std::vector<Decision> decisions;
  std::vector<CopyHint> hints;
  int64_t peak = 0;
  double step = 0.0;
  unsigned level = 0;
};

/// Recomputes tried back as retained after the ladder restarts from a seed
/// (swapCostly); bounded because each try is a greedy run.
constexpr size_t kRestartSwaps = 32;
/// How many levels below probeBelow looks.
constexpr unsigned kProbeLevels = 3;
/// Ladder levels built below the first one that fits the budget.
constexpr unsigned kLookBelow = 3;

class Solver {
public:
  Solver(const Evaluator &evaluator, const PlanOptions &options,
         llvm::ArrayRef<AutoSeed> seeds, const AutoSolverOptions &solver)
      : evaluator(evaluator), analysis(evaluator.getAnalysis()),
        graph(analysis.getGraph()), device(evaluator.getDevice()),
        acts(analysis.getActivations()), options(options), seeds(seeds),
        solverOptions(solver) {
    auto difficulty = [&](int32_t a) {
      return acts[a].recomputable
                 ? acts[a].recomputeUs / static_cast<double>(acts[a].bytes)
                 : std::numeric_limits<double>::infinity();
    };
    for (size_t a = 0; a < acts.size(); ++a)
      if (acts[a].offloadable)
        offloadOrder.push_back(static_cast<int32_t>(a));
    llvm::sort(offloadOrder, [&](int32_t x, int32_t y) {
      double dx = difficulty(x), dy = difficulty(y);
      if (dx != dy)
        return dx > dy;
      if (acts[x].bytes != acts[y].bytes)
        return acts[x].bytes > acts[y].bytes;
      return x < y;
    });
  }

  llvm::Expected<AutoSolution> solve();

private:
  Positions index(const Evaluation &eval) const;
  /// Candidates that free bytes at schedule op `op`. Offloads are judged
  /// with the copy model, at most `offloadLimit` of them, hardest to
  /// recompute first.
  std::vector<const Candidate *>
  candidatesAt(size_t op, const Positions &pos, const Evaluation &eval,
               Batch &batch, const planner::CopyModel &copies,
               size_t offloadLimit);
  /// Recompute candidates of every retained activation, for one batch.
  Batch prepareBatch(const Positions &pos, const Evaluation &eval,
                     llvm::ArrayRef<Decision> decisions) const;
  void computeRecompute(Candidate &c, const Placement &placement,
                        const Batch &batch) const;
  /// Records a picked recompute: its chain nodes are now shared at its
  /// restore point, so the candidates restored there cost less.
  void pickRecompute(Batch &batch, const Candidate &picked,
                     const Placement &placement) const;
  /// Greedy until the peak is <= level. False when stuck.
  llvm::Expected<bool> reduceTo(int64_t level);
  /// Undoes decisions the level no longer needs; true if the step got
  /// faster.
  llvm::Expected<bool> polish(int64_t level);
  /// Polishes until the step stops improving (a plan far from the level,
  /// such as a seed the ladder restarts from, needs several rounds).
  llvm::Error polishFully(int64_t level);
  /// A seed the ladder restarts from recomputes far more than the level
  /// needs, and polishing only undoes what nothing replaces: polish, then
  /// try the costly recomputes against free offloads too, until the step
  /// stops improving.
  llvm::Error improveRestart(int64_t level);
  /// What the ladder's next levels would do, brought back to this one: the
  /// greedy down to each of the kProbeLevels levels below, then polished
  /// at this level (which undoes trades and recomputes the lower picks make
  /// unnecessary); the fastest result that holds the level is kept.
  llvm::Error probeBelow(int64_t level);
  /// Replaces copy-time trades by decisions that hide their copies where
  /// that holds the level and is faster.
  llvm::Error replaceTrades(int64_t level);
  /// Snapshot of the current plan.
  struct State {
    std::vector<Decision> decisions;
    std::vector<CopyHint> hints;
    Evaluation eval;
    int64_t offloaded = 0;
  };
  State save() const {
    return {current, currentHints, currentEval, offloadedBytes};
  }
  void restore(State state) {
    current = std::move(state.decisions);
    currentHints = std::move(state.hints);
    currentEval = std::move(state.eval);
    offloadedBytes = state.offloaded;
  }
  /// Swaps the costliest recomputes for free decisions where that holds the
  /// level (small graphs only: it costs a few evaluations per level).
  llvm::Error swapCostly(int64_t level, size_t tries = 3);
  llvm::Expected<bool> trySingles(const Positions &pos, int64_t level);
  std::string explain(size_t a, llvm::ArrayRef<Decision> decisions,
                      const Evaluation &eval);

  static bool improves(const Evaluation &next, const Evaluation &prev) {
    if (next.peakBytes != prev.peakBytes)
      return next.peakBytes < prev.peakBytes;
    auto atPeak = [](const Evaluation &e) {
      return llvm::count(e.memory.deviceAtOp, e.peakBytes);
    };
    return atPeak(next) < atPeak(prev);
  }

  const Evaluator &evaluator;
  const ActivationAnalysis &analysis;
  const TrainingGraph &graph;
  const DeviceProfile &device;
  llvm::ArrayRef<ActivationInfo> acts;
  const PlanOptions &options;
  llvm::ArrayRef<AutoSeed> seeds;
  AutoSolverOptions solverOptions;

  std::vector<Decision> current;
  /// Copy placements the current offloads need (one per activation).
  std::vector<CopyHint> currentHints;
  Evaluation currentEval;
  /// Activations in the order offload candidates are judged: hardest to
  /// recompute (per byte) first, then largest, then lowest id.
  std::vector<int32_t> offloadOrder;
  int64_t offloadedBytes = 0;
  /// While set, candidatesAt offers only candidates that cost no time.
  bool freeOnly = false;
  /// While set, candidatesAt offers no copy-time trades.
  bool noTrades = false;
  /// Spacing of the ladder's levels in bytes.
  int64_t stepBytes = 1;
};

} // namespace

Positions Solver::index(const Evaluation &eval) const {
  const Schedule &schedule = eval.schedule;
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
      if (s >= 0 && analysis.getStorages()[s].storage == r &&
          r != act.storage)
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
    NodeId restore = pos.needNode[a] >= 0 ? pos.needNode[a]
                                          : act.firstBackwardUse;
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
    computeRecompute(c, eval.placement, batch);
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
Solver::candidatesAt(size_t op, const Positions &pos, const Evaluation &eval,
                     Batch &batch, const planner::CopyModel &copies,
                     size_t offloadLimit) {
  const Placement &placement = eval.placement;
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
    auto releaseIt =
        std::lower_bound(nodeEnd.begin() + act.lastForwardUse,
                         nodeEnd.begin() + restore, d2hEnd - 1e-9);
    NodeId earliestRelease = std::min<NodeId>(
        restore - 1, static_cast<NodeId>(releaseIt - nodeEnd.begin()));
    double latestStart =
        placement.chainStartUs[restore] - copy.h2dUs(act.bytes);
    auto issueIt = std::upper_bound(nodeEnd.begin() + earliestRelease,
                                    nodeEnd.begin() + restore,
                                    latestStart + 1e-9);
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
  // Trading copy time for memory only where nothing else frees `op`.
  if (result.empty() && batch.offloadScratch.empty() && !noTrades) {
    for (int32_t a : cannotHide) {
      if (trades >= tradeLimit)
        break;
      const ActivationInfo &act = acts[a];
      if (peakNode - 1 < act.lastForwardUse || peakNode > restoreOf[a] - 1)
        continue;
      ++trades;
      Candidate c = makeCandidate(a);
      c.hint.releaseBy = peakNode - 1;
      c.hint.prefetchNotBefore = peakNode;
      std::optional<std::pair<NodeId, planner::CopyWhatIf>> &cached =
          batch.tradeWhatIf[a];
      if (!cached || cached->first != peakNode)
        cached.emplace(peakNode, copies.whatIf(a, c.restore, c.hint));
      consider(c, cached->second);
    }
  }
  for (int32_t a : marked)
    offloadable[a] = 0;
  for (const Candidate &c : batch.offloadScratch)
    result.push_back(&c);
  if (freeOnly)
    llvm::erase_if(result, [](const Candidate *c) { return c->costUs > 0.0; });
  return result;
}

llvm::Expected<bool> Solver::trySingles(const Positions &pos, int64_t level) {
  planner::CopyModel copies(analysis, device, currentEval.placement,
                            currentHints);
  Batch batch = prepareBatch(pos, currentEval, current);
  std::vector<const Candidate *> cands = candidatesAt(
      currentEval.memory.peakOp, pos, currentEval, batch, copies, 32);
  llvm::sort(cands, [](const Candidate *x, const Candidate *y) {
    return betterCandidate(*x, *y);
  });
  // The best few of each kind, best first.
  std::vector<const Candidate *> tries;
  unsigned recomputes = 0, offloads = 0;
  for (const Candidate *c : cands) {
    unsigned &count =
        c->decision == Decision::Recompute ? recomputes : offloads;
    if (count < 4) {
      ++count;
      tries.push_back(c);
    }
  }
  for (const Candidate *c : tries) {
    std::vector<Decision> trial = current;
    std::vector<CopyHint> trialHints = currentHints;
    trial[c->act] = c->decision;
    trialHints[c->act] = c->hint;
    llvm::Expected<Evaluation> eval = evaluator.evaluate(trial, trialHints);
    if (!eval)
      return eval.takeError();
    if (improves(*eval, currentEval)) {
      if (c->decision == Decision::Offload)
        offloadedBytes += c->bytes;
      current = std::move(trial);
      currentHints = std::move(trialHints);
      currentEval = std::move(*eval);
      return true;
    }
  }
  (void)level;
  return false;
}

llvm::Expected<bool> Solver::reduceTo(int64_t level) {
  MaxTree tree;
  for (unsigned iter = 0; iter < 64; ++iter) {
    if (currentEval.peakBytes <= level)
      return true;
    Positions pos = index(currentEval);
    tree.build(currentEval.memory.deviceAtOp);
    planner::CopyModel copies(analysis, device, currentEval.placement,
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
      std::vector<const Candidate *> cands =
          candidatesAt(op, pos, currentEval, batch, copies, 16);
      if (cands.empty())
        break;
      // A copy: the candidate lists are rebuilt as picks change them.
      Candidate best = **std::min_element(
          cands.begin(), cands.end(), [](const Candidate *x, const Candidate *y) {
            return betterCandidate(*x, *y);
          });
      batch.picked[best.act] = 1;
      next[best.act] = best.decision;
      nextHints[best.act] = best.hint;
      any = true;
      if (best.decision == Decision::Recompute) {
        tree.add(best.gapBegin, best.gapEnd, -best.bytes);
        if (best.chainExtra > 0)
          tree.add(best.chainPos, best.chainPos, best.chainExtra);
        pickRecompute(batch, best, currentEval.placement);
        continue;
      }
      // Offload: the other copies move too; follow their freed ranges.
      offloadedBytes += best.bytes;
      std::vector<std::pair<size_t, size_t>> before;
      for (const planner::CopyEntry &e : copies.getEntries())
        before.push_back(freedRange(e));
      copies.add(best.act, best.restore, best.hint);
      copies.update();
      for (std::optional<planner::CopyWhatIf> &w : batch.whatIf)
        w.reset();
      for (auto &w : batch.tradeWhatIf)
        w.reset();
      llvm::ArrayRef<planner::CopyEntry> entries = copies.getEntries();
      for (size_t i = 0; i < before.size(); ++i) {
        std::pair<size_t, size_t> now = freedRange(entries[i]);
        if (now == before[i])
          continue;
        if (before[i].first <= before[i].second)
          tree.add(before[i].first, before[i].second, entries[i].bytes);
        if (now.first <= now.second)
          tree.add(now.first, now.second, -entries[i].bytes);
      }
      std::pair<size_t, size_t> mine = freedRange(entries.back());
      if (mine.first <= mine.second)
        tree.add(mine.first, mine.second, -best.bytes);
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

llvm::Expected<bool> Solver::polish(int64_t level) {
  const double before = currentEval.stepUs;
  // Copy-time trades no longer needed: hide the copies again where the
  // level still holds (all at once, else the first half).
  std::vector<int32_t> trades;
  for (size_t a = 0; a < acts.size(); ++a)
    if (current[a] == Decision::Offload && !(currentHints[a] == CopyHint()))
      trades.push_back(static_cast<int32_t>(a));
  for (size_t count = trades.size(), attempt = 0; count > 0 && attempt < 2;
       count /= 2, ++attempt) {
    std::vector<CopyHint> trialHints = currentHints;
    for (size_t i = 0; i < count; ++i)
      trialHints[trades[i]] = CopyHint();
    llvm::Expected<Evaluation> eval = evaluator.evaluate(current, trialHints);
    if (!eval)
      return eval.takeError();
    if (eval->peakBytes <= level && eval->stepUs < currentEval.stepUs) {
      currentHints = std::move(trialHints);
      currentEval = std::move(*eval);
      break;
    }
  }

  // Undo recomputes no longer needed for this level, most exclusive chain
  // time first.
  const Placement &placement = currentEval.placement;
  llvm::DenseMap<uint64_t, int32_t> users;
  for (size_t a = 0; a < acts.size(); ++a) {
    if (current[a] == Decision::Retain)
      continue;
    const ActivationDecision &d = placement.decisions[a];
    for (NodeId node : d.recomputeNodes)
      ++users[(uint64_t(d.firstBackwardUse) << 32) | uint32_t(node)];
  }
  std::vector<std::pair<double, int32_t>> order;
  for (size_t a = 0; a < acts.size(); ++a) {
    if (current[a] != Decision::Recompute)
      continue;
    const ActivationDecision &d = placement.decisions[a];
    double saving = 0.0;
    for (NodeId node : d.recomputeNodes)
      if (users[(uint64_t(d.firstBackwardUse) << 32) | uint32_t(node)] == 1)
        saving += std::max(0.0, graph.getNode(node).timeUs);
    if (saving > 0.0)
      order.push_back({-saving, static_cast<int32_t>(a)});
  }
  if (order.empty())
    return currentEval.stepUs < before;
  llvm::sort(order);
  Positions pos = index(currentEval);
  MaxTree tree;
  tree.build(currentEval.memory.deviceAtOp);
  std::vector<int32_t> reverted;
  for (auto [negSaving, a] : order) {
    const ActivationInfo &act = acts[a];
    size_t begin = pos.nodeOp[act.lastForwardUse] + 1;
    size_t end =
        pos.regionStart[placement.decisions[a].firstBackwardUse] - 1;
    if (begin > end)
      continue;
    if (tree.maxIn(begin, end) + act.bytes <= level) {
      tree.add(begin, end, act.bytes);
      reverted.push_back(a);
    }
  }
  // The memory estimate ignores how restore points move; when the whole
  // batch does not hold, its most valuable half may.
  for (size_t count = reverted.size(), attempt = 0; count > 0 && attempt < 2;
       count /= 2, ++attempt) {
    std::vector<Decision> trial = current;
    for (size_t i = 0; i < count; ++i)
      trial[reverted[i]] = Decision::Retain;
    llvm::Expected<Evaluation> eval = evaluator.evaluate(trial, currentHints);
    if (!eval)
      return eval.takeError();
    if (eval->peakBytes <= level && eval->stepUs <= currentEval.stepUs) {
      current = std::move(trial);
      currentEval = std::move(*eval);
      break;
    }
  }
  return currentEval.stepUs < before;
}

llvm::Error Solver::polishFully(int64_t level) {
  // Each round reverts at most one batch; a few rounds reach a plan the
  // level holds tight (rarely more than three).
  const unsigned maxRounds = 8;
  for (unsigned round = 0; round < maxRounds; ++round) {
    llvm::Expected<bool> improved = polish(level);
    if (!improved)
      return improved.takeError();
    if (!*improved)
      break;
  }
  return llvm::Error::success();
}

llvm::Error Solver::improveRestart(int64_t level) {
  const unsigned maxRounds = 4;
  for (unsigned round = 0; round < maxRounds; ++round) {
    double before = currentEval.stepUs;
    if (llvm::Error err = polishFully(level))
      return err;
    if (llvm::Error err = swapCostly(level, kRestartSwaps))
      return err;
    if (!(currentEval.stepUs < before))
      break;
  }
  return llvm::Error::success();
}

llvm::Error Solver::probeBelow(int64_t level) {
  const State start = save();
  // The descent goes on level by level as the ladder would; each level's
  // plan is polished back at this level on a copy.
  State descent = start;
  std::optional<State> best;
  for (unsigned below = 1; below <= kProbeLevels; ++below) {
    restore(std::move(descent));
    llvm::Expected<bool> reached =
        reduceTo(level - static_cast<int64_t>(below) * stepBytes);
    if (!reached)
      return reached.takeError();
    descent = save();
    if (llvm::Error err = polishFully(level))
      return err;
    if (currentEval.peakBytes <= level &&
        currentEval.stepUs < (best ? best->eval.stepUs : start.eval.stepUs))
      best = save();
    if (!*reached)
      break;
  }
  restore(best ? std::move(*best) : start);
  return llvm::Error::success();
}

llvm::Error Solver::replaceTrades(int64_t level) {
  bool anyTrade = false;
  for (size_t a = 0; a < acts.size() && !anyTrade; ++a)
    anyTrade =
        current[a] == Decision::Offload && !(currentHints[a] == CopyHint());
  if (!anyTrade)
    // Copies the copy model took for hidden and the simulation exposes:
    // the levels below often hide them again.
    return currentEval.exposedCopyUs > 0.0 ? probeBelow(level)
                                           : llvm::Error::success();
  // A trade is taken where nothing else frees its op at the time; picks made
  // later at other ops often free it too, and then hiding its copies again
  // is faster. Without this, the next level's polish finds that plan and a
  // smaller budget gets a faster plan than this one.
  State saved = save();
  for (size_t a = 0; a < acts.size(); ++a)
    if (current[a] == Decision::Offload)
      currentHints[a] = CopyHint();
  llvm::Expected<Evaluation> eval = evaluator.evaluate(current, currentHints);
  if (!eval)
    return eval.takeError();
  currentEval = std::move(*eval);
  noTrades = true;
  llvm::Expected<bool> reached = reduceTo(level);
  noTrades = false;
  if (!reached)
    return reached.takeError();
  if (*reached) {
    if (llvm::Error err = polishFully(level))
      return err;
    if (currentEval.stepUs < saved.eval.stepUs)
      return llvm::Error::success();
  }
  restore(std::move(saved));
  // Else the picks of the levels below may free the trades' ops.
  return probeBelow(level);
}

llvm::Error Solver::swapCostly(int64_t level, size_t tries) {
  const size_t maxActivations = 256;
  if (acts.size() > maxActivations)
    return llvm::Error::success();
  const Placement &placement = currentEval.placement;
  std::vector<std::pair<double, int32_t>> order;
  for (size_t a = 0; a < acts.size(); ++a)
    if (current[a] == Decision::Recompute)
      order.push_back(
          {-placement.chainUs[placement.decisions[a].firstBackwardUse] -
               acts[a].recomputeUs,
           static_cast<int32_t>(a)});
  llvm::sort(order);
  for (size_t i = 0; i < order.size() && i < tries; ++i) {
    int32_t x = order[i].second;
    if (current[x] != Decision::Recompute)
      continue;
    std::vector<Decision> savedDecisions = current;
    std::vector<CopyHint> savedHints = currentHints;
    Evaluation savedEval = currentEval;
    int64_t savedOffloaded = offloadedBytes;
    current[x] = Decision::Retain;
    llvm::Expected<Evaluation> eval = evaluator.evaluate(current, currentHints);
    if (!eval)
      return eval.takeError();
    currentEval = std::move(*eval);
    freeOnly = true;
    llvm::Expected<bool> reached = reduceTo(level);
    freeOnly = false;
    if (!reached)
      return reached.takeError();
    if (*reached && currentEval.stepUs < savedEval.stepUs)
      continue;
    current = std::move(savedDecisions);
    currentHints = std::move(savedHints);
    currentEval = std::move(savedEval);
    offloadedBytes = savedOffloaded;
  }
  return llvm::Error::success();
}

std::string Solver::explain(size_t a, llvm::ArrayRef<Decision> decisions,
                            const Evaluation &eval) {
  const ActivationInfo &act = acts[a];
  const ActivationDecision &d = eval.placement.decisions[a];
  switch (decisions[a]) {
  case Decision::Retain:
    if (!act.recomputable && !act.offloadable)
      return llvm::formatv("retained: cannot be recomputed ({0}) or "
                           "offloaded ({1})",
                           act.notRecomputableReason,
                           act.notOffloadableReason);
    return "retained: the budget holds without dropping it";
  case Decision::Recompute: {
    std::string alternative =
        act.offloadable ? "offload would not hide its copies at the peak"
                        : "cannot be offloaded: " + act.notOffloadableReason;
    size_t n = act.recomputeNodes.size();
    return llvm::formatv("recomputed: frees {0} from node {1} to node {2} "
                         "for {3} of re-run ({4} node{5}); {6}",
                         humanBytes(act.bytes), act.lastForwardUse,
                         d.firstBackwardUse, humanUs(act.recomputeUs), n,
                         n == 1 ? "" : "s", alternative);
  }
  case Decision::Offload: {
    std::string alternative =
        act.recomputable
            ? "recompute would cost " + humanUs(act.recomputeUs)
            : "cannot be recomputed: " + act.notRecomputableReason;
    const PlannedCopyCosts copy = plannedCopyCosts(device);
    double copyUs = copy.d2hUs(act.bytes);
    const Placement &p = eval.placement;
    double h2dUs = copy.h2dUs(act.bytes);
    double late =
        std::max(0.0, p.d2hEndUs[a] - p.nodeEndUs[d.releaseAfter]) +
        std::max(0.0, p.h2dStartUs[a] + h2dUs -
                          p.chainStartUs[d.firstBackwardUse]);
    std::string hidden =
        late > 0.0 ? "about " + humanUs(late) + " of it exposed"
                   : "hidden behind compute";
    return llvm::formatv("offloaded: frees {0} from node {1} to node {2}; "
                         "{3} copy each way, {4}; {5}",
                         humanBytes(act.bytes), d.releaseAfter,
                         d.prefetchAfter, humanUs(copyUs), hidden,
                         alternative);
  }
  }
  return "";
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
    if (!*reached) {
      // Stuck: carry on from the seed that fits this level and is fastest
      // once improved at it (the greedy only adds decisions and cannot
      // reshape a plan the way a layer policy does). Judged by its raw
      // step time, a seed far below the level (full) lost to one that
      // improves less, and a few levels down the ladder found the faster
      // plan: a smaller budget was faster.
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
      if (!pick)
        break;
      restore(std::move(*picked));
      if (llvm::Error err = probeBelow(level))
        return std::move(err);
    }
    llvm::Expected<bool> polished = polish(level);
    if (!polished)
      return polished.takeError();
    if (llvm::Error err = replaceTrades(level))
      return std::move(err);
    if (llvm::Error err = swapCostly(level))
      return std::move(err);
    record(j);
    if (!firstFit && ladder.back().peak <= budget)
      firstFit = ladder.size() - 1;
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
        (s.key == best->key &&
         std::make_pair(s.rank, s.index) < std::make_pair(best->rank, best->index)))
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

//===- AutoSolverLatePrefetch.cpp - Copies kept off the peak op -----------===//
//
// A value needed only after the peak op need not be on the device during it.
// Hidden copies are placed as late as still hides them (Placement.cpp), so a
// prefetch whose copy is long, or which queues behind others, is issued
// before a large op and holds its buffer across it; a retained value live
// across the peak op (a layer-input checkpoint) holds its bytes there; a
// recomputed value's chain, run before the peak op, brings back it and its
// inputs. latePrefetch moves such prefetches to be issued after the peak
// node, and offloads such retained or recomputed values with the same late
// prefetch (Placement keeps a prefetch before the value's restore point),
// paying the copy time the step then waits for. Where the ladder is stuck
// with no seed to fall back on, reduceLate alternates it with the greedy;
// where no such move lowers the peak, it tries keeping off the peak op a
// value a recompute chain before it read early (AutoSolverChainReaders.cpp).
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

using namespace lethe;
using namespace lethe::autosolver;

/// Exact evaluations one call may spend: each is a placement, a schedule and
/// a simulation of the whole step, and the call runs only when the greedy
/// found nothing else to lower the peak with.
constexpr size_t kLatePrefetchTries = 8;
/// Moves reduceLate makes at one level at most (each is followed by the
/// greedy, which usually reaches the level after the first few).
constexpr unsigned kLateRounds = 16;

llvm::Expected<bool> Solver::latePrefetch(const Positions &pos,
                                          const Batch &batch) {
  const size_t peakOp = currentEval.memory.peakOp;
  const NodeId peakNode = pos.opNode[peakOp];
  const Placement &placement = *currentEval.placement;
  std::vector<LateMove> moves;
  // Every move here offloads one value with the hint given.
  auto offload = [&](size_t a, CopyHint hint) {
    LateMove m;
    m.act = static_cast<int32_t>(a);
    m.bytes = acts[a].bytes;
    m.changes.push_back({m.act, Decision::Offload, hint});
    moves.push_back(std::move(m));
  };
  // (3) Recomputed values whose re-run result is live across the peak op
  // (allocated at or before it, freed after it): offloaded instead.
  std::vector<uint8_t> recomputedLive(acts.size(), 0);
  {
    const Schedule &schedule = *currentEval.schedule;
    std::vector<int64_t> allocAt(schedule.buffers.size(), -1);
    for (size_t k = 0; k <= peakOp; ++k)
      for (BufferId b : schedule.ops[k].allocs)
        allocAt[b] = static_cast<int64_t>(k);
    for (size_t k = peakOp + 1; k < schedule.ops.size(); ++k)
      for (BufferId b : schedule.ops[k].frees) {
        const ScheduleBuffer &buf = schedule.buffers[b];
        if (allocAt[b] < 0 || buf.origin != BufferOrigin::Recomputed)
          continue;
        int32_t a = analysis.activationIndex(buf.storage);
        if (a >= 0 && current[a] == Decision::Recompute &&
            acts[a].storage == buf.storage)
          recomputedLive[a] = 1;
      }
  }
  for (size_t a = 0; a < acts.size(); ++a) {
    const ActivationInfo &act = acts[a];
    if (current[a] == Decision::Offload) {
      // (1) Its prefetch is issued before the peak op (its buffer counts
      // from the issue) though nothing reads it before the peak node ends.
      const ActivationDecision &d = placement.decisions[a];
      if (pos.prefetchOp[a] < 0 ||
          static_cast<size_t>(pos.prefetchOp[a]) >= peakOp ||
          d.firstBackwardUse <= peakNode ||
          static_cast<size_t>(pos.regionStart[d.firstBackwardUse]) <= peakOp)
        continue;
      CopyHint hint = currentHints[a];
      hint.prefetchNotBefore = peakNode;
      offload(a, hint);
      continue;
    }
    if (recomputedLive[a] && act.offloadable &&
        offloadedBytes + act.bytes <= options.hostBudgetBytes &&
        act.lastForwardUse < peakNode) {
      CopyHint hint;
      hint.prefetchNotBefore = peakNode;
      offload(a, hint);
      continue;
    }
    // (2) Retained, live across the peak op after its last forward use and
    // needed again only after the peak node: offloaded with the late
    // prefetch, released before the peak node even if the step waits.
    if (current[a] != Decision::Retain || !act.offloadable ||
        batch.restore[a] < 0 ||
        offloadedBytes + act.bytes > options.hostBudgetBytes)
      continue;
    NodeId restore = batch.restore[a];
    if (act.lastForwardUse >= peakNode || restore <= peakNode ||
        static_cast<size_t>(pos.nodeOp[act.lastForwardUse]) >= peakOp ||
        static_cast<size_t>(pos.regionStart[restore]) <= peakOp ||
        static_cast<size_t>(pos.producedFree[a]) < peakOp)
      continue;
    CopyHint hint;
    hint.releaseBy = std::max<NodeId>(act.lastForwardUse, peakNode - 1);
    hint.prefetchNotBefore = peakNode;
    offload(a, hint);
  }
  // The largest first: they free the most at the peak op.
  llvm::sort(moves, [&](const LateMove &x, const LateMove &y) {
    if (x.bytes != y.bytes)
      return x.bytes > y.bytes;
    return x.act < y.act;
  });
  if (moves.size() > kLatePrefetchTries)
    moves.resize(kLatePrefetchTries);
  // Of the moves that lower the peak (or leave fewer ops at it), the one the
  // step waits least for: the price is the exposed copy time, measured.
  std::optional<Evaluation> best;
  std::optional<LateMove> bestMove;
  for (const LateMove &m : moves) {
    std::vector<Decision> trial = current;
    std::vector<CopyHint> trialHints = currentHints;
    for (const LateMove::Change &c : m.changes) {
      trial[c.act] = c.decision;
      trialHints[c.act] = c.hint;
    }
    // Kept only where it improves the memory and is no slower than the best
    // so far.
    llvm::Expected<Evaluation> eval = evaluator.evaluate(
        trial, trialHints,
        {currentEval.peakBytes,
         best ? best->stepUs : std::numeric_limits<double>::infinity()});
    if (!eval)
      return eval.takeError();
    if (!improves(*eval, currentEval))
      continue;
    if (!best || eval->stepUs < best->stepUs ||
        (eval->stepUs == best->stepUs && improves(*eval, *best))) {
      best = std::move(*eval);
      bestMove = m;
    }
  }
  if (!best)
    return false;
  for (const LateMove::Change &c : bestMove->changes) {
    if (current[c.act] != Decision::Offload && c.decision == Decision::Offload)
      offloadedBytes += acts[c.act].bytes;
    current[c.act] = c.decision;
    currentHints[c.act] = c.hint;
  }
  currentEval = std::move(*best);
  return true;
}

llvm::Expected<bool> Solver::reduceLate(int64_t level) {
  for (unsigned round = 0; round < kLateRounds; ++round) {
    if (currentEval.peakBytes <= level)
      return true;
    std::shared_ptr<const Positions> indexed = index(currentEval);
    const Positions &pos = *indexed;
    Batch batch;
    prepareBatch(pos, currentEval, current, batch);
    llvm::Expected<bool> moved = latePrefetch(pos, batch);
    if (!moved)
      return moved.takeError();
    if (!*moved && solverOptions.chainReaders) {
      State from = save();
      moved = chainReadersAhead(pos, level);
      if (!moved)
        return moved.takeError();
      // The first such move of the call: the plan before it is kept as a
      // member of the ladder (solve).
      if (*moved && !chainReadersFrom)
        chainReadersFrom = std::move(from);
    }
    if (!*moved)
      return false;
    // The peak has moved: the greedy may go on from there.
    llvm::Expected<bool> reached = reduceTo(level);
    if (!reached)
      return reached.takeError();
    if (*reached)
      return true;
  }
  return currentEval.peakBytes <= level;
}

//===- AutoSolverChainReaders.cpp - Chain inputs kept off the peak op -----===//
//
// A recompute chain reads its inputs when it runs, so an input the chain
// brings back (a prefetched or recomputed value) is on the device from the
// chain's restore point on, up to its own backward use. Where the chain runs
// at or before the peak node and the input's own backward use comes after
// it, the input holds its bytes across the peak op only because the chain
// read it early. No single decision removes it: offloading the chain's
// value instead of recomputing it keeps the peak as it is (the value is back
// on the device either way, and the input's prefetch, now "as late as still
// hides the copy", is often issued before the peak op still); issuing the
// input's prefetch after the peak node alone is not possible while a chain
// before it reads it. The move here does both at once: the chains' values
// that read the input are offloaded (hidden copies) and the input's
// prefetch is issued after the peak node (CopyHint::prefetchNotBefore; a
// recomputed input is simply re-run at its own restore point, after the
// peak). The offloads' copies then move the others on the D2H queue (a
// hidden release waits for its copy), which can raise the peak elsewhere
// (in the forward): so the move is followed by the greedy down to below
// the old peak, and kept only where that gets there. Where that fails and
// the input is offloaded and recomputable, the move is tried again with the
// input recomputed instead (at its own restore point, after the peak):
// its D2H copy then leaves the queue as the readers' copies join it, so
// the hidden releases in the forward come no later (U-Net: silu_1 offloaded
// and its input, native_group_norm_1's output, recomputed; the late
// prefetch raised the forward by 97 MB). It runs in reduceLate, where the
// ladder is stuck and no late prefetch lowers the peak by itself.
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

using namespace lethe;
using namespace lethe::autosolver;

/// Moves one call tries at most, the largest inputs first: each is an
/// exact evaluation and a greedy run, and the call runs only where the
/// ladder is stuck.
constexpr size_t kChainReaderTries = 4;

std::vector<LateMove> Solver::chainReaderMoves(const Positions &pos) const {
  const size_t peakOp = currentEval.memory.peakOp;
  const NodeId peakNode = pos.opNode[peakOp];
  const Placement &placement = *currentEval.placement;
  const Schedule &schedule = *currentEval.schedule;
  // Values brought back (prefetched or recomputed) whose buffer is live
  // across the peak op: allocated at or before it, freed after it.
  std::vector<uint8_t> restoredLive(acts.size(), 0);
  {
    std::vector<uint8_t> allocated(schedule.buffers.size(), 0);
    for (size_t k = 0; k <= peakOp; ++k)
      for (BufferId b : schedule.ops[k].allocs)
        allocated[b] = 1;
    for (size_t k = peakOp + 1; k < schedule.ops.size(); ++k)
      for (BufferId b : schedule.ops[k].frees) {
        const ScheduleBuffer &buf = schedule.buffers[b];
        if (!allocated[b] || (buf.origin != BufferOrigin::Recomputed &&
                              buf.origin != BufferOrigin::Prefetched))
          continue;
        int32_t a = analysis.activationIndex(buf.storage);
        if (a >= 0 && acts[a].storage == buf.storage)
          restoredLive[a] = 1;
      }
  }
  // Such a value restored at or before the peak node though its own backward
  // use comes after it: a chain run there read it. Its readers: the values
  // restored at or before the peak node whose chain reads it.
  auto heldByChain = [&](size_t x) {
    const ActivationDecision &d = placement.decisions[x];
    return restoredLive[x] && d.decision != Decision::Retain &&
           d.firstBackwardUse <= peakNode &&
           acts[x].firstBackwardUse > peakNode;
  };
  std::vector<llvm::SmallVector<int32_t, 2>> readers(acts.size());
  bool any = false;
  for (size_t r = 0; r < acts.size(); ++r) {
    const ActivationDecision &d = placement.decisions[r];
    if (d.decision == Decision::Retain || d.firstBackwardUse > peakNode)
      continue;
    for (ValueId input : d.decision == Decision::Recompute
                             ? acts[r].recomputeInputs
                             : acts[r].rederiveInputs) {
      int32_t x = analysis.activationIndex(input);
      if (x >= 0 && acts[x].storage == input && heldByChain(x)) {
        readers[x].push_back(static_cast<int32_t>(r));
        any = true;
      }
    }
  }
  std::vector<LateMove> moves;
  if (!any)
    return moves;
  for (size_t x = 0; x < acts.size(); ++x) {
    if (readers[x].empty())
      continue;
    LateMove move;
    move.act = static_cast<int32_t>(x);
    move.bytes = acts[x].bytes;
    int64_t host = offloadedBytes;
    bool possible = true;
    for (int32_t r : readers[x]) {
      // Only a recomputed reader can stop reading it early: an offloaded
      // one re-derives its views from it after its own prefetch.
      if (placement.decisions[r].decision != Decision::Recompute ||
          !acts[r].offloadable ||
          (host += acts[r].bytes) > options.hostBudgetBytes) {
        possible = false;
        break;
      }
      move.changes.push_back({r, Decision::Offload, CopyHint()});
    }
    if (!possible)
      continue;
    if (current[x] == Decision::Offload) {
      CopyHint hint = currentHints[x];
      hint.prefetchNotBefore = peakNode;
      move.changes.push_back(
          {static_cast<int32_t>(x), Decision::Offload, hint});
      move.orRecomputeInput =
          solverOptions.recomputeChainInput && acts[x].recomputable;
    }
    moves.push_back(std::move(move));
  }
  llvm::sort(moves, [](const LateMove &x, const LateMove &y) {
    if (x.bytes != y.bytes)
      return x.bytes > y.bytes;
    return x.act < y.act;
  });
  if (moves.size() > kChainReaderTries)
    moves.resize(kChainReaderTries);
  return moves;
}

llvm::Expected<bool> Solver::chainReadersAhead(const Positions &pos,
                                               int64_t level) {
  const int64_t peak = currentEval.peakBytes;
  // Applies the changes, lets the greedy lower what they raised, and keeps
  // the plan where the peak ends below where it was.
  auto attempt = [&](llvm::ArrayRef<LateMove::Change> changes)
      -> llvm::Expected<bool> {
    State before = save();
    for (const LateMove::Change &c : changes) {
      if (current[c.act] != Decision::Offload &&
          c.decision == Decision::Offload)
        offloadedBytes += acts[c.act].bytes;
      else if (current[c.act] == Decision::Offload &&
               c.decision != Decision::Offload)
        offloadedBytes -= acts[c.act].bytes;
      current[c.act] = c.decision;
      currentHints[c.act] = c.hint;
    }
    // reduceTo goes down from its memory and simulates where it ends.
    llvm::Expected<Evaluation> eval = evaluator.evaluate(
        current, currentHints, EvaluationLimits::memoryOnly());
    if (!eval)
      return eval.takeError();
    currentEval = std::move(*eval);
    llvm::Expected<bool> reached = reduceTo(std::max(level, peak - 1));
    if (!reached)
      return reached.takeError();
    if (currentEval.peakBytes < peak)
      return true;
    restore(std::move(before));
    return false;
  };
  for (const LateMove &m : chainReaderMoves(pos)) {
    llvm::Expected<bool> kept = attempt(m.changes);
    if (!kept || *kept)
      return kept;
    if (!m.orRecomputeInput)
      continue;
    // The input's change is the move's last (chainReaderMoves).
    llvm::SmallVector<LateMove::Change, 4> changes(m.changes.begin(),
                                                   m.changes.end());
    changes.back() = {m.act, Decision::Recompute, CopyHint()};
    kept = attempt(changes);
    if (!kept || *kept)
      return kept;
  }
  return false;
}

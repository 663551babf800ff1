//===- AutoSolverSearch.cpp - Improving a plan at one level ---------------===//
//
// Once the greedy holds a level, these searches look for a faster plan that
// still holds it: undoing decisions the level no longer needs (polish,
// unexposeOffloads), trading costly recomputes and exposed offloads for
// free decisions (swapCostly, AutoSolverSwaps.cpp), descending a few levels
// and polishing back (probeBelow), and hiding traded copies again
// (replaceTrades). Also the greedy's fallback when a batch does not help:
// single candidates tried exactly (trySingles).
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

using namespace lethe;
using namespace lethe::autosolver;

/// Recomputes tried back as retained after the ladder restarts from a seed
/// (swapCostly); bounded because each try is a greedy run.
constexpr size_t kRestartSwaps = 32;
/// A level's plan whose step rose by more than this share over the member
/// above restarts from the seeds (restartWhereSlower). Levels are 1% of the
/// unplanned peak apart and a level's plan usually costs 0-0.5% more than
/// the one above; rises past 2% were where the greedy's picks had become
/// dearer than a polished seed: random graph 9641 rose 5.4% at one level
/// (3,607 -> 3,802 us) where the seed restart five levels down gave 3,649
/// us, which a larger budget, whose ladder stopped above it, did not see.
constexpr double kRestartJump = 0.02;
/// How many levels below probeBelow looks.
constexpr unsigned kProbeLevels = 3;
/// The replacement of copy-time trades (replaceTrades) is skipped at a level
/// where at the level above it was slower than the plan by more than this
/// share (or skipped for it). On BERT's least budget it was tried at 18
/// levels and kept at none: 0.2-0.7% slower, then from the 38th level on
/// 5-17% slower, as more of the step's copies are traded. Skipped after
/// any one not kept, U-Net's, Qwen2's and ViT-B/16's least plans were
/// slower: there the one not kept was 4.9% slower (U-Net) or 0.0%, and the
/// next was kept.
constexpr double kSlowReplacement = 0.08;

llvm::Expected<bool> Solver::polish(int64_t level) {
  // Copy-time trades no longer needed: hide the copies again where the
  // level still holds (all at once, else the first half).
  std::vector<int32_t> trades;
  for (size_t a = 0; a < acts.size(); ++a)
    if (current[a] == Decision::Offload && !(currentHints[a] == CopyHint()))
      trades.push_back(static_cast<int32_t>(a));
  // A plan judged by its memory alone (the ladder's level: reduceTo with
  // ReduceKeeps::memoryOnly) is simulated here unless only the revert of
  // recomputes below reads its step ("lazy"): that revert simulates its
  // trial first and the plan only until it is certain to be slower than
  // the trial, which is then kept (on the 10k-op step 18 of the 54 levels
  // revert, and every one keeps its trial).
  bool exposed = false;
  for (size_t a = 0; a < acts.size() && !exposed; ++a)
    exposed = exposedCopyUs(a) > 0.0;
  if (!trades.empty() || exposed)
    if (llvm::Error err = simulateCurrent())
      return std::move(err);
  const bool lazy = !currentEval.simulated;
  // +infinity where lazy: the return value is then the revert's.
  const double before = currentEval.stepUs;
  bool revertedFaster = false;
  // The plan left is simulated, as the caller expects.
  auto finish = [&]() -> llvm::Expected<bool> {
    if (!lazy)
      return currentEval.stepUs < before;
    if (llvm::Error err = simulateCurrent())
      return std::move(err);
    return revertedFaster;
  };
  for (size_t count = trades.size(), attempt = 0; count > 0 && attempt < 2;
       count /= 2, ++attempt) {
    std::vector<CopyHint> trialHints = currentHints;
    for (size_t i = 0; i < count; ++i)
      trialHints[trades[i]] = CopyHint();
    // Its peak, known without evaluating, is over the level: rejected as
    // its evaluation would reject it (on BERT's least budget 366 of 384
    // such trials were over it).
    if (copyOnlyPeak({}, trialHints) > level) {
      evaluator.countAnswered();
      continue;
    }
    llvm::Expected<std::optional<Evaluation>> eval =
        evaluateTrial(current, trialHints, {level, currentEval.stepUs});
    if (!eval)
      return eval.takeError();
    if (*eval && (*eval)->peakBytes <= level &&
        (*eval)->stepUs < currentEval.stepUs) {
      currentHints = std::move(trialHints);
      currentEval = std::move(**eval);
      break;
    }
  }

  // Offloads whose copies the step waits for, no longer needed for this
  // level (a trade taken before later picks freed its nodes): retained
  // again one at a time, the costliest first.
  if (llvm::Error err = unexposeOffloads(level))
    return std::move(err);

  // Undo recomputes no longer needed for this level, most exclusive chain
  // time first.
  const Placement &placement = *currentEval.placement;
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
    return finish();
  llvm::sort(order);
  std::shared_ptr<const Positions> indexed = index(currentEval);
  const Positions &pos = *indexed;
  MaxTree tree;
  tree.build(currentEval.memory.deviceAtOp);
  std::vector<int32_t> reverted;
  for (auto [negSaving, a] : order) {
    const ActivationInfo &act = acts[a];
    size_t begin = pos.nodeOp[act.lastForwardUse] + 1;
    size_t end = pos.regionStart[placement.decisions[a].firstBackwardUse] - 1;
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
    // Lazy (until the plan is simulated): the trial whole, if it fits.
    // Kept where as fast (or, lazy, where the plan is slower).
    llvm::Expected<std::optional<Evaluation>> evaluated =
        evaluateTrial(trial, currentHints,
                      {level, currentEval.simulated
                                  ? currentEval.stepUs
                                  : std::numeric_limits<double>::infinity()},
                      std::numeric_limits<int64_t>::max(), /*tieKept=*/true);
    if (!evaluated)
      return evaluated.takeError();
    if (!*evaluated || (*evaluated)->peakBytes > level)
      continue;
    std::optional<Evaluation> &eval = *evaluated;
    if (!currentEval.simulated) {
      // Stopped: certainly slower than the trial, which is kept.
      if (llvm::Error err = evaluator.simulateWithin(currentEval, eval->stepUs))
        return std::move(err);
      if (!currentEval.simulated) {
        current = std::move(trial);
        currentEval = std::move(*eval);
        revertedFaster = true;
        break;
      }
    }
    if (eval->stepUs <= currentEval.stepUs) {
      revertedFaster = eval->stepUs < currentEval.stepUs;
      current = std::move(trial);
      currentEval = std::move(*eval);
      break;
    }
  }
  return finish();
}

double Solver::exposedCopyUs(size_t a) const {
  const Placement &p = *currentEval.placement;
  const ActivationDecision &d = p.decisions[a];
  if (current[a] != Decision::Offload || d.releaseAfter < 0 ||
      d.firstBackwardUse < 0)
    return 0.0;
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  return std::max(0.0, p.d2hEndUs[a] - p.nodeEndUs[d.releaseAfter]) +
         std::max(0.0, p.h2dStartUs[a] + copy.h2dUs(acts[a].bytes) -
                           p.chainStartUs[d.firstBackwardUse]);
}

llvm::Error Solver::unexposeOffloads(int64_t level, size_t tries) {
  std::vector<std::pair<double, int32_t>> order;
  for (size_t a = 0; a < acts.size(); ++a)
    if (double late = exposedCopyUs(a); late > 0.0)
      order.push_back({-late, static_cast<int32_t>(a)});
  // The trials are judged against the plan's step (the copies' exposure
  // above is the placement's).
  if (order.empty())
    return llvm::Error::success();
  if (llvm::Error err = simulateCurrent())
    return err;
  llvm::sort(order);
  for (size_t i = 0; i < order.size() && i < tries; ++i) {
    int32_t a = order[i].second;
    std::vector<Decision> trial = current;
    std::vector<CopyHint> trialHints = currentHints;
    trial[a] = Decision::Retain;
    trialHints[a] = CopyHint();
    // A trial proved over the level is rejected as its evaluation would
    // reject it (on BERT's least budget 515 of 723 trials were over it):
    // by its exact peak where it moves copies alone, else by the bound.
    int64_t peak = copyOnlyPeak({a}, trialHints);
    if (peak == std::numeric_limits<int64_t>::min())
      peak = retainedPeakBound(a);
    if (peak > level) {
      evaluator.countAnswered();
      continue;
    }
    llvm::Expected<std::optional<Evaluation>> eval =
        evaluateTrial(trial, trialHints, {level, currentEval.stepUs});
    if (!eval)
      return eval.takeError();
    if (*eval && (*eval)->peakBytes <= level &&
        (*eval)->stepUs < currentEval.stepUs) {
      current = std::move(trial);
      currentHints = std::move(trialHints);
      currentEval = std::move(**eval);
      offloadedBytes -= acts[a].bytes;
    }
  }
  return llvm::Error::success();
}

int64_t Solver::retainedPeakBound(int32_t a) const {
  std::shared_ptr<const Positions> indexed = index(currentEval);
  return lethe::autosolver::retainedPeakBound(
      analysis, currentEval, indexed->nodeOp, indexed->regionStart, a);
}

int64_t lethe::autosolver::retainedPeakBound(
    const ActivationAnalysis &analysis, const Evaluation &eval,
    llvm::ArrayRef<OpIndex> nodeOp, llvm::ArrayRef<OpIndex> regionStart,
    int32_t a) {
  constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  const Placement &placement = *eval.placement;
  const ActivationDecision &d = placement.decisions[a];
  if (d.decision != Decision::Offload || d.releaseAfter < 0 ||
      d.prefetchAfter <= d.releaseAfter)
    return kUnknown;
  // Retaining `a` changes only copies: no restore point (its views'
  // re-run reads no other activation, so it moved none earlier), no chain
  // op but its own views', which must read its storage alone and make no
  // buffer (else removing them could free another buffer sooner). Their
  // time goes from the chain before its restore point, so node times from
  // there on change.
  const int32_t own = analysis.storageIndex(acts[a].storage);
  if (!acts[a].rederiveInputs.empty())
    return kUnknown;
  for (NodeId node : d.recomputeNodes) {
    if (!analysis.resultStorages(node).empty())
      return kUnknown;
    for (int32_t s : analysis.operandStorages(node))
      if (s != own)
        return kUnknown;
  }
  const NodeId restoreA = d.firstBackwardUse;
  auto d2hKey = [&](size_t b) {
    return std::make_pair(acts[b].contentReadyAfter, acts[b].storage);
  };
  // Another offloaded value is on the device up to its last forward use
  // and from its restore point whatever its copies do; its bytes after its
  // last forward use up to its release, and after its prefetch before its
  // restore point, may go once `a`'s copies leave the queues. Not its
  // release where its D2H copy is queued before `a`'s (FIFO: the same
  // start and end) and its release node comes before `a`'s restore point
  // (placed by node ends that `a`'s views do not change). Every other
  // buffer is made and freed by the same nodes and chains.
  const NodeId last = d.prefetchAfter;
  std::vector<int64_t> movable(last + 2, 0);
  auto addRange = [&](NodeId first, NodeId end, int64_t bytes) {
    end = std::min(end, last);
    if (first > end)
      return;
    movable[first] += bytes;
    movable[end + 1] -= bytes;
  };
  for (auto [b, db] : llvm::enumerate(placement.decisions)) {
    if (db.decision != Decision::Offload || b == static_cast<size_t>(a))
      continue;
    if (!(d2hKey(b) < d2hKey(a) && db.releaseAfter < restoreA))
      addRange(acts[b].lastForwardUse + 1, db.releaseAfter, acts[b].bytes);
    addRange(db.prefetchAfter + 1, db.firstBackwardUse - 1, acts[b].bytes);
  }
  // Between its release and its prefetch `a` is off the device now, and on
  // it once retained: at each node's op there and at the recompute ops run
  // before it (the copies issued after the node before come before them),
  // which are the same chains in both plans.
  const std::vector<int64_t> &memory = eval.memory.deviceAtOp;
  int64_t running = 0, best = kUnknown;
  for (NodeId i = 0; i <= last; ++i) {
    running += movable[i];
    if (i <= d.releaseAfter)
      continue;
    int64_t most = memory[nodeOp[i]];
    for (OpIndex k = regionStart[i]; k < nodeOp[i]; ++k)
      most = std::max(most, memory[k]);
    best = std::max(best, most - running);
  }
  return best == kUnknown ? kUnknown : best + acts[a].bytes;
}

int64_t Solver::copyOnlyPeak(llvm::ArrayRef<int32_t> retained,
                             llvm::ArrayRef<CopyHint> hints) const {
  std::shared_ptr<const Positions> indexed = index(currentEval);
  return lethe::autosolver::copyOnlyPeak(analysis, device, currentEval,
                                         indexed->nodeOp, indexed->regionStart,
                                         retained, hints);
}

int64_t lethe::autosolver::copyOnlyPeak(const ActivationAnalysis &analysis,
                                        const DeviceProfile &device,
                                        const Evaluation &eval,
                                        llvm::ArrayRef<OpIndex> nodeOp,
                                        llvm::ArrayRef<OpIndex> regionStart,
                                        llvm::ArrayRef<int32_t> retained,
                                        llvm::ArrayRef<CopyHint> hints) {
  constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  const Placement &placement = *eval.placement;
  // A retained offload must leave every chain and restore point as it is:
  // no view re-derived from it (its time would leave a chain), none read
  // through it, and no checkpoint (whose restore follows the chains).
  for (int32_t a : retained) {
    const ActivationDecision &d = placement.decisions[a];
    if (d.decision != Decision::Offload || !d.recomputeNodes.empty() ||
        !acts[a].rederiveInputs.empty() || acts[a].checkpoint)
      return kUnknown;
  }
  const size_t numActs = acts.size();
  std::vector<NodeId> restore(numActs, -1);
  std::vector<int32_t> offloaded;
  for (auto [b, d] : llvm::enumerate(placement.decisions))
    if (d.decision == Decision::Offload &&
        !llvm::is_contained(retained, static_cast<int32_t>(b))) {
      offloaded.push_back(static_cast<int32_t>(b));
      restore[b] = d.firstBackwardUse;
    }
  std::vector<NodeId> releaseAfter(numActs, -1), prefetchAfter(numActs, -1);
  std::vector<double> d2hEndUs(numActs, 0.0), h2dStartUs(numActs, 0.0);
  placeCopies(analysis, plannedCopyCosts(device), placement.nodeEndUs,
              placement.chainStartUs, restore, hints, offloaded, releaseAfter,
              prefetchAfter, d2hEndUs, h2dStartUs);
  // An offloaded value is off the device at the compute ops of nodes
  // releaseAfter + 1 to prefetchAfter (the chain before a node, then the
  // node: its region): released after the first, prefetched after the
  // second. What the trial holds at a region's ops is what the plan holds
  // there, plus the values off in the plan, less those off in the trial.
  const size_t numNodes = placement.nodeEndUs.size();
  std::vector<int64_t> change(numNodes + 1, 0);
  auto add = [&](NodeId first, NodeId last, int64_t bytes) {
    if (first > last)
      return;
    change[first] += bytes;
    change[last + 1] -= bytes;
  };
  for (auto [b, d] : llvm::enumerate(placement.decisions))
    if (d.decision == Decision::Offload)
      add(d.releaseAfter + 1, d.prefetchAfter, acts[b].bytes);
  for (int32_t b : offloaded)
    add(releaseAfter[b] + 1, prefetchAfter[b], -acts[b].bytes);
  // A copy op holds at most what a compute op next to it holds (a D2H copy
  // or a release what the last one left, a prefetch less than the next
  // one), so the peak is at a compute op.
  const std::vector<int64_t> &memory = eval.memory.deviceAtOp;
  int64_t running = 0, peak = kUnknown;
  for (size_t i = 0; i < numNodes; ++i) {
    running += change[i];
    int64_t most = memory[nodeOp[i]];
    for (OpIndex k = regionStart[i]; k < nodeOp[i]; ++k)
      most = std::max(most, memory[k]);
    peak = std::max(peak, most + running);
  }
  return peak;
}

llvm::Error Solver::searchLevel(int64_t level, LadderMemo *memo) {
  llvm::Expected<bool> polished = polish(level);
  if (!polished)
    return polished.takeError();
  if (llvm::Error err = replaceTrades(level, memo))
    return err;
  return swapCostly(level);
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
  if (llvm::Error err = simulateCurrent())
    return err;
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

llvm::Expected<bool>
Solver::restartFromSeed(int64_t level, llvm::ArrayRef<Evaluation> seedEvals) {
  // Judged by its raw step time, a seed far below the level (full) lost to
  // one that improves less, and a few levels down the ladder found the
  // faster plan: a smaller budget was faster.
  std::optional<State> picked;
  for (size_t i = 0; i < seeds.size(); ++i) {
    if (!fitsLevel(seedEvals[i], level))
      continue;
    current = seeds[i].decisions;
    currentHints.assign(acts.size(), CopyHint());
    currentEval = seedEvals[i];
    recountOffloaded();
    if (llvm::Error err = improveRestart(level))
      return std::move(err);
    if (!picked || currentEval.stepUs < picked->eval.stepUs)
      picked = save();
  }
  if (!picked)
    return false;
  restore(std::move(*picked));
  if (llvm::Error err = probeBelow(level))
    return std::move(err);
  return true;
}

llvm::Error
Solver::restartWhereSlower(int64_t level, double aboveStep,
                           llvm::MutableArrayRef<Evaluation> seedEvals) {
  if (llvm::Error err = simulateCurrent())
    return err;
  // Both tests read only the level, the seeds and the ladder above, so the
  // family stays one whatever the budget. Without them the ladder
  // restarted only where the greedy was stuck, often a few levels below
  // where its plans had become slower than a seed improved at the level: a
  // budget whose ladder ended in between got the slower plan, and a smaller
  // one the restart (random graphs 9108, 9311, 9545: a larger budget up to
  // 4.7 points slower; AutoMonotoneTest). Both only where a seed fits the
  // level: a restart needs one.
  double seedStep = std::numeric_limits<double>::infinity();
  for (Evaluation &eval : seedEvals) {
    if (!fitsLevel(eval, level))
      continue;
    if (llvm::Error err = evaluator.simulate(eval))
      return err;
    seedStep = std::min(seedStep, eval.stepUs);
  }
  if (seedStep == std::numeric_limits<double>::infinity() ||
      (currentEval.stepUs <= seedStep &&
       currentEval.stepUs <= (1 + kRestartJump) * aboveStep))
    return llvm::Error::success();
  State greedy = save();
  llvm::Expected<bool> restarted = restartFromSeed(level, seedEvals);
  if (!restarted)
    return restarted.takeError();
  // What the ladder does after any restart (buildLadder).
  if (llvm::Error err = searchLevel(level))
    return err;
  if (!(currentEval.stepUs < greedy.eval.stepUs))
    restore(std::move(greedy));
  return llvm::Error::success();
}

llvm::Error Solver::probeBelow(int64_t level) {
  if (llvm::Error err = simulateCurrent())
    return err;
  const State start = save();
  // The descent goes on level by level as the ladder would; each level's
  // plan is polished back at this level on a copy.
  State descent = start;
  std::optional<State> best;
  auto compare = [&](const State &polished) {
    if (polished.eval.peakBytes <= level &&
        polished.eval.stepUs < (best ? best->eval.stepUs : start.eval.stepUs))
      best = polished;
  };
  // A descent's polish and the next descent start from the same plan, and
  // the polish keeps no reduction: where they fork, the polish runs beside
  // the next descent, and is compared (in the serial order) after it.
  std::optional<Fork> polishing;
  for (unsigned below = 1; below <= kProbeLevels; ++below) {
    restore(std::move(descent));
    llvm::Expected<bool> reached = reduceTo(
        level - static_cast<int64_t>(below) * stepBytes, /*keep=*/true);
    if (!reached)
      return reached.takeError();
    descent = save();
    if (polishing) {
      llvm::Expected<Solver *> polished = join(*polishing);
      if (!polished)
        return polished.takeError();
      compare((*polished)->save());
      polishing.reset();
    }
    if (forks() && *reached && below < kProbeLevels) {
      polishing.emplace(
          fork([level](Solver &s) { return s.polishFully(level); }));
      continue;
    }
    if (llvm::Error err = polishFully(level))
      return err;
    compare(save());
    if (!*reached)
      break;
  }
  restore(best ? std::move(*best) : start);
  return llvm::Error::success();
}

llvm::Error Solver::replaceTrades(int64_t level, LadderMemo *memo) {
  if (llvm::Error err = simulateCurrent())
    return err;
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
  // smaller budget gets a faster plan than this one. Where it was far slower
  // at the level above, the probe alone (what follows a replacement not
  // kept).
  if (memo && memo->slowReplacementAt > level &&
      memo->slowReplacementAt <= level + stepBytes) {
    memo->slowReplacementAt = level;
    return probeBelow(level);
  }
  State saved = save();
  // The probe the trades' replacement falls back on starts from the plan as
  // it is (and reads no reduction the replacement keeps): it runs beside
  // the replacement, and is discarded where that is kept.
  std::optional<Fork> probe;
  if (forks())
    probe.emplace(fork([level](Solver &s) { return s.probeBelow(level); }));
  for (size_t a = 0; a < acts.size(); ++a)
    if (current[a] == Decision::Offload)
      currentHints[a] = CopyHint();
  // reduceTo goes down from its memory and simulates where it ends.
  llvm::Expected<Evaluation> eval =
      evaluator.evaluate(current, currentHints, EvaluationLimits::memoryOnly());
  if (!eval)
    return eval.takeError();
  currentEval = std::move(*eval);
  noTrades = true;
  llvm::Expected<bool> reached =
      reduceTo(level, /*keep=*/false, {/*onlyReached=*/true});
  noTrades = false;
  if (!reached)
    return reached.takeError();
  if (memo)
    memo->slowReplacementAt = -1;
  if (*reached) {
    if (llvm::Error err = polishFully(level))
      return err;
    if (currentEval.stepUs < saved.eval.stepUs)
      return llvm::Error::success();
    if (memo && currentEval.stepUs > (1 + kSlowReplacement) * saved.eval.stepUs)
      memo->slowReplacementAt = level;
  }
  restore(std::move(saved));
  // Else the picks of the levels below may free the trades' ops.
  if (!probe)
    return probeBelow(level);
  llvm::Expected<Solver *> probed = join(*probe);
  if (!probed)
    return probed.takeError();
  restore((*probed)->save());
  reductions = std::move((*probed)->reductions);
  return llvm::Error::success();
}

llvm::Expected<bool> Solver::trySingles(const Positions &pos, int64_t level,
                                        Batch *prepared,
                                        const planner::CopyModel *model) {
  std::optional<planner::CopyModel> made;
  Batch fresh;
  if (!prepared) {
    made.emplace(analysis, device, *currentEval.placement, currentHints);
    prepareBatch(pos, currentEval, current, fresh);
  }
  const planner::CopyModel &copies = prepared ? *model : *made;
  Batch &batch = prepared ? *prepared : fresh;
  const size_t peakOp = currentEval.memory.peakOp;
  llvm::ArrayRef<int64_t> memory = currentEval.memory.deviceAtOp;
  auto overLevel = [&] {
    size_t first = peakOp, last = peakOp;
    while (first > 0 && memory[first - 1] > level)
      --first;
    while (last + 1 < memory.size() && memory[last + 1] > level)
      ++last;
    return std::make_pair(first, last);
  };
  std::vector<const Candidate *> cands = candidatesAt(
      peakOp, pos, currentEval, batch, copies, 32, overLevel);
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
    // Judged by its memory (inside reduceTo, which simulates where it ends).
    llvm::Expected<State> trial =
        withCandidate(*c, EvaluationLimits::memoryOnly());
    if (!trial)
      return trial.takeError();
    if (improves(trial->eval, currentEval)) {
      restore(std::move(*trial));
      return true;
    }
  }
  // An offload whose copies hide frees only part of its gap; where the peak
  // is in its gap but not in what it frees, release it before the nodes
  // above the level and prefetch it after them (its copies then cost time).
  auto [firstOp, lastOp] = overLevel();
  NodeId first = pos.opNode[firstOp], last = pos.opNode[lastOp];
  NodeId peakNode = pos.opNode[peakOp];
  const size_t maxWidened = 4;
  size_t widened = 0;
  for (int32_t a : offloadOrder) {
    if (current[a] != Decision::Offload || widened >= maxWidened)
      continue;
    const ActivationInfo &act = acts[a];
    const ActivationDecision &d = currentEval.placement->decisions[a];
    if (peakNode - 1 < act.lastForwardUse || peakNode >= d.firstBackwardUse ||
        (d.releaseAfter < peakNode && peakNode <= d.prefetchAfter))
      continue;
    ++widened;
    std::vector<CopyHint> trialHints = currentHints;
    trialHints[a] = widenedHint(a, d, first, last);
    llvm::Expected<Evaluation> eval =
        evaluator.evaluate(current, trialHints, EvaluationLimits::memoryOnly());
    if (!eval)
      return eval.takeError();
    if (improves(*eval, currentEval)) {
      currentHints = std::move(trialHints);
      currentEval = std::move(*eval);
      return true;
    }
  }
  return false;
}

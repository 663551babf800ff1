//===- AutoSolverSwaps.cpp - Costly decisions traded at one level ---------===//
//
// Once a level's plan is polished, its costliest decisions (recomputes by
// their chain time, offloads by the time the step waits for their copies)
// are tried the other way: retained again with the level reached by free
// decisions (swapCostly, part of the ladder's path), or turned into the
// other kind (flipCostly, the level's member only). Small graphs only.
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "llvm/ADT/STLExtras.h"

using namespace lethe;
using namespace lethe::autosolver;

/// swapCostly and flipCostly cost a few evaluations per ladder level: only
/// on graphs with at most this many activations.
constexpr size_t kMaxSwapActivations = 256;
/// A flip the ladder did not keep at one of this many levels above is not
/// tried again (LadderMemo): the plan a level below differs in a few
/// decisions, and the flip fails again. A flip's plan is only the level's
/// member (the ladder goes on from the plan before it), so skipping it
/// changes no later level. On the corpus (least, 40-90%) one level skipped
/// 4.8% of the solves' evaluations and changed no plan; two, 7.0%, and one
/// plan (ConvNeXt-T at 70%, +0.0001 points); four, 8.7%, and three (BERT at
/// 60%, +0.026 points).
constexpr int64_t kFlipMemoLevels = 2;

std::vector<int32_t> Solver::costliestDecisions() const {
  const Placement &placement = *currentEval.placement;
  std::vector<std::pair<double, int32_t>> order;
  for (size_t a = 0; a < acts.size(); ++a) {
    if (current[a] == Decision::Recompute &&
        placement.decisions[a].decision == Decision::Recompute)
      order.push_back(
          {-placement.chainUs[placement.decisions[a].firstBackwardUse] -
               acts[a].recomputeUs,
           static_cast<int32_t>(a)});
    else if (double late = exposedCopyUs(a); late > 0.0)
      order.push_back({-late, static_cast<int32_t>(a)});
  }
  llvm::sort(order);
  std::vector<int32_t> result;
  for (auto [cost, a] : order)
    result.push_back(a);
  return result;
}

llvm::Error Solver::swapCostly(int64_t level, size_t tries) {
  if (llvm::Error err = simulateCurrent())
    return err;
  if (acts.size() > kMaxSwapActivations)
    return llvm::Error::success();
  std::vector<int32_t> order = costliestDecisions();
  for (size_t i = 0; i < order.size() && i < tries; ++i) {
    if (current[order[i]] == Decision::Retain)
      continue;
    // The swaps after this one start from the plan as it is where this one
    // is not kept (most are not), and keep no reduction: up to a thread
    // each, they run beside it, taken in order until one is kept.
    std::vector<std::pair<size_t, Fork>> ahead;
    for (size_t j = i + 1; forks() && j < order.size() && j < tries &&
                           ahead.size() + 1 < workers->getThreads();
         ++j)
      if (current[order[j]] != Decision::Retain)
        ahead.push_back({j, fork([level, x = order[j]](Solver &s) {
                           return s.swapOne(level, x).takeError();
                         })});
    llvm::Expected<bool> kept = swapOne(level, order[i]);
    if (!kept)
      return kept.takeError();
    for (auto &[j, swap] : ahead) {
      if (*kept)
        break;
      llvm::Expected<Solver *> swapped = join(swap);
      if (!swapped)
        return swapped.takeError();
      kept = (*swapped)->current != current ||
             (*swapped)->currentHints != currentHints;
      restore((*swapped)->save());
      i = j;
    }
  }
  return llvm::Error::success();
}

llvm::Expected<bool> Solver::swapOne(int64_t level, int32_t x) {
  // Retained again, the level is reached by decisions that cost nothing
  // (freeOnly); kept only if the step is faster.
  const State saved = save();
  if (current[x] == Decision::Offload)
    offloadedBytes -= acts[x].bytes;
  current[x] = Decision::Retain;
  currentHints[x] = CopyHint();
  // reduceTo goes down from its memory and simulates where it ends.
  llvm::Expected<Evaluation> eval =
      evaluator.evaluate(current, currentHints, EvaluationLimits::memoryOnly());
  if (!eval)
    return eval.takeError();
  currentEval = std::move(*eval);
  freeOnly = true;
  llvm::Expected<bool> reached = reduceTo(
      level, /*keep=*/false, {/*onlyReached=*/true, saved.eval.stepUs});
  freeOnly = false;
  if (!reached)
    return reached.takeError();
  if (*reached && currentEval.stepUs < saved.eval.stepUs)
    return true;
  restore(saved);
  return false;
}

llvm::Error Solver::flipCostly(int64_t level, double floor, LadderMemo *memo,
                               size_t tries) {
  if (llvm::Error err = simulateCurrent())
    return err;
  // Where the greedy freed a node's bytes by the costlier kind (a 3 MiB
  // offload whose copy the step waits for, where re-running its producer
  // costs less; a long chain where the copy would hide), the other kind
  // frees about the same bytes over the same gap: ExactPropertyTest's
  // misses were such single decisions.
  if (acts.size() > kMaxSwapActivations)
    return llvm::Error::success();
  std::vector<int32_t> order = costliestDecisions();
  if (memo && memo->flipFailedAt.size() != acts.size()) {
    memo->flipFailedAt.assign(acts.size(), -1);
    memo->flipFailedTo.assign(acts.size(), Decision::Retain);
  }
  for (size_t i = 0; i < order.size() && i < tries; ++i) {
    int32_t x = order[i];
    const ActivationInfo &act = acts[x];
    bool toOffload = current[x] == Decision::Recompute;
    if (toOffload ? !act.offloadable ||
                        offloadedBytes + act.bytes > options.hostBudgetBytes
                  : !act.recomputable)
      continue;
    const Decision to = toOffload ? Decision::Offload : Decision::Recompute;
    if (memo && memo->flipFailedAt[x] > level &&
        memo->flipFailedAt[x] <= level + kFlipMemoLevels * stepBytes &&
        memo->flipFailedTo[x] == to)
      continue;
    std::vector<Decision> trial = current;
    std::vector<CopyHint> trialHints = currentHints;
    trial[x] = to;
    trialHints[x] = CopyHint();
    llvm::Expected<std::optional<Evaluation>> eval =
        evaluateTrial(trial, trialHints, {level, currentEval.stepUs},
                      options.hostBudgetBytes);
    if (!eval)
      return eval.takeError();
    const bool kept = *eval && fitsLevel(**eval, level) &&
                      (*eval)->stepUs < currentEval.stepUs &&
                      (*eval)->stepUs >= floor;
    if (memo) {
      memo->flipFailedAt[x] = kept ? -1 : level;
      memo->flipFailedTo[x] = to;
    }
    if (kept) {
      offloadedBytes += toOffload ? act.bytes : -act.bytes;
      current = std::move(trial);
      currentHints = std::move(trialHints);
      currentEval = std::move(**eval);
    }
  }
  return llvm::Error::success();
}

//===- AutoSolverBetween.cpp - Plans between and below ladder members ----===//
//
// The ladder's greedy frees memory at the least time per byte, so where
// single decisions are large against a level (1% of the unplanned peak),
// one pick can take the plan several levels down at once, and a budget
// between the two members gets the lower, slower one although a single
// cheaper decision would have fitted it (a 4 KiB recompute instead of a
// 2 MiB one). Between two members more than two levels apart, the plans one
// decision away from the upper member are evaluated, cheapest first; those
// whose peak is below the upper's and no lower than the lower's, and whose
// step is faster than the lower's, are members of the family too. And where
// the ladder ends (the greedy, which only adds decisions, is stuck), a
// dropped activation retained again with a drop at the op it then peaks at
// can still lower the peak: swapBelow (docs/Planner.md, "Between members").
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <optional>
#include <tuple>

using namespace lethe;
using namespace lethe::autosolver;

/// Plans evaluated between two members: each costs one whole-step
/// evaluation, and a gap this wide is rare on graphs whose activations are
/// small against a level (where it costs most).
constexpr size_t kBetweenTries = 24;
/// Where no single change gives one: the dropped activations retained
/// again (costliest first), the changes tried with each, and the
/// evaluations in all.
constexpr size_t kPairRetains = 4;
constexpr size_t kPairChanges = 4;
constexpr size_t kPairTries = 16;

llvm::Expected<std::vector<BetweenPlan>>
Solver::plansBetween(llvm::ArrayRef<Decision> upper,
                     llvm::ArrayRef<CopyHint> upperHints, int64_t lowerPeak,
                     double lowerStep) const {
  std::vector<BetweenPlan> found;
  // Its memory and placement are read, not its step.
  llvm::Expected<Evaluation> from =
      evaluator.evaluate(upper, upperHints, EvaluationLimits::memoryOnly());
  if (!from)
    return from.takeError();
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  int64_t host = 0;
  for (size_t a = 0; a < acts.size(); ++a)
    if (upper[a] == Decision::Offload)
      host += acts[a].bytes;

  // One decision dropped further (a retained value recomputed or offloaded)
  // or turned the other way, by the time it adds to the step as the greedy
  // prices it (a re-run's own time, a hidden copy's contention): the least
  // first, since a gap this wide needs few bytes more than the upper peak.
  struct Change {
    double costUs;
    int32_t act;
    Decision decision;
    /// An offload kept, its prefetch issued after the peak node instead
    /// (latePrefetch's first move): priced at the copy time it may wait.
    bool late = false;
  };
  std::vector<Change> changes;
  for (size_t a = 0; a < acts.size(); ++a) {
    for (Decision d : {Decision::Recompute, Decision::Offload}) {
      if (d == upper[a])
        continue;
      if (d == Decision::Recompute && !acts[a].recomputable)
        continue;
      if (d == Decision::Offload &&
          (!acts[a].offloadable ||
           host + acts[a].bytes > options.hostBudgetBytes))
        continue;
      double cost = d == Decision::Recompute
                        ? acts[a].recomputeUs
                        : contentionPerCopyUs * (copy.d2hUs(acts[a].bytes) +
                                                 copy.h2dUs(acts[a].bytes));
      changes.push_back({cost, static_cast<int32_t>(a), d});
    }
  }
  std::shared_ptr<const Positions> indexed = index(*from);
  const Positions &pos = *indexed;
  const size_t peakOp = from->memory.peakOp;
  const NodeId peakNode = pos.opNode[peakOp];
  for (size_t a = 0; a < acts.size(); ++a) {
    if (upper[a] != Decision::Offload || upperHints[a].prefetchNotBefore >= 0)
      continue;
    const ActivationDecision &d = from->placement->decisions[a];
    if (d.decision != Decision::Offload || pos.prefetchOp[a] < 0 ||
        static_cast<size_t>(pos.prefetchOp[a]) >= peakOp ||
        d.firstBackwardUse <= peakNode ||
        static_cast<size_t>(pos.regionStart[d.firstBackwardUse]) <= peakOp)
      continue;
    changes.push_back({copy.h2dUs(acts[a].bytes), static_cast<int32_t>(a),
                       Decision::Offload, true});
  }
  llvm::sort(changes, [](const Change &x, const Change &y) {
    if (x.costUs != y.costUs)
      return x.costUs < y.costUs;
    return std::make_tuple(x.act, int(x.decision), x.late) <
           std::make_tuple(y.act, int(y.decision), y.late);
  });

  // The other offloads' copies where the upper plan placed them: a new
  // offload's copies queue beside theirs (FIFO), so by default their
  // releases come later and their prefetches earlier, which can hold the
  // very op the new offload frees.
  std::vector<CopyHint> frozen(upperHints.begin(), upperHints.end());
  bool anyFrozen = false;
  for (size_t a = 0; a < acts.size(); ++a) {
    if (upper[a] != Decision::Offload)
      continue;
    const ActivationDecision &placed = from->placement->decisions[a];
    if (frozen[a].releaseBy < 0)
      frozen[a].releaseBy = placed.releaseAfter;
    if (frozen[a].prefetchNotBefore < 0)
      frozen[a].prefetchNotBefore = placed.prefetchAfter;
    anyFrozen |= !(frozen[a] == upperHints[a]);
  }

  // Keeps a trial that lies between the two: under the upper's peak, at
  // or over the lower's, faster than the lower and within the host budget.
  auto keepIfBetween =
      [&](const std::vector<Decision> &trial,
          std::vector<CopyHint> &hints) -> llvm::Expected<bool> {
    llvm::Expected<Evaluation> eval =
        evaluator.evaluate(trial, hints, {from->peakBytes - 1, lowerStep});
    if (!eval)
      return eval.takeError();
    if (!(eval->peakBytes < from->peakBytes && eval->peakBytes >= lowerPeak &&
          eval->stepUs < lowerStep &&
          eval->hostPeakBytes <= options.hostBudgetBytes))
      return false;
    found.push_back({trial, std::move(hints), eval->peakBytes, eval->stepUs});
    return true;
  };
  size_t tries = 0;
  for (const Change &change : changes) {
    if (tries >= kBetweenTries)
      break;
    std::vector<Decision> trial(upper.begin(), upper.end());
    trial[change.act] = change.decision;
    const bool offloads = change.decision == Decision::Offload && !change.late;
    for (bool freeze : {false, true}) {
      if (freeze && !(offloads && anyFrozen))
        continue;
      if (tries++ >= kBetweenTries)
        break;
      std::vector<CopyHint> hints =
          freeze ? frozen
                 : std::vector<CopyHint>(upperHints.begin(), upperHints.end());
      hints[change.act] = CopyHint();
      if (change.late)
        hints[change.act].prefetchNotBefore = peakNode;
      llvm::Expected<bool> kept = keepIfBetween(trial, hints);
      if (!kept)
        return kept.takeError();
      if (*kept)
        break;
    }
  }
  if (!found.empty())
    return found;

  // Two changes at once: a dropped activation retained again (the step
  // saves its re-run or its waited copy, the peak rises) with one of the
  // changes above, which may bring the peak back under the upper's where
  // that one alone could not pay for itself.
  std::vector<std::pair<double, int32_t>> dropped;
  for (size_t a = 0; a < acts.size(); ++a)
    if (upper[a] != Decision::Retain)
      dropped.push_back(
          {-(upper[a] == Decision::Recompute
                 ? acts[a].recomputeUs
                 : contentionPerCopyUs *
                       (copy.d2hUs(acts[a].bytes) + copy.h2dUs(acts[a].bytes))),
           static_cast<int32_t>(a)});
  llvm::sort(dropped);
  if (dropped.size() > kPairRetains)
    dropped.resize(kPairRetains);
  size_t pairTries = 0;
  for (auto [negCost, r] : dropped) {
    size_t withThis = 0;
    for (const Change &change : changes) {
      if (change.act == r || change.late)
        continue;
      if (withThis++ >= kPairChanges || pairTries++ >= kPairTries)
        break;
      std::vector<Decision> trial(upper.begin(), upper.end());
      trial[r] = Decision::Retain;
      trial[change.act] = change.decision;
      // A new offload also with its prefetch after the upper's peak node:
      // fetched before it, it would be held across that node.
      for (bool late : {false, true}) {
        if (late && change.decision != Decision::Offload)
          continue;
        std::vector<CopyHint> hints(upperHints.begin(), upperHints.end());
        hints[r] = CopyHint();
        hints[change.act] = CopyHint();
        if (late)
          hints[change.act].prefetchNotBefore = peakNode;
        llvm::Expected<bool> kept = keepIfBetween(trial, hints);
        if (!kept)
          return kept.takeError();
        if (*kept)
          return found;
      }
    }
  }
  return found;
}

/// Evaluations one swap below the ladder's end may make.
constexpr size_t kSwapBelowTries = 32;
/// Dropped activations tried back as retained, and drops tried with each.
constexpr size_t kSwapBelowRetains = 8;
constexpr size_t kSwapBelowDrops = 4;

llvm::Expected<bool> Solver::swapBelow(int64_t below) {
  const State start = save();
  // The dropped activations whose decision costs the step most first:
  // retained again, they save the most (a recompute its re-run, an offload
  // the copy time the step waits for). Where the peak op holds a chain's
  // result or a prefetched buffer, retaining it is what frees that op.
  std::vector<std::pair<double, int32_t>> dropped;
  for (size_t a = 0; a < acts.size(); ++a) {
    if (current[a] == Decision::Retain)
      continue;
    double cost = current[a] == Decision::Recompute ? acts[a].recomputeUs
                                                    : exposedCopyUs(a);
    dropped.push_back({-cost, static_cast<int32_t>(a)});
  }
  llvm::sort(dropped);
  if (dropped.size() > kSwapBelowRetains)
    dropped.resize(kSwapBelowRetains);

  std::optional<State> best;
  auto consider = [&](State s) {
    if (s.eval.peakBytes >= below ||
        s.eval.hostPeakBytes > options.hostBudgetBytes ||
        s.offloaded > options.hostBudgetBytes)
      return;
    if (best && std::make_pair(s.eval.peakBytes, s.eval.stepUs) >=
                    std::make_pair(best->eval.peakBytes, best->eval.stepUs))
      return;
    best = std::move(s);
  };
  size_t tries = 0;
  for (auto [negCost, d] : dropped) {
    if (tries >= kSwapBelowTries)
      break;
    restore(start);
    if (current[d] == Decision::Offload)
      offloadedBytes -= acts[d].bytes;
    current[d] = Decision::Retain;
    currentHints[d] = CopyHint();
    ++tries;
    // Simulated only where it is considered: else only its memory is read.
    llvm::Expected<Evaluation> retained =
        evaluator.evaluate(current, currentHints, {below - 1});
    if (!retained)
      return retained.takeError();
    currentEval = std::move(*retained);
    if (currentEval.peakBytes < below) {
      consider(save());
      continue;
    }
    // Else with the drop that frees the op it now peaks at, as the greedy
    // prices them there.
    std::shared_ptr<const Positions> indexed = index(currentEval);
    const Positions &pos = *indexed;
    planner::CopyModel copies(analysis, device, *currentEval.placement,
                              currentHints);
    Batch batch;
    prepareBatch(pos, currentEval, current, batch);
    const size_t peakOp = currentEval.memory.peakOp;
    llvm::ArrayRef<int64_t> memory = currentEval.memory.deviceAtOp;
    const int64_t peak = currentEval.peakBytes;
    auto atPeak = [&] {
      size_t first = peakOp, last = peakOp;
      while (first > 0 && memory[first - 1] >= peak)
        --first;
      while (last + 1 < memory.size() && memory[last + 1] >= peak)
        ++last;
      return std::make_pair(first, last);
    };
    std::vector<const Candidate *> cands =
        candidatesAt(peakOp, pos, currentEval, batch, copies, 32, atPeak);
    llvm::sort(cands, [](const Candidate *x, const Candidate *y) {
      return betterCandidate(*x, *y);
    });
    size_t drops = 0;
    for (const Candidate *c : cands) {
      if (c->act == d)
        continue;
      if (drops++ >= kSwapBelowDrops || tries >= kSwapBelowTries)
        break;
      ++tries;
      llvm::Expected<State> trial = withCandidate(*c, {below - 1});
      if (!trial)
        return trial.takeError();
      // A new offload still over: its prefetch one node later than the
      // placement put it (as late as still hides the copy, which can be
      // just before an op it then stays resident across).
      const bool retry = c->decision == Decision::Offload &&
                         trial->eval.peakBytes >= below &&
                         tries < kSwapBelowTries;
      NodeId prefetch =
          retry ? trial->eval.placement->decisions[c->act].prefetchAfter : -1;
      std::vector<Decision> decisions = trial->decisions;
      std::vector<CopyHint> hints = trial->hints;
      const int64_t offloaded = trial->offloaded;
      consider(std::move(*trial));
      if (prefetch < 0 || prefetch + 1 >= static_cast<NodeId>(graph.numNodes()))
        continue;
      ++tries;
      hints[c->act].prefetchNotBefore = prefetch + 1;
      llvm::Expected<Evaluation> later =
          evaluator.evaluate(decisions, hints, {below - 1});
      if (!later)
        return later.takeError();
      consider(State{std::move(decisions), std::move(hints), std::move(*later),
                     offloaded});
    }
  }
  restore(best ? std::move(*best) : start);
  return best.has_value();
}

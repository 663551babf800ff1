//===- AutoSolverQuietCopies.cpp - Copies where they cost the step least --===//
//
// Placement issues each prefetch as late as still hides its copy, so the
// H2D copies run beside whatever kernels come just before their readers. A
// moving copy slows the kernels beside it by their own loss (the
// simulator's kernelSlowdown: a matrix product by the profile's factor, a
// memory-bound kernel only where its traffic is near its whole time, a view
// not at all), and the backward of a transformer alternates matrix
// products with runs of element-wise kernels that lose nothing. Here the
// returned plan's prefetches are issued earlier where that moves their
// copies beside kernels that lose less (CopyHint::prefetchBy), the copies
// kept in their order and before their deadlines: placed one at a time and
// together (a dynamic program over the H2D queue), the faster kept. Placement
// also releases each offload once its copy is predicted done, and each release
// waits for its own copy (`wait_us`); released after an offload copied after
// it, an offload's release is covered by that one's wait (CopyHint::
// releaseNotBefore). Both hold buffers on the device longer, only where the
// plan's peak holds with room (docs/Planner.md, *quiet copies*).
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

using namespace lethe;
using namespace lethe::autosolver;

/// A prefetch is issued at most this many of its copy times before its
/// latest start: further back it holds its buffer longer and pushes the
/// copies before it back too, for windows that differ little.
constexpr double kLookBackCopies = 4.0;
/// Node ends tried per prefetch at most (graphs of many short nodes).
constexpr size_t kMaxIssuePoints = 256;
/// A prefetch moves only where its copy's loss falls by more than this
/// (microseconds): the compute-stream times are a prediction.
constexpr double kMinGainUs = 0.5;
/// The memory a moved copy holds longer may fill a node only to this many
/// ladder levels under the plan's peak: the packer fits a plan with more
/// ops near its peak less often (Mamba at 60%: with the prefetches moved up
/// to the peak, or to a level under it, the arena did not fit and `lethe
/// plan` planned again at a lower budget, 0.98 -> 1.36% and 1.67%; 3 levels
/// gave 0.97%, 8 0.94%, and no corpus cell slower).
constexpr int64_t kPackingSlackLevels = 8;
/// Walks made at most: where a copy a move pushed back no longer fits, the
/// move is not made again and the walk starts over.
constexpr unsigned kPeakRounds = 16;

/// Tries of each placement of the moved prefetches: all of them, then,
/// where they go under refine's floor, the moves of most estimated gain
/// that it allows, scaled again by what the last try gained. A third try
/// since 2026-11-28: the second often still goes under a floor that leaves
/// little room (with two, DiT-B/2 at 40% 9.47 -> 9.50% against main, with
/// three 9.46%; Swin-T at 70% 2.28 -> 2.21%, ViT-B/16 at 70% 4.12%).
constexpr unsigned kPlacementTries = 3;
/// Evaluations of the quiet copies: one for the merged releases and
/// kPlacementTries for each placement of the moved prefetches. Their own:
/// refine's contention pass before them mostly spends what it has (23 of
/// the corpus's 96 cells moved, not 42).
constexpr unsigned kQuietEvaluations = 1 + 2 * kPlacementTries;

llvm::Expected<unsigned> Solver::quietCopies(int64_t cap, FloorAt floorAt,
                                             unsigned &evaluations) {
  const unsigned end = evaluations + kQuietEvaluations;
  auto spend = [&] { return evaluations < end && ++evaluations; };
  llvm::Expected<bool> merged = mergeReleases(cap, floorAt, spend);
  if (!merged)
    return merged.takeError();
  llvm::Expected<bool> quiet = quietPrefetches(cap, floorAt, spend);
  if (!quiet)
    return quiet.takeError();
  return static_cast<unsigned>(*merged) + static_cast<unsigned>(*quiet);
}

std::vector<int64_t> Solver::regionMemory(const Evaluation &eval) const {
  std::shared_ptr<const Positions> indexed = index(eval);
  const Positions &pos = *indexed;
  const std::vector<int64_t> &memory = eval.memory.deviceAtOp;
  std::vector<int64_t> most(pos.nodeOp.size());
  for (size_t n = 0; n < most.size(); ++n) {
    most[n] = memory[pos.nodeOp[n]];
    for (OpIndex k = pos.regionStart[n]; k < pos.nodeOp[n]; ++k)
      most[n] = std::max(most[n], memory[k]);
  }
  return most;
}

std::vector<CopyHint> Solver::mergedReleaseHints(int64_t cap) const {
  const int64_t roomTo = cap - kPackingSlackLevels * stepBytes;
  const Placement &p = *currentEval.placement;
  const std::vector<int64_t> nodeMemory = regionMemory(currentEval);
  std::vector<int32_t> offloaded;
  for (auto [a, d] : llvm::enumerate(p.decisions))
    if (d.decision == Decision::Offload)
      offloaded.push_back(static_cast<int32_t>(a));
  // The D2H stream's order (placeCopies'), walked from its last copy.
  llvm::sort(offloaded, [&](int32_t x, int32_t y) {
    return std::make_pair(acts[x].contentReadyAfter, acts[x].storage) >
           std::make_pair(acts[y].contentReadyAfter, acts[y].storage);
  });
  std::vector<CopyHint> hints = currentHints;
  std::vector<int64_t> added(nodeMemory.size(), 0);
  bool anyMoved = false;
  // The first release (node, activation: the schedule's order) of the
  // copies after the one looked at: its wait covers every copy before it.
  std::pair<NodeId, int32_t> anchor = {-1, -1};
  for (int32_t a : offloaded) {
    const ActivationDecision &d = p.decisions[a];
    const std::pair<NodeId, int32_t> own = {d.releaseAfter, a};
    // Released after the anchor already: its wait is covered.
    if (anchor.first >= 0 && anchor < own)
      continue;
    // A trade's release stays where its hint puts it.
    if (anchor.first >= 0 && currentHints[a].releaseBy < 0) {
      // Right after the anchor's release: at its node where the schedule
      // orders this release after it.
      const NodeId target = anchor.first + (a < anchor.second ? 1 : 0);
      bool fits = target < d.firstBackwardUse;
      for (NodeId k = d.releaseAfter + 1; fits && k <= target; ++k)
        fits = nodeMemory[k] + added[k] + acts[a].bytes <= roomTo;
      if (fits) {
        for (NodeId k = d.releaseAfter + 1; k <= target; ++k)
          added[k] += acts[a].bytes;
        hints[a].releaseNotBefore = target;
        anyMoved = true;
        continue;
      }
    }
    anchor = own;
  }
  if (!anyMoved || copyOnlyPeak({}, hints) > cap)
    return {};
  return hints;
}

llvm::Expected<bool> Solver::mergeReleases(int64_t cap, FloorAt floorAt,
                                           llvm::function_ref<bool()> spend) {
  std::vector<CopyHint> hints = mergedReleaseHints(cap);
  if (hints.empty() || !spend())
    return false;
  llvm::Expected<std::optional<Evaluation>> evaluated = evaluateTrial(
      current, hints, {cap, currentEval.stepUs}, options.hostBudgetBytes);
  if (!evaluated)
    return evaluated.takeError();
  if (!*evaluated || (*evaluated)->peakBytes > cap ||
      !((*evaluated)->stepUs < currentEval.stepUs))
    return false;
  llvm::Expected<double> floor = floorAt((*evaluated)->stepUs);
  if (!floor)
    return floor.takeError();
  if ((*evaluated)->stepUs < *floor)
    return false;
  currentHints = std::move(hints);
  currentEval = std::move(**evaluated);
  return true;
}

namespace {
/// One hidden prefetch as the joint placement sees it.
struct QueuedCopy {
  double deadlineUs;  ///< Its reader's chain start: the copy ends by then.
  double us;          ///< Its H2D copy's time.
  double readyUs;     ///< Its D2H copy's end: it cannot start before.
  NodeId lo, hi;      ///< Issued after a node in [lo, hi].
  NodeId pinned;      ///< A trade's issue (CopyHint::prefetchNotBefore), -1.
  NodeId earliestFit; ///< Issued after earliestFit - 1 at the earliest: its
                      ///< buffer alone fits back on the device from there.
  bool movable;
};

/// Where one copy goes: issued after `issue`; `moved` where placed there by
/// CopyHint::prefetchBy (else Placement's as-late-as-hidden rule puts it
/// there), with the loss it saves against that rule (`gainUs`).
struct PlacedCopy {
  NodeId issue = -1;
  bool moved = false;
  double gainUs = 0.0;
};

/// A partial placement of the copies walked so far (latest deadline first):
/// the earliest of them starts at `startUs`, the copies before it on the
/// H2D queue end by then; `lossUs` summed over them.
struct QueueState {
  double startUs, lossUs;
  int32_t parent;
  NodeId issue;
  bool moved;
};
} // namespace

/// States kept per copy at most, a bound on the joint placement's time
/// (each state costs a loss look-up per copy): the frontier below is the
/// trade-off between the room left to the copies before and the loss so
/// far, thinned evenly beyond this. The largest on 12 corpus cells at
/// 40-70% was 160 (Qwen2 at 60%, 66 copies).
constexpr size_t kMaxStates = 1024;

/// The placement of `copies` (latest deadline first, as the H2D queue runs
/// them backwards) of least summed loss (`lossBetween`, each move charged
/// kMinGainUs), each in its window of issue points or where Placement puts
/// it, one after the other on the queue: a dynamic program over the copies
/// whose state is the queue's earliest start so far, keeping the states
/// that no other beats in both start and loss. Memory: each copy's buffer
/// alone fits (the copies together are checked after). Empty when none
/// fits.
static std::vector<PlacedCopy>
placeJointly(llvm::ArrayRef<QueuedCopy> copies,
             llvm::ArrayRef<double> nodeEndUs,
             llvm::function_ref<double(double, double)> lossBetween) {
  std::vector<QueueState> states{
      {std::numeric_limits<double>::infinity(), 0.0, -1, -1, false}};
  std::vector<int32_t> frontier{0}, next;
  for (const QueuedCopy &c : copies) {
    next.clear();
    // Where Placement puts it behind each state: as late as the queue and
    // its deadline allow.
    for (int32_t f : frontier) {
      const double end = std::min(c.deadlineUs, states[f].startUs);
      const double start = end - c.us;
      NodeId issue = lastNodeEndingBy(nodeEndUs, start, c.lo, c.hi);
      if (c.pinned >= 0)
        issue = std::min(c.hi, std::max(issue, c.pinned));
      if (issue + 1 < c.earliestFit)
        continue;
      states.push_back({std::max(start, nodeEndUs[issue]),
                        states[f].lossUs + lossBetween(start, end), f, issue,
                        false});
      next.push_back(static_cast<int32_t>(states.size() - 1));
    }
    if (c.movable && !frontier.empty()) {
      // Issue points back from the latest its deadline allows, each behind
      // the state of least loss that still leaves it room (the frontier is
      // sorted by start, latest first, its losses falling).
      const double earliest =
          std::min(c.deadlineUs, states[frontier.front()].startUs) -
          (1.0 + kLookBackCopies) * c.us;
      const NodeId latest = lastNodeEndingBy(
          nodeEndUs,
          std::min(c.deadlineUs, states[frontier.front()].startUs) - c.us, c.lo,
          c.hi);
      for (NodeId m = latest; m >= c.lo && m + 1 >= c.earliestFit &&
                              latest - m < NodeId(kMaxIssuePoints);
           --m) {
        const double s = std::max(nodeEndUs[m], c.readyUs);
        if (s < earliest)
          break;
        if (s + c.us > c.deadlineUs)
          continue;
        auto it = std::partition_point(
            frontier.begin(), frontier.end(),
            [&](int32_t f) { return states[f].startUs >= s + c.us; });
        if (it == frontier.begin())
          continue;
        const int32_t f = *(it - 1);
        states.push_back(
            {s, states[f].lossUs + lossBetween(s, s + c.us) + kMinGainUs, f, m,
             true});
        next.push_back(static_cast<int32_t>(states.size() - 1));
      }
    }
    // The states no other beats in both start and loss.
    llvm::sort(next, [&](int32_t x, int32_t y) {
      return std::make_pair(-states[x].startUs, states[x].lossUs) <
             std::make_pair(-states[y].startUs, states[y].lossUs);
    });
    frontier.clear();
    for (int32_t x : next)
      if (frontier.empty() || states[x].lossUs < states[frontier.back()].lossUs)
        frontier.push_back(x);
    if (frontier.empty())
      return {};
    if (frontier.size() > kMaxStates) {
      // Evenly thinned, the least loss (the last) kept.
      std::vector<int32_t> kept;
      for (size_t i = 0; i < kMaxStates; ++i)
        kept.push_back(frontier[(i + 1) * frontier.size() / kMaxStates - 1]);
      frontier = std::move(kept);
    }
  }
  std::vector<PlacedCopy> placed(copies.size());
  int32_t s = frontier.back();
  for (size_t k = copies.size(); k-- > 0; s = states[s].parent) {
    const QueueState &state = states[s];
    placed[k].issue = state.issue;
    placed[k].moved = state.moved;
    if (state.moved) {
      const double end =
          std::min(copies[k].deadlineUs, states[state.parent].startUs);
      placed[k].gainUs =
          lossBetween(end - copies[k].us, end) -
          lossBetween(state.startUs, state.startUs + copies[k].us);
    }
  }
  return placed;
}

std::vector<CopyHint>
Solver::quietPrefetchHints(int64_t cap, llvm::ArrayRef<uint8_t> allowed,
                           std::vector<double> &gainUs, bool joint) const {
  const Evaluation &eval = currentEval;
  const Placement &p = *eval.placement;
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  const size_t numNodes = p.nodeEndUs.size();
  const std::vector<int64_t> nodeMemory = regionMemory(eval);
  const int64_t roomTo = cap - kPackingSlackLevels * stepBytes;
  std::vector<int32_t> offloaded;
  for (auto [a, d] : llvm::enumerate(p.decisions))
    if (d.decision == Decision::Offload)
      offloaded.push_back(static_cast<int32_t>(a));
  // placeCopies' walk: the latest deadline first.
  llvm::sort(offloaded, [&](int32_t x, int32_t y) {
    const NodeId rx = p.decisions[x].firstBackwardUse,
                 ry = p.decisions[y].firstBackwardUse;
    return std::make_pair(rx, acts[x].storage) >
           std::make_pair(ry, acts[y].storage);
  });

  std::vector<CopyHint> hints = currentHints;
  // Moves not made again: a copy they pushed back did not fit.
  std::vector<uint8_t> banned(acts.size(), 0);
  for (auto [a, ok] : llvm::enumerate(allowed))
    banned[a] = !ok;
  if (joint) {
    std::vector<QueuedCopy> copies;
    for (int32_t a : offloaded) {
      const ActivationDecision &d = p.decisions[a];
      NodeId fit = d.prefetchAfter + 1;
      while (fit - 1 > d.releaseAfter &&
             nodeMemory[fit - 1] + acts[a].bytes <= roomTo)
        --fit;
      copies.push_back({p.chainStartUs[d.firstBackwardUse],
                        copy.h2dUs(acts[a].bytes), p.d2hEndUs[a],
                        d.releaseAfter, d.firstBackwardUse - 1,
                        currentHints[a].prefetchNotBefore, fit, false});
    }
    auto lossBetween = [&](double from, double to) {
      return contentionBetweenUs(eval, from, to);
    };
    for (unsigned round = 0; round < kPeakRounds; ++round) {
      // A trade's prefetch stays where its hint puts it.
      for (auto [k, a] : llvm::enumerate(offloaded))
        copies[k].movable = currentHints[a].prefetchNotBefore < 0 && !banned[a];
      std::vector<PlacedCopy> placed =
          placeJointly(copies, p.nodeEndUs, lossBetween);
      if (placed.empty())
        return {};
      // The copies together must fit where each alone does: bytes back on
      // the device earlier than in the plan, per node.
      std::vector<int64_t> added(numNodes, 0);
      int32_t lastMoved = -1;
      bool anyMoved = false, over = false;
      gainUs.assign(acts.size(), 0.0);
      for (auto [k, a] : llvm::enumerate(offloaded)) {
        const ActivationDecision &d = p.decisions[a];
        const NodeId issue = placed[k].issue;
        bool fits = true;
        for (NodeId n = issue + 1; fits && n <= d.prefetchAfter; ++n)
          fits = nodeMemory[n] + added[n] + acts[a].bytes <= roomTo;
        if (placed[k].moved)
          lastMoved = a;
        if (!fits) {
          // Its own move, or the one that pushed it back, not made again.
          if (lastMoved < 0)
            return {};
          banned[lastMoved] = 1;
          over = true;
          break;
        }
        hints[a].prefetchBy = placed[k].moved ? issue : -1;
        if (placed[k].moved) {
          gainUs[a] = placed[k].gainUs;
          anyMoved = true;
        }
        for (NodeId n = issue + 1; n <= d.prefetchAfter; ++n)
          added[n] += acts[a].bytes;
      }
      if (over)
        continue;
      if (!anyMoved || copyOnlyPeak({}, hints) > cap)
        return {};
      return hints;
    }
    return {};
  }
  for (unsigned round = 0; round < kPeakRounds; ++round) {
    // Bytes back on the device earlier than in the plan, per node.
    std::vector<int64_t> added(numNodes, 0);
    auto fits = [&](NodeId first, NodeId last, int64_t bytes) {
      for (NodeId k = first; k <= last; ++k)
        if (nodeMemory[k] + added[k] + bytes > roomTo)
          return false;
      return true;
    };
    double nextStart = std::numeric_limits<double>::infinity();
    int32_t lastMoved = -1;
    bool anyMoved = false, over = false;
    gainUs.assign(acts.size(), 0.0);
    for (auto [k, a] : llvm::enumerate(offloaded)) {
      const ActivationDecision &d = p.decisions[a];
      const NodeId restore = d.firstBackwardUse;
      const int64_t bytes = acts[a].bytes;
      const double us = copy.h2dUs(bytes);
      const double end = std::min(p.chainStartUs[restore], nextStart);
      double start = end - us;
      NodeId issue =
          lastNodeEndingBy(p.nodeEndUs, start, d.releaseAfter, restore - 1);
      hints[a].prefetchBy = -1;
      if (currentHints[a].prefetchNotBefore >= 0)
        issue = std::min(restore - 1,
                         std::max(issue, currentHints[a].prefetchNotBefore));
      // Pushed back by a moved copy, it may no longer fit.
      if (!fits(issue + 1, d.prefetchAfter, bytes)) {
        if (lastMoved >= 0)
          banned[lastMoved] = 1;
        over = true;
        break;
      }
      // A trade's prefetch stays where its hint puts it.
      if (currentHints[a].prefetchNotBefore < 0 && !banned[a]) {
        // Issue points back from the latest, each as long as the buffer
        // fits there; the copy then starts once issued.
        // The copy walked next must still fit before this one: its
        // earliest start where its buffer fits back on the device (the walk
        // starts over where a copy pushed further back does not fit).
        double nextEarliest = -std::numeric_limits<double>::infinity();
        if (k + 1 < offloaded.size()) {
          const int32_t b = offloaded[k + 1];
          const ActivationDecision &e = p.decisions[b];
          NodeId n = e.prefetchAfter;
          while (n > e.releaseAfter && fits(n, n, acts[b].bytes))
            --n;
          nextEarliest = std::max(p.nodeEndUs[n], p.d2hEndUs[b]) +
                         copy.h2dUs(acts[b].bytes);
        }
        const double latest = contentionBetweenUs(eval, start, start + us);
        double best = latest - kMinGainUs;
        NodeId bestIssue = -1;
        for (NodeId n = issue;
             n > d.releaseAfter && issue - n < NodeId(kMaxIssuePoints); --n) {
          // Issued after n - 1: back on the device from node n on.
          if (n <= d.prefetchAfter && !fits(n, n, bytes))
            break;
          const double s = std::max(p.nodeEndUs[n - 1], p.d2hEndUs[a]);
          if (s < start - kLookBackCopies * us || s < nextEarliest)
            break;
          if (s + us > end)
            continue;
          const double loss = contentionBetweenUs(eval, s, s + us);
          if (loss < best) {
            best = loss;
            bestIssue = n - 1;
          }
        }
        if (bestIssue >= 0) {
          issue = bestIssue;
          start = std::max(p.nodeEndUs[issue], p.d2hEndUs[a]);
          hints[a].prefetchBy = issue;
          gainUs[a] = latest - best;
          lastMoved = a;
          anyMoved = true;
        }
      }
      for (NodeId k = issue + 1; k <= d.prefetchAfter; ++k)
        added[k] += bytes;
      nextStart = std::max(start, p.nodeEndUs[issue]);
    }
    if (over)
      continue;
    // The estimate above, checked exactly (chains and copy ops included).
    if (!anyMoved || copyOnlyPeak({}, hints) > cap)
      return {};
    return hints;
  }
  return {};
}

llvm::Expected<bool> Solver::quietPrefetches(int64_t cap, FloorAt floorAt,
                                             llvm::function_ref<bool()> spend) {
  // The copies placed together, then one at a time: the estimate both go by
  // (contentionBetweenUs) misses how the step's times shift, so each is
  // evaluated and the faster kept (T5 at 60%: one at a time 10.50%,
  // together 10.54%; GPT-2 at 60% 8.40% and 8.34%).
  std::optional<std::pair<std::vector<CopyHint>, Evaluation>> best;
  for (bool joint : {true, false}) {
    std::vector<double> gainUs;
    std::vector<CopyHint> hints = quietPrefetchHints(cap, {}, gainUs, joint);
    // kPlacementTries at most: where every move together makes the step
    // faster than the floor allows, only the moves of most estimated gain
    // that together gain about what it allows.
    for (unsigned attempt = 0;
         attempt < kPlacementTries && !hints.empty() && spend(); ++attempt) {
      llvm::Expected<std::optional<Evaluation>> evaluated = evaluateTrial(
          current, hints, {cap, currentEval.stepUs}, options.hostBudgetBytes);
      if (!evaluated)
        return evaluated.takeError();
      if (!*evaluated || (*evaluated)->peakBytes > cap ||
          !((*evaluated)->stepUs < currentEval.stepUs))
        break;
      const double gained = currentEval.stepUs - (*evaluated)->stepUs;
      llvm::Expected<double> floorNow = floorAt((*evaluated)->stepUs);
      if (!floorNow)
        return floorNow.takeError();
      const double floor = *floorNow;
      if ((*evaluated)->stepUs >= floor) {
        if (!best || (*evaluated)->stepUs < best->second.stepUs)
          best.emplace(std::move(hints), std::move(**evaluated));
        break;
      }
      // The estimate scaled to what the moves gained.
      const double estimated =
          std::accumulate(gainUs.begin(), gainUs.end(), 0.0);
      const double allowedUs =
          (currentEval.stepUs - floor) * estimated / gained;
      std::vector<std::pair<double, int32_t>> byGain;
      for (auto [a, g] : llvm::enumerate(gainUs))
        if (g > 0.0)
          byGain.push_back({-g, static_cast<int32_t>(a)});
      llvm::sort(byGain);
      // A move whose gain would take the sum past what is allowed is left
      // out, and the smaller ones after it still taken (since 2026-11-28:
      // Llama-8l at 60% 6.78 -> 6.74%, DiT-B/2 at 50% 7.504 -> 7.495%).
      std::vector<uint8_t> allowed(acts.size(), 0);
      double sum = 0.0;
      for (auto [negGain, a] : byGain) {
        if (sum - negGain > allowedUs)
          continue;
        sum -= negGain;
        allowed[a] = 1;
      }
      hints = quietPrefetchHints(cap, allowed, gainUs, joint);
    }
  }
  if (!best)
    return false;
  currentHints = std::move(best->first);
  currentEval = std::move(best->second);
  return true;
}

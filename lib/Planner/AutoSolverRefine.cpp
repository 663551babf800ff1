//===- AutoSolverRefine.cpp - A last local search on auto's plan ----------===//
//
// The ladder's searches act on the plan a level's greedy built, at the
// level; the plan returned is then that of a level, not of the budget, and
// single decisions the greedy's order never revisits are left as they are
// (a 32 MiB add offloaded early where retaining it fits, a recompute whose
// offload would hide). `refine` is a bounded first-improvement local search
// on the returned plan at the budget: moves of one or two decisions ranked
// by a cheap estimate (step time saved per byte moved, from the current
// placement and its exact memory), each confirmed by a whole-step
// evaluation, the fastest plan kept (docs/Planner.md, "Refining"). Its
// floor may come from a solve at the next budget up (AutoSolverFloor.cpp).
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"
#include "PlannerUtils.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <set>

using namespace lethe;
using namespace lethe::autosolver;

/// The evaluations one refinement may make, as a share of those the solve
/// made before it (at least kMinRefineEvaluations): so it costs the solve at
/// most about 1/8 more time on any graph but small ones. On the corpus a
/// solve makes 200-1,000 (Llama-style at 50%: about 960); the moves kept
/// there came within the first 100 (bench/results/bound.md, 2026-11-26
/// 21:30).
constexpr double kRefineShare = 0.125;
/// Where the floor first binds only after the rounds (in the contention
/// pass or the quiet copies), the solve nested for it refines with at most
/// lateFloorEvaluations(the solve's evaluations) and nests none itself: a
/// solve with fewer evaluations and less depth returns a plan no faster
/// than the solve at that budget, so that floor is as sound. Its cost is
/// kept within 1/kLateFloorShare of the solve's evaluations: besides its
/// refine, a nested solve costs about kNestedSolveEvaluations of the
/// solve's average evaluations (0.7-2.1 ms with a refine of one evaluation,
/// where an evaluation averages 0.1-0.26 ms, on ViT-B/16, Llama-timed and
/// Qwen2), and a refine's evaluation, a whole one, about
/// kRefineEvaluationCost. Not made where that leaves fewer than
/// kMinLateFloorEvaluations (a solve of under 256 evaluations): with one
/// of 8-10 evaluations, Qwen2 at 50% and T5 at 90% took 11-18% longer.
constexpr size_t kLateFloorShare = 16;
constexpr size_t kNestedSolveEvaluations = 8;
constexpr size_t kRefineEvaluationCost = 2;
constexpr size_t kMinLateFloorEvaluations = 4;
static unsigned lateFloorEvaluations(size_t solveEvaluations) {
  const size_t share = solveEvaluations / kLateFloorShare;
  if (share < kNestedSolveEvaluations +
                  kRefineEvaluationCost * kMinLateFloorEvaluations)
    return 0;
  return static_cast<unsigned>((share - kNestedSolveEvaluations) /
                               kRefineEvaluationCost);
}
/// Other offloads tried widened, one at a time, where a move overfills ops
/// its own offloads do not reach (refine's tryPlan).
constexpr size_t kWidenOthers = 3;
/// A small solve still gets a few moves tried: those nested for the floor
/// (solveAt) at least 16, the plan returned at least 32. On small graphs
/// (under 128 evaluations to solve) the floors were mostly lowered already
/// and the 16 evaluations of the returned plan's refine ran out short of
/// them (Qwen2 at 60%: 5.28% where its floor was 5.13%; T5 at 50% 17.41 ->
/// 17.29%; bench/results/bound.md, 2026-11-27 11:07).
constexpr unsigned kMinRefineEvaluations = 16;
constexpr unsigned kMinReturnedRefineEvaluations = 32;
/// Graphs of up to this many nodes get those floors in full, larger ones a
/// share of them in proportion (the floor times kFloorFullNodes / nodes):
/// an evaluation costs about its graph's nodes (~0.2 us a node here), so the
/// floor adds at most what 32 evaluations of a graph of this size cost (~25
/// ms on the 2-core VM). Every corpus graph but Mamba (18,254 nodes) is
/// under it; on a 10,000-op step the 32 evaluations cost 27 ms for 0.03
/// points of overhead, on a 100,000-op step 430 ms for 0.01
/// (bench/results/scaling.md, 2026-11-27 12:53 and 13:55).
constexpr size_t kFloorFullNodes = 4096;
/// Levels above the ladder's least peak within which refine widens no copies
/// (refineSolution).
constexpr int64_t kNoWidenLevels = 2;
/// Retained activations searched for the partner of a pair per round: the
/// cheapest droppable one that frees the ops the first move overfills.
constexpr size_t kPairSearches = 24;
/// Drops the estimate prices under this share of the step are tried after
/// the moves it says gain: it does not see which kernels a moved re-run or
/// copy overlaps (on the Llama-style graph at 50%, recomputing four RMSNorm
/// rstd values of under 1 MiB each saved 70 us each).
constexpr double kCheapDropShare = 0.002;

/// A drop switched to the other kind (recompute <-> offload) is tried even
/// where the estimate says it loses, if by less than this share of what the
/// drop costs now: the estimate prices copies at the step's average
/// contention (on DiT at 60% it priced an MLP output's offload 25% above
/// its re-run, and the switch saved 42% of it). Not near the least peak,
/// where copies are not widened either (refineSolution).
constexpr double kSwitchLossShare = 0.5;
/// Such switches tried per round, and offloads moved to a sibling (refine's
/// swaps): four swaps a round gained under 0.1 point more on the corpus and
/// took 45% more solve time (bench/results/bound.md, 2026-11-27 09:05);
/// three (since 2026-11-27 11:07, the returned plan's refine at least 32
/// evaluations) took six cells 0.01-0.14 points lower (Llama-timed 60% 8.00
/// -> 7.94%), none higher, the solve times summed the same; more switches
/// moved none.
constexpr size_t kSwitchesPerRound = 2;
/// Evaluations refine spends after its rounds on drops switched by their
/// copies' own windows (its last pass): a quarter of those its rounds could
/// spend, but at most a sixteenth of the solve's (small solves give the
/// rounds at least 32: a quarter of those took GPT-2's 70% solve 11%
/// longer), and at least a few.
constexpr unsigned kContentionShareDivisor = 4;
constexpr size_t kContentionSolveDivisor = 16;
constexpr unsigned kMinContentionEvaluations = 4;
constexpr size_t kSwapsPerRound = 3;

/// The share of those floors a graph gets (kFloorFullNodes).
static double floorShareOf(const TrainingGraph &graph) {
  return std::min(
      1.0, static_cast<double>(kFloorFullNodes) /
               static_cast<double>(std::max<size_t>(1, graph.numNodes())));
}

unsigned Solver::refineBudget() const {
  const unsigned most = std::max<unsigned>(
      static_cast<unsigned>(floorShareOf(graph) *
                            (answersAgain ? kMinReturnedRefineEvaluations
                                          : kMinRefineEvaluations)),
      static_cast<unsigned>(kRefineShare *
                            static_cast<double>(refineEvaluationBase
                                                    ? refineEvaluationBase
                                                    : solveEvaluations())));
  return refineLimit ? std::min(most, refineLimit) : most;
}

namespace {

/// One or two decisions changed together, with the estimated step time it
/// saves.
struct Move {
  llvm::SmallVector<std::pair<int32_t, Decision>, 2> changes;
  double gainUs = 0.0;
  int64_t bytes = 1;
  double score() const {
    return gainUs / static_cast<double>(std::max<int64_t>(1, bytes));
  }
  std::array<int32_t, 4> key() const {
    std::array<int32_t, 4> k = {-1, -1, -1, -1};
    for (auto [i, c] : llvm::enumerate(changes)) {
      k[2 * i] = c.first;
      k[2 * i + 1] = static_cast<int32_t>(c.second);
    }
    return k;
  }
};

const char *decisionName(Decision d) {
  switch (d) {
  case Decision::Retain:
    return "retained";
  case Decision::Recompute:
    return "recomputed";
  case Decision::Offload:
    return "offloaded";
  }
  return "";
}

} // namespace

llvm::Expected<unsigned> Solver::refine(int64_t cap, double floor,
                                        std::vector<std::string> &notes,
                                        const LowerFloor &lowerFloor) {
  notes.assign(acts.size(), "");
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  auto copyUs = [&](size_t a) {
    return copy.d2hUs(acts[a].bytes) + copy.h2dUs(acts[a].bytes);
  };
  // What the current decision of `a` costs the step, as the greedy prices
  // it: a recompute its exclusive chain time, an offload the compute time
  // its copies take from the kernels beside them plus what the step waits
  // for them. And what the other decisions would (their copies hidden, a
  // chain of its own).
  auto costNow = [&](size_t a, const llvm::DenseMap<uint64_t, int32_t> &users) {
    const Placement &p = *currentEval.placement;
    const ActivationDecision &d = p.decisions[a];
    if (current[a] == Decision::Offload)
      return contentionPerCopyUs * copyUs(a) + exposedCopyUs(a);
    if (current[a] != Decision::Recompute || d.decision != Decision::Recompute)
      return 0.0;
    double own = 0.0;
    for (NodeId node : d.recomputeNodes)
      if (users.lookup((uint64_t(d.firstBackwardUse) << 32) | uint32_t(node)) ==
          1)
        own += std::max(0.0, graph.getNode(node).timeUs);
    return own;
  };
  auto costOf = [&](size_t a, Decision d) {
    switch (d) {
    case Decision::Retain:
      return 0.0;
    case Decision::Recompute:
      return acts[a].recomputeUs;
    case Decision::Offload:
      return contentionPerCopyUs * copyUs(a);
    }
    return 0.0;
  };
  auto allowed = [&](size_t a, Decision d) {
    if (d == Decision::Recompute)
      return acts[a].recomputable;
    if (d == Decision::Offload)
      return acts[a].offloadable &&
             offloadedBytes + acts[a].bytes <= options.hostBudgetBytes;
    return true;
  };

  // The ops where `a` is off the device in `eval`'s plan (retaining it adds
  // its bytes there), or would be if a retained `a` were dropped: its
  // forward life's end to its restore point. Empty: first > second.
  auto absentOps = [&](size_t a, llvm::ArrayRef<Decision> decisions,
                       const Evaluation &eval,
                       const Positions &pos) -> std::pair<size_t, size_t> {
    const ActivationDecision &d = eval.placement->decisions[a];
    if (decisions[a] == Decision::Offload && pos.releaseOp[a] >= 0 &&
        pos.prefetchOp[a] > pos.releaseOp[a])
      return {pos.releaseOp[a] + 1, pos.prefetchOp[a] - 1};
    NodeId restore = decisions[a] == Decision::Retain
                         ? (pos.needNode[a] >= 0 ? pos.needNode[a]
                                                 : acts[a].firstBackwardUse)
                         : d.firstBackwardUse;
    if (restore < 0 || restore <= acts[a].lastForwardUse)
      return {1, 0};
    return {static_cast<size_t>(pos.nodeOp[acts[a].lastForwardUse]) + 1,
            static_cast<size_t>(pos.regionStart[restore]) - 1};
  };
  // Retained activations of `eval`'s plan that may be dropped, cheapest per
  // byte first: the partners that free what a move costs.
  struct Partner {
    double cost;
    int32_t act;
    Decision decision;
    std::pair<size_t, size_t> ops;
  };
  auto partnersOf = [&](llvm::ArrayRef<Decision> decisions,
                        const Evaluation &eval, const Positions &pos,
                        int64_t host) {
    std::vector<Partner> partners;
    for (size_t a = 0; a < acts.size(); ++a) {
      if (decisions[a] != Decision::Retain)
        continue;
      std::pair<size_t, size_t> ops = absentOps(a, decisions, eval, pos);
      if (ops.first > ops.second)
        continue;
      for (Decision d : {Decision::Recompute, Decision::Offload})
        if (d == Decision::Recompute
                ? acts[a].recomputable
                : acts[a].offloadable &&
                      host + acts[a].bytes <= options.hostBudgetBytes)
          partners.push_back({costOf(a, d), static_cast<int32_t>(a), d, ops});
    }
    llvm::sort(partners, [&](const Partner &x, const Partner &y) {
      double bx = x.cost / static_cast<double>(acts[x.act].bytes);
      double by = y.cost / static_cast<double>(acts[y.act].bytes);
      if (bx != by)
        return bx < by;
      return std::make_pair(x.act, int(x.decision)) <
             std::make_pair(y.act, int(y.decision));
    });
    return partners;
  };
  // The cheapest partner that frees `excess` bytes over ops [first, last]
  // for less than `gainUs`.
  auto partnerFor = [&](llvm::ArrayRef<Partner> partners, size_t first,
                        size_t last, int64_t excess,
                        double gainUs) -> const Partner * {
    for (const Partner &p : partners) {
      if (p.cost >= gainUs)
        break;
      if (acts[p.act].bytes >= excess && p.ops.first <= first &&
          last <= p.ops.second)
        return &p;
    }
    return nullptr;
  };

  const State start = save();
  std::set<std::array<int32_t, 4>> tried;
  // Activations a kept move changed: a switch back would mostly give back
  // what the switch gained.
  llvm::DenseSet<int32_t> keptActs;
  unsigned evaluations = 0, kept = 0;
  // answersAgain: this solve is the caller's, not one nested for a floor.
  // The floor shrinks with the evaluations' cost (see kFloorFullNodes).
  const double floorShare = floorShareOf(graph);
  unsigned maxEvaluations = refineBudget();
  bool floorLowered = !lowerFloor;
  // After the rounds (the contention pass and the quiet copies): a floor
  // lowered there comes from a limited nested solve (lateFloorEvaluations).
  bool inPasses = false;
  // The floor a plan of `stepUs` is judged against: where it first goes
  // under the floor, the step of the plan the next budget up gets
  // (lowerFloor, a nested solve) lowers it.
  auto floorAt = [&](double stepUs) -> llvm::Expected<double> {
    if (stepUs < floor && !floorLowered) {
      floorLowered = true;
      // After the rounds: a limited solve, only where it costs little.
      const unsigned limit =
          inPasses ? lateFloorEvaluations(solveEvaluations()) : 0;
      if (inPasses && !limit)
        return floor;
      llvm::Expected<FloorNear> lower = lowerFloor(limit, stepUs);
      if (!lower)
        return lower.takeError();
      // Known only as far as `stepUs` needs: asked again for the next step.
      floorLowered = lower->exact;
      if (!lower->exact)
        return std::min(floor, lower->value);
      floor = std::min(floor, lower->value);
    }
    return floor;
  };
  // Evaluates `trial`; keeps it (true) where it fits and is faster. A trial
  // faster but over the cap gets more evaluations, each found on its own
  // exact memory: the offloads it made released before the ops it
  // overfills and prefetched after them (their copies may then cost time;
  // a recompute turned into an offload frees a narrower span than the
  // recompute did), then the partner that frees those ops.
  auto tryPlan =
      [&](std::vector<Decision> trial, std::vector<CopyHint> trialHints,
          int64_t host,
          llvm::SmallVectorImpl<int32_t> &changedActs) -> llvm::Expected<bool> {
    bool widenTried = false, partnered = false;
    // The widenings to try, one after the other, each on the unwidened
    // trial: the move's own offloads together, then other offloads one at
    // a time (largest first), each with the hints to set; and the hints the
    // one being tried replaced.
    using Widening = llvm::SmallVector<std::pair<int32_t, CopyHint>, 2>;
    std::vector<Widening> widenings;
    size_t nextWidening = 0;
    Widening undo;
    const size_t movedActs = changedActs.size();
    auto applyNextWidening = [&] {
      for (auto [a, hint] : undo)
        trialHints[a] = hint;
      undo.clear();
      changedActs.resize(movedActs);
      if (nextWidening == widenings.size())
        return false;
      for (auto [a, hint] : widenings[nextWidening++]) {
        undo.push_back({a, trialHints[a]});
        trialHints[a] = hint;
        if (!llvm::is_contained(changedActs, a))
          changedActs.push_back(a);
      }
      return true;
    };
    while (true) {
      if (evaluations >= maxEvaluations)
        return false;
      ++evaluations;
      // Only a faster trial goes on (over the cap too), so its simulation
      // stops once it is certain to be no faster (EvaluationLimits); one
      // known to be no faster is not evaluated again (counted as if).
      llvm::Expected<std::optional<Evaluation>> evaluated = evaluateTrial(
          trial, trialHints,
          {std::numeric_limits<int64_t>::max(), currentEval.stepUs},
          options.hostBudgetBytes);
      if (!evaluated)
        return evaluated.takeError();
      Evaluation *eval = *evaluated ? &**evaluated : nullptr;
      const double gainUs = eval ? currentEval.stepUs - eval->stepUs : 0.0;
      if (!(gainUs > 0.0) || eval->hostPeakBytes > options.hostBudgetBytes) {
        if (!undo.empty() && applyNextWidening())
          continue;
        return false;
      }
      // Over the cap, a trial is judged against the floor only once it
      // fits: what makes it fit costs time and can bring a move that gains
      // more than the floor allows back above it.
      if (eval->peakBytes <= cap) {
        llvm::Expected<double> floorNow = floorAt(eval->stepUs);
        if (!floorNow)
          return floorNow.takeError();
        if (eval->stepUs < *floorNow)
          return false;
        for (int32_t a : changedActs)
          notes[a] =
              llvm::formatv("refined: was {0} in the plan chosen; the "
                            "change saves {1} of step time",
                            decisionName(current[a]), planner::humanUs(gainUs))
                  .str();
        for (int32_t a : changedActs)
          keptActs.insert(a);
        current = std::move(trial);
        currentHints = std::move(trialHints);
        currentEval = std::move(*eval);
        offloadedBytes = host;
        ++kept;
        // A solve asked only whether its refine gets that far stops there.
        if (currentEval.stepUs <= refineStopUs)
          maxEvaluations = evaluations, stopped = true;
        return true;
      }
      // Still over the cap: the next widening, until the last (which goes
      // on to the partner below).
      if (!undo.empty() && nextWidening < widenings.size()) {
        applyNextWidening();
        continue;
      }
      llvm::ArrayRef<int64_t> memory = eval->memory.deviceAtOp;
      size_t first = 0, last = memory.size() - 1;
      while (memory[first] <= cap)
        ++first;
      while (memory[last] <= cap)
        --last;
      std::shared_ptr<const Positions> indexed = index(*eval);
      const Positions &pos = *indexed;
      if (!widenTried && widenCopies) {
        widenTried = true;
        const NodeId firstNode = pos.opNode[first], lastNode = pos.opNode[last];
        // An offload whose gap meets the overfilled nodes and whose copies
        // do not already leave them.
        auto widenable = [&](int32_t a) {
          const ActivationDecision &d = eval->placement->decisions[a];
          return trial[a] == Decision::Offload &&
                 lastNode > acts[a].lastForwardUse &&
                 firstNode < d.firstBackwardUse &&
                 !(d.releaseAfter < firstNode && lastNode <= d.prefetchAfter);
        };
        auto widened = [&](int32_t a) -> std::optional<CopyHint> {
          CopyHint hint = widenedHint(a, eval->placement->decisions[a],
                                      firstNode, lastNode);
          if (hint == trialHints[a])
            return std::nullopt;
          return hint;
        };
        Widening own;
        for (int32_t a : changedActs)
          if (widenable(a))
            if (std::optional<CopyHint> hint = widened(a))
              own.push_back({a, *hint});
        if (!own.empty())
          widenings.push_back(std::move(own));
        // The copies the move queued can also delay another offload's
        // release or bring its prefetch forward over those nodes: such
        // offloads widened one at a time, the largest first.
        std::vector<int32_t> others;
        for (int32_t a : offloadOrder)
          if (!llvm::is_contained(changedActs, a) && widenable(a))
            others.push_back(a);
        llvm::sort(others, [&](int32_t x, int32_t y) {
          return std::make_pair(-acts[x].bytes, x) <
                 std::make_pair(-acts[y].bytes, y);
        });
        const size_t limit = widenings.size() + kWidenOthers;
        for (int32_t a : others) {
          if (widenings.size() == limit)
            break;
          if (std::optional<CopyHint> hint = widened(a))
            widenings.push_back({{a, *hint}});
        }
        if (applyNextWidening())
          continue;
      }
      if (partnered)
        return false;
      std::vector<Partner> partners = partnersOf(trial, *eval, pos, host);
      const Partner *p =
          partnerFor(partners, first, last, eval->peakBytes - cap, gainUs);
      if (!p)
        return false;
      host += (p->decision == Decision::Offload) * acts[p->act].bytes;
      trial[p->act] = p->decision;
      trialHints[p->act] = CopyHint();
      changedActs.push_back(p->act);
      partnered = true;
    }
  };

  // How many of the current plan's restored activations re-run each node at
  // each restore point (costNow's exclusive chain time).
  auto chainUsers = [&] {
    llvm::DenseMap<uint64_t, int32_t> users;
    for (size_t a = 0; a < acts.size(); ++a) {
      const ActivationDecision &d = currentEval.placement->decisions[a];
      if (current[a] != Decision::Retain)
        for (NodeId node : d.recomputeNodes)
          ++users[(uint64_t(d.firstBackwardUse) << 32) | uint32_t(node)];
    }
    return users;
  };
  bool changed = true;
  while (changed && evaluations < maxEvaluations) {
    changed = false;
    std::shared_ptr<const Positions> indexed = index(currentEval);
    const Positions &pos = *indexed;
    MaxTree tree;
    tree.build(currentEval.memory.deviceAtOp);
    llvm::ArrayRef<int64_t> memory = currentEval.memory.deviceAtOp;
    llvm::DenseMap<uint64_t, int32_t> users = chainUsers();
    std::vector<Partner> partners =
        partnersOf(current, currentEval, pos, offloadedBytes);

    std::vector<Move> moves, switches;
    size_t pairSearches = 0;
    std::vector<std::pair<double, int32_t>> dropped;
    for (size_t a = 0; a < acts.size(); ++a)
      if (current[a] != Decision::Retain)
        dropped.push_back({-costNow(a, users), static_cast<int32_t>(a)});
    llvm::sort(dropped);
    for (auto [negCost, a] : dropped) {
      const double now = -negCost;
      const int64_t bytes = acts[a].bytes;
      // The other kind of drop: about the same bytes over the same gap (an
      // offload's narrower: tryPlan pairs it where that overfills).
      Decision other = current[a] == Decision::Recompute ? Decision::Offload
                                                         : Decision::Recompute;
      if (allowed(a, other) && now - costOf(a, other) > 0.0)
        moves.push_back({{{a, other}}, now - costOf(a, other), bytes});
      else if (widenCopies && !keptActs.contains(a) && allowed(a, other) &&
               now > 0.0 && costOf(a, other) - now < kSwitchLossShare * now)
        switches.push_back({{{a, other}}, now - costOf(a, other), bytes});
      if (now <= 0.0)
        continue;
      // Retained: fits where the ops it is absent from have room.
      auto [lo, hi] = absentOps(a, current, currentEval, pos);
      if (lo > hi || tree.maxIn(lo, hi) + bytes <= cap) {
        moves.push_back({{{a, Decision::Retain}}, now, bytes});
        continue;
      }
      // Else with a partner that frees those ops for less than it saves.
      if (pairSearches++ >= kPairSearches)
        continue;
      size_t first = lo, last = hi;
      while (first <= hi && memory[first] + bytes <= cap)
        ++first;
      while (last > first && memory[last] + bytes <= cap)
        --last;
      if (const Partner *p =
              partnerFor(partners, first, last,
                         tree.maxIn(first, last) + bytes - cap, now))
        moves.push_back({{{a, Decision::Retain}, {p->act, p->decision}},
                         now - p->cost,
                         bytes + acts[p->act].bytes});
    }
    // Most step time saved per byte moved first (bytes are what the budget
    // rations), then in a fixed order.
    llvm::sort(moves, [](const Move &x, const Move &y) {
      if (x.score() != y.score())
        return x.score() > y.score();
      return x.key() < y.key();
    });
    // The `most` moves of `extra` the estimate says gain most (or lose
    // least), appended to the moves: where the first loses, the next (the
    // same kind of activation in another layer) mostly does too.
    auto appendBest = [&](std::vector<Move> &extra, size_t most) {
      llvm::sort(extra, [](const Move &x, const Move &y) {
        if (x.gainUs != y.gainUs)
          return x.gainUs > y.gainUs;
        return x.key() < y.key();
      });
      if (extra.size() > most)
        extra.resize(most);
      moves.insert(moves.end(), extra.begin(), extra.end());
    };
    // Then the other kind of drop where the estimate says it loses a little:
    // it prices a copy at the step's average contention, and copies placed
    // beside kernels that lose less cost less (DiT at 60%: an MLP output's
    // offload priced 31 us above its 124-us re-run saved 52 us).
    appendBest(switches, kSwitchesPerRound);
    // Then an offload moved to a sibling: the offloaded activation retained
    // and a retained one of at least its bytes, absent over its ops if
    // dropped, offloaded instead (the closest in size, then the one whose
    // offload re-runs the least view time, then the closest in last forward
    // use). Its copies then meet other kernels and other copies: the
    // estimate cannot tell them apart (on ConvNeXt-T at 60% a layer norm's
    // offload moved to the block's residual add saved 10 us at the same
    // peak).
    std::vector<Move> swaps;
    // The view nodes an offload re-runs on its prefetched storage (at its
    // restore point), which the estimate leaves out: on Qwen2 at 60% the
    // attention outputs' offloads re-run four views each, their siblings'
    // (a `_to_copy` of the same bytes) none.
    auto rederiveUs = [&](int32_t a) {
      double us = 0.0;
      for (NodeId node : acts[a].rederiveNodes)
        us += std::max(0.0, graph.getNode(node).timeUs);
      return us;
    };
    if (widenCopies)
      for (auto [negCost, a] : dropped) {
        if (current[a] != Decision::Offload || keptActs.contains(a))
          continue;
        auto [lo, hi] = absentOps(a, current, currentEval, pos);
        if (lo > hi)
          continue;
        const Partner *best = nullptr;
        // `a` by value: a structured binding is captured only from C++20.
        auto distance = [&, a = a](const Partner &p) {
          return std::make_tuple(
              acts[p.act].bytes - acts[a].bytes, rederiveUs(p.act),
              std::abs(acts[p.act].lastForwardUse - acts[a].lastForwardUse));
        };
        for (const Partner &p : partners)
          if (p.decision == Decision::Offload &&
              acts[p.act].bytes >= acts[a].bytes && p.ops.first <= lo &&
              hi <= p.ops.second && !keptActs.contains(p.act) &&
              offloadedBytes + acts[p.act].bytes - acts[a].bytes <=
                  options.hostBudgetBytes &&
              (!best || distance(p) < distance(*best)))
            best = &p;
        if (best)
          swaps.push_back(
              {{{a, Decision::Retain}, {best->act, Decision::Offload}},
               -negCost + rederiveUs(a) - best->cost - rederiveUs(best->act),
               acts[a].bytes + acts[best->act].bytes});
      }
    appendBest(swaps, kSwapsPerRound);
    // Then, with what is left of the evaluations, drops the estimate prices
    // nearly free, the cheapest first: it does not see where copies overlap
    // which kernels, and a re-run that moves the compute under a copy can
    // make the step faster.
    std::vector<Move> cheap;
    for (const Partner &p : partners)
      if (p.cost < kCheapDropShare * currentEval.stepUs)
        cheap.push_back({{{p.act, p.decision}}, -p.cost, acts[p.act].bytes});
    llvm::sort(cheap, [](const Move &x, const Move &y) {
      if (x.gainUs != y.gainUs)
        return x.gainUs > y.gainUs;
      return x.key() < y.key();
    });
    moves.insert(moves.end(), cheap.begin(), cheap.end());

    for (const Move &move : moves) {
      if (evaluations >= maxEvaluations)
        break;
      if (!tried.insert(move.key()).second)
        continue;
      std::vector<Decision> trial = current;
      std::vector<CopyHint> trialHints = currentHints;
      int64_t host = offloadedBytes;
      llvm::SmallVector<int32_t, 3> changedActs;
      for (auto [a, d] : move.changes) {
        host += (d == Decision::Offload) * acts[a].bytes -
                (trial[a] == Decision::Offload) * acts[a].bytes;
        trial[a] = d;
        trialHints[a] = CopyHint();
        changedActs.push_back(a);
      }
      llvm::Expected<bool> improved =
          tryPlan(std::move(trial), std::move(trialHints), host, changedActs);
      if (!improved)
        return improved.takeError();
      if (*improved) {
        changed = true;
        break;
      }
    }
  }
  // Then each drop switched to the other kind where the copies' own windows
  // say so (contentionSwitches), which the moves above priced at the step's
  // average contention: a few more evaluations, the moves above and their
  // plans the same. Where the floor first binds here or in the quiet copies
  // below, a limited solve nested for it lowers it (lateFloorEvaluations;
  // before 2026-11-28 the floor stood: Mixtral at 70% 4.87 -> 4.67%). Only
  // on the plan returned (answersAgain), not in the solves nested for a
  // floor: their floors are then those of plans without it, never faster
  // than what a larger budget returns, and the solve's time grows by this
  // pass alone (in them as well, BERT's least solve took 15% longer). Not
  // near the least peak, as the switches above (there it raised the least
  // budget `lethe plan` meets on Mamba from 42% to 44% of the unplanned
  // peak).
  inPasses = true;
  maxEvaluations =
      std::max(maxEvaluations, evaluations) +
      std::max(kMinContentionEvaluations,
               std::min(maxEvaluations / kContentionShareDivisor,
                        static_cast<unsigned>(solveEvaluations() /
                                              kContentionSolveDivisor)));
  for (bool again = widenCopies && answersAgain;
       again && evaluations < maxEvaluations;) {
    again = false;
    llvm::DenseMap<uint64_t, int32_t> users = chainUsers();
    std::vector<Move> local;
    for (auto [negGain, a] :
         contentionSwitches([&](int32_t r) { return costNow(r, users); }))
      local.push_back(
          {{{a, current[a] == Decision::Recompute ? Decision::Offload
                                                  : Decision::Recompute}},
           -negGain,
           1});
    for (const Move &move : local) {
      if (evaluations >= maxEvaluations)
        break;
      auto [a, d] = move.changes.front();
      if (keptActs.contains(a) || !tried.insert(move.key()).second)
        continue;
      std::vector<Decision> trial = current;
      std::vector<CopyHint> trialHints = currentHints;
      int64_t host =
          offloadedBytes + (d == Decision::Offload ? 1 : -1) * acts[a].bytes;
      trial[a] = d;
      trialHints[a] = CopyHint();
      llvm::SmallVector<int32_t, 3> changedActs = {a};
      llvm::Expected<bool> improved =
          tryPlan(std::move(trial), std::move(trialHints), host, changedActs);
      if (!improved)
        return improved.takeError();
      if (*improved) {
        again = true;
        break;
      }
    }
  }
  // Last, the plan's copies moved where they cost the step less (quiet
  // copies, AutoSolverQuietCopies.cpp), on the same terms as the pass
  // above; not on graphs whose evaluations cost more than kFloorFullNodes'
  // (Mamba at 50-90%: 0.01-0.04 points for three evaluations of 18,254
  // nodes).
  if (widenCopies && answersAgain && floorShare == 1.0) {
    llvm::Expected<unsigned> quiet = quietCopies(cap, floorAt, evaluations);
    if (!quiet)
      return quiet.takeError();
    kept += *quiet;
  }
  // Every kept move made the step faster, so the plan is never worse; this
  // only guards the invariant.
  if (currentEval.stepUs > start.eval.stepUs) {
    restore(start);
    notes.assign(acts.size(), "");
    return 0u;
  }
  return kept;
}

llvm::Error Solver::refineSolution(AutoSolution &solution,
                                   const StepAbove &stepAbove) {
  if (!solution.feasible)
    return llvm::Error::success();
  current = solution.decisions;
  currentHints =
      chosenHints.empty() ? std::vector<CopyHint>(acts.size()) : chosenHints;
  currentEval = solution.evaluation;
  offloadedBytes = 0;
  for (size_t a = 0; a < acts.size(); ++a)
    if (current[a] == Decision::Offload)
      offloadedBytes += acts[a].bytes;
  // Near the least peak the ladder reaches, the packer has the least
  // slack: plans refined to the same peak by widened copies packed above
  // the budget there (the least budget `lethe plan` reports rose 2.8% on
  // ConvNeXt-T and 1.7% on MobileNet-V3), so none is widened within
  // kNoWidenLevels levels of it.
  widenCopies =
      currentEval.peakBytes >
      (refineLeastPeak >= 0 ? refineLeastPeak : solution.leastPeakBytes) +
          kNoWidenLevels * stepBytes;
  // The peak may not rise above the chosen plan's: a plan filled to the
  // budget's byte packs above it more often, and compiling then plans again
  // at lower budgets (mamba's least search ran over 20 minutes where it ran
  // 1); and every budget that chooses this plan refines it alike.
  std::vector<std::string> notes;
  // The floor is the unrefined step of a member above; the plan the next
  // budget up gets is at most that, and often faster (refined itself).
  // Where the floor first turns a move down, that plan's step becomes the
  // floor (a run floored there from the start takes the same moves up to
  // that point), but not near the least peak, where the packer has the
  // least slack (the least budget `lethe plan` reports rose 1.0% on
  // MobileNet-V3 and 0.6% on Swin-T with it there).
  const bool floored = stepAbove && nextPeakAbove >= 0 && widenCopies;
  // That solve depends on nothing refine does: where the searches fork and
  // it replays the family's ladder (reads it only), it runs beside refine
  // from the start, and is discarded where refine never asks for it.
  // Only on the plan returned: the solves nested deeper are asked lazily.
  std::optional<std::optional<FloorNear>> aheadStep;
  std::optional<Forked> ahead;
  if (floored && answersAgain && forks() && usedFamily &&
      usedFamily->replay(nextPeakAbove).end)
    ahead.emplace(*workers, evaluator, [&]() -> llvm::Error {
      llvm::Expected<std::optional<FloorNear>> above =
          stepAbove(nextPeakAbove, 0, -std::numeric_limits<double>::infinity());
      if (!above)
        return above.takeError();
      aheadStep = *above;
      return llvm::Error::success();
    });
  auto lowerFloor = [&](unsigned limit,
                        double stepUs) -> llvm::Expected<FloorNear> {
    // A limited solve is not the one made ahead: the plan would then
    // depend on the threads.
    llvm::Expected<std::optional<FloorNear>> above =
        ahead && !limit ? std::optional<FloorNear>()
                        : stepAbove(nextPeakAbove, limit, stepUs);
    if (ahead && !limit) {
      if (llvm::Error err = ahead->join())
        return std::move(err);
      above = *aheadStep;
    }
    if (!above)
      return above.takeError();
    if (!*above)
      return FloorNear{refineFloor, true};
    return FloorNear{std::min(refineFloor, (*above)->value), (*above)->exact};
  };
  llvm::Expected<unsigned> kept =
      refine(std::min(options.budgetBytes, currentEval.peakBytes), refineFloor,
             notes, floored ? LowerFloor(lowerFloor) : nullptr);
  if (!kept)
    return kept.takeError();
  if (*kept > 0) {
    solution.evaluation = currentEval;
    solution.decisions = current;
    for (size_t a = 0; a < acts.size(); ++a)
      solution.decisions[a] =
          solution.evaluation.placement->decisions[a].decision;
    solution.chosen +=
        llvm::formatv(", refined ({0} move{1})", *kept, *kept == 1 ? "" : "s")
            .str();
  }
  // A solve nested for a floor is read for its step alone (solveAt): its
  // plan is left unexplained (0.3-0.4 ms a solve on Llama-8l).
  if (answersAgain && (*kept > 0 || reasonsDeferred))
    explainAll(solution, notes);
  return llvm::Error::success();
}

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
// evaluation, the fastest plan kept (docs/Planner.md, "Refining").
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"
#include "PlannerUtils.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <set>

using namespace lethe;
using namespace lethe::autosolver;

/// Whole-step evaluations one refinement may make. A corpus solve makes
/// hundreds (BERT at 40%: 941, Mamba at its least: 164; docs/Planner.md,
/// "Evaluations asked for again"), so this costs a few percent of the solve
/// on those graphs; the moves that helped on the corpus were found within
/// the first 30 (bench/results/bound.md, 2026-11-26 21:00).
constexpr unsigned kRefineEvaluations = 48;
/// Retained activations searched for the partner of a pair per move: the
/// cheapest droppable one that frees the ops the first move overfills.
constexpr size_t kPairSearches = 24;

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
                                        std::vector<std::string> &notes) {
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
      return acts[a].offloadable && offloadedBytes + acts[a].bytes <=
                                        options.hostBudgetBytes;
    return true;
  };

  const State start = save();
  std::set<std::array<int32_t, 4>> tried;
  unsigned evaluations = 0, kept = 0;
  bool changed = true;
  while (changed && evaluations < kRefineEvaluations) {
    changed = false;
    const Placement &placement = *currentEval.placement;
    const Positions pos = index(currentEval);
    MaxTree tree;
    tree.build(currentEval.memory.deviceAtOp);
    llvm::ArrayRef<int64_t> memory = currentEval.memory.deviceAtOp;
    llvm::DenseMap<uint64_t, int32_t> users;
    for (size_t a = 0; a < acts.size(); ++a) {
      const ActivationDecision &d = placement.decisions[a];
      if (current[a] != Decision::Retain)
        for (NodeId node : d.recomputeNodes)
          ++users[(uint64_t(d.firstBackwardUse) << 32) | uint32_t(node)];
    }
    // The ops where `a` is off the device now (retaining it adds its bytes
    // there), or where it would be if dropped: its forward life's end to
    // its restore point.
    auto absentOps = [&](size_t a) -> std::pair<size_t, size_t> {
      const ActivationDecision &d = placement.decisions[a];
      if (current[a] == Decision::Offload && pos.releaseOp[a] >= 0 &&
          pos.prefetchOp[a] > pos.releaseOp[a])
        return {pos.releaseOp[a] + 1, pos.prefetchOp[a] - 1};
      NodeId restore = current[a] == Decision::Retain
                           ? (pos.needNode[a] >= 0 ? pos.needNode[a]
                                                   : acts[a].firstBackwardUse)
                           : d.firstBackwardUse;
      if (restore < 0 || restore <= acts[a].lastForwardUse)
        return {1, 0};
      return {static_cast<size_t>(pos.nodeOp[acts[a].lastForwardUse]) + 1,
              static_cast<size_t>(pos.regionStart[restore]) - 1};
    };

    // Retained activations that may be dropped, cheapest first: the
    // partners of the pairs.
    struct Partner {
      double cost;
      int32_t act;
      Decision decision;
    };
    std::vector<Partner> partners;
    for (size_t a = 0; a < acts.size(); ++a) {
      if (current[a] != Decision::Retain)
        continue;
      auto [lo, hi] = absentOps(a);
      if (lo > hi)
        continue;
      for (Decision d : {Decision::Recompute, Decision::Offload})
        if (allowed(a, d))
          partners.push_back({costOf(a, d), static_cast<int32_t>(a), d});
    }
    llvm::sort(partners, [&](const Partner &x, const Partner &y) {
      double bx = x.cost / static_cast<double>(acts[x.act].bytes);
      double by = y.cost / static_cast<double>(acts[y.act].bytes);
      if (bx != by)
        return bx < by;
      return std::make_pair(x.act, int(x.decision)) <
             std::make_pair(y.act, int(y.decision));
    });

    std::vector<Move> moves;
    size_t pairSearches = 0;
    std::vector<std::pair<double, int32_t>> dropped;
    for (size_t a = 0; a < acts.size(); ++a)
      if (current[a] != Decision::Retain)
        dropped.push_back({-costNow(a, users), static_cast<int32_t>(a)});
    llvm::sort(dropped);
    for (auto [negCost, a] : dropped) {
      const double now = -negCost;
      const int64_t bytes = acts[a].bytes;
      // The other kind of drop: about the same bytes over the same gap.
      Decision other = current[a] == Decision::Recompute ? Decision::Offload
                                                         : Decision::Recompute;
      if (allowed(a, other) && now - costOf(a, other) > 0.0)
        moves.push_back({{{a, other}}, now - costOf(a, other), bytes});
      if (now <= 0.0)
        continue;
      // Retained: fits where the ops it is absent from have room.
      auto [lo, hi] = absentOps(a);
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
      int64_t excess = tree.maxIn(first, last) + bytes - cap;
      for (const Partner &p : partners) {
        if (p.cost >= now)
          break;
        if (acts[p.act].bytes < excess)
          continue;
        auto [plo, phi] = absentOps(p.act);
        if (plo <= first && last <= phi) {
          moves.push_back({{{a, Decision::Retain}, {p.act, p.decision}},
                           now - p.cost,
                           bytes + acts[p.act].bytes});
          break;
        }
      }
    }
    // Most step time saved per byte moved first (bytes are what the budget
    // rations), then in a fixed order.
    llvm::stable_sort(moves, [](const Move &x, const Move &y) {
      if (x.score() != y.score())
        return x.score() > y.score();
      return x.key() < y.key();
    });

    for (const Move &move : moves) {
      if (evaluations >= kRefineEvaluations)
        break;
      if (!tried.insert(move.key()).second)
        continue;
      std::vector<Decision> trial = current;
      std::vector<CopyHint> trialHints = currentHints;
      int64_t host = offloadedBytes;
      for (auto [a, d] : move.changes) {
        host += (d == Decision::Offload) * acts[a].bytes -
                (trial[a] == Decision::Offload) * acts[a].bytes;
        trial[a] = d;
        trialHints[a] = CopyHint();
      }
      ++evaluations;
      llvm::Expected<Evaluation> eval = evaluator.evaluate(trial, trialHints);
      if (!eval)
        return eval.takeError();
      if (eval->peakBytes > cap ||
          eval->hostPeakBytes > options.hostBudgetBytes ||
          !(eval->stepUs < currentEval.stepUs) || eval->stepUs < floor)
        continue;
      const double saved = currentEval.stepUs - eval->stepUs;
      for (auto [a, d] : move.changes)
        notes[a] = llvm::formatv("refined: was {0} in the plan chosen; the change "
                                 "saves {1} of step time",
                                 decisionName(current[a]),
                                 planner::humanUs(saved))
                       .str();
      current = std::move(trial);
      currentHints = std::move(trialHints);
      currentEval = std::move(*eval);
      offloadedBytes = host;
      ++kept;
      changed = true;
      break;
    }
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

llvm::Error Solver::refineSolution(AutoSolution &solution) {
  if (!solution.feasible)
    return llvm::Error::success();
  current = solution.decisions;
  currentHints = chosenHints.empty() ? std::vector<CopyHint>(acts.size())
                                     : chosenHints;
  currentEval = solution.evaluation;
  offloadedBytes = 0;
  for (size_t a = 0; a < acts.size(); ++a)
    if (current[a] == Decision::Offload)
      offloadedBytes += acts[a].bytes;
  std::vector<std::string> notes;
  llvm::Expected<unsigned> kept = refine(options.budgetBytes, 0.0, notes);
  if (!kept)
    return kept.takeError();
  if (*kept == 0)
    return llvm::Error::success();
  solution.evaluation = currentEval;
  solution.decisions = current;
  for (size_t a = 0; a < acts.size(); ++a)
    solution.decisions[a] =
        solution.evaluation.placement->decisions[a].decision;
  solution.chosen += llvm::formatv(", refined ({0} move{1})", *kept,
                                   *kept == 1 ? "" : "s")
                         .str();
  solution.reasons.resize(acts.size());
  for (size_t a = 0; a < acts.size(); ++a) {
    solution.reasons[a] = explain(a, solution.decisions, solution.evaluation);
    if (!notes[a].empty())
      solution.reasons[a] += " [" + notes[a] + "]";
  }
  return llvm::Error::success();
}

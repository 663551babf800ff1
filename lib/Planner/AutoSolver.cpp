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
// (trySingles, AutoSolverSearch.cpp). The candidates and their prices are in
// AutoSolverCandidates.cpp, the reasons given for each decision in
// AutoSolverExplain.cpp, the tied picks and descent in RepeatedLayers.cpp.
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

using namespace lethe;
using namespace lethe::autosolver;

namespace {

/// Ladder members below the plan chosen that refining reads (how far the
/// ladder goes below it, what building it took).
constexpr unsigned kRefineBelow = 3;
/// Two members far apart are searched between (plansBetween) only where
/// the lower one's step is slower by more than this share of the upper's:
/// such gaps are common on convolutional steps, whose single activations
/// hold several levels (ResNet-50: 100 MB against 28 MB levels), but there
/// the lower member costs 0.1-0.3% more, and searching them doubled the
/// solve at 40-90% (bench/results/planner-exact.md, 2026-11-26).
constexpr double kBetweenMinGain = 0.01;
/// Swaps tried one after another where the ladder ends (swapBelow): each
/// costs up to 32 evaluations, once per solve that builds the whole ladder.
constexpr unsigned kSwapBelowRounds = 4;
/// reduceTo calls kept for reuse: a probe's descents (kProbeLevels, 3) are
/// asked for again by the next level's greedy and probe; older ones are not
/// (and each kept one holds an evaluation's schedule).
constexpr size_t kKeptReductions = 4;

} // namespace

llvm::Expected<bool> Solver::reduceTo(int64_t level, bool keep,
                                      const ReduceKeeps &keeps) {
  // A caller may hand over a plan evaluated for its memory only (it goes
  // down from there); the plan reduceTo leaves is simulated as far as the
  // caller keeps it.
  auto simulateLeft = [&](bool reached) -> llvm::Error {
    if (keeps.memoryOnly || (keeps.onlyReached && !reached))
      return llvm::Error::success();
    return evaluator.simulateWithin(currentEval, keeps.fasterThanUs);
  };
  if (currentEval.peakBytes <= level) {
    if (llvm::Error err = simulateLeft(true))
      return std::move(err);
    return true;
  }
  // The search flags reduceTo reads, as one key.
  const unsigned flags = (freeOnly ? 1u : 0u) | (noTrades ? 2u : 0u) |
                         (tying ? 4u : 0u) | (partialTies ? 8u : 0u);
  for (const Reduction &r : reductions)
    if (r.level == level && r.flags == flags && r.offloaded == offloadedBytes &&
        r.decisions == current && r.hints == currentHints) {
      restore(r.result);
      reusedEvaluations += r.evaluations;
      return r.reached;
    }
  if (!keep) {
    llvm::Expected<bool> reached = reduceToAfresh(level);
    if (!reached)
      return reached.takeError();
    if (llvm::Error err = simulateLeft(*reached))
      return std::move(err);
    return *reached;
  }
  Reduction r;
  r.decisions = current;
  r.hints = currentHints;
  r.offloaded = offloadedBytes;
  r.level = level;
  r.flags = flags;
  const size_t before = evaluator.getEvaluations();
  llvm::Expected<bool> reached = reduceToAfresh(level);
  if (!reached)
    return reached.takeError();
  if (llvm::Error err = evaluator.simulate(currentEval))
    return std::move(err);
  r.result = save();
  r.reached = *reached;
  r.evaluations = evaluator.getEvaluations() - before;
  if (reductions.size() == kKeptReductions)
    reductions.erase(reductions.begin());
  reductions.push_back(std::move(r));
  return *reached;
}

llvm::Expected<bool> Solver::reduceToAfresh(int64_t level) {
  MaxTree &tree = greedyTree;
  for (unsigned iter = 0; iter < 64; ++iter) {
    if (currentEval.peakBytes <= level)
      return true;
    std::shared_ptr<const Positions> indexed = index(currentEval);
    const Positions &pos = *indexed;
    tree.build(currentEval.memory.deviceAtOp);
    planner::CopyModel copies(analysis, device, *currentEval.placement,
                              currentHints);
    Batch &batch = greedyBatch;
    prepareBatch(pos, currentEval, current, batch);
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
          candidatesAt(op, pos, currentEval, batch, copies, 16, overLevel,
                       /*bestRecomputeOnly=*/true);
      if (cands.empty())
        break;
      // A copy: the candidate lists are rebuilt as picks change them.
      Candidate best = *bestCandidate(cands, &batch);
      llvm::SmallVector<Candidate, 1> picks = {best};
      if (tying)
        appendTiedPicks(op, pos, batch, copies,
                        partialTies ? tree.max() - level - best.benefit
                                    : std::numeric_limits<int64_t>::max(),
                        picks);
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
      // Judged by its memory alone; simulated only if it ends the descent.
      llvm::Expected<Evaluation> eval =
          evaluator.evaluate(next, nextHints, EvaluationLimits::memoryOnly());
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
    recountOffloaded();
    // A batch that picked nothing (no candidate at its first op, the peak
    // op) left itself and the copy model as prepared for this plan:
    // trySingles judges the same op with them, their copy what-ifs made
    // once (on Swin-T's least budget most of the greedy's calls from
    // swapCostly).
    llvm::Expected<bool> single =
        any ? trySingles(pos, level) : trySingles(pos, level, &batch, &copies);
    if (!single)
      return single.takeError();
    if (!*single)
      return false;
  }
  return currentEval.peakBytes <= level;
}

llvm::Error Solver::buildLadder(int64_t budget, int64_t baselinePeak,
                                AutoFamily &family, bool resume,
                                std::optional<size_t> firstFit) {
  std::vector<Member> &ladder = family.ladder;
  auto record = [&](unsigned level) {
    Member m;
    m.decisions = current;
    m.hints = currentHints;
    m.peak = currentEval.peakBytes;
    m.step = currentEval.stepUs;
    m.level = level;
    ladder.push_back(std::move(m));
  };
  // Where the loop below checks its end: what a later solve replays
  // (AutoFamily::replay).
  auto check = [&] {
    family.checks.push_back({ladder.size(), solveEvaluations()});
  };
  unsigned j = family.nextLevel;
  // Only the ladder's own searches read and write the memo (not a
  // restart's: its plan is a member, the ladder goes on from its own).
  memo = resume ? family.resumeMemo : LadderMemo();
  LadderMemo *const levelMemo = solverOptions.ladderMemo ? &memo : nullptr;
  if (!resume) {
    record(0);
    // Seeds first: the ladder falls back on them where the greedy is stuck.
    // Their memory only: a seed's step is read where it fits the budget or
    // a level (then simulated whole) or may floor refine (simulated only as
    // far as that reads it); most seeds of a solve are neither (~3% of a
    // 10k-op solve simulated them all).
    for (const AutoSeed &seed : seeds) {
      llvm::Expected<Evaluation> eval = evaluator.evaluate(
          seed.decisions, {}, EvaluationLimits::memoryOnly());
      if (!eval)
        return eval.takeError();
      family.seedEvals.push_back(std::move(*eval));
    }
    j = 1;
  }
  llvm::ArrayRef<Evaluation> seedEvals = family.seedEvals;
  // The family's member i is the fastest of ladder plans i to i +
  // kLookBelow and the plans between them (all fit level i): the greedy is
  // path-dependent, and a plan a few levels down is at times faster than the
  // one found at the level. So the ladder is built kLookBelow plans past the
  // first that fits.
  if (!resume) {
    if (ladder.back().peak <= budget)
      firstFit = 0;
    check();
  }
  for (; !firstFit || ladder.size() <= *firstFit + kLookBelow; ++j) {
    int64_t level = baselinePeak - static_cast<int64_t>(j) * stepBytes;
    if (level < 0) {
      family.complete = true;
      break;
    }
    if (currentEval.peakBytes <= level)
      continue; // this level's member is the previous one
    // Untied, a level reached is simulated by polish, as far as it reads
    // its step; every other path reads the plan's step whole.
    ReduceKeeps keeps;
    keeps.memoryOnly = !tying;
    llvm::Expected<bool> reached = reduceTo(level, /*keep=*/false, keeps);
    if (!reached)
      return reached.takeError();
    if (!*reached || tying)
      if (llvm::Error err = simulateCurrent())
        return err;
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
      // reshape a plan the way a layer policy does).
      State stuck = save();
      llvm::Expected<bool> restarted = restartFromSeed(level, seedEvals);
      if (!restarted)
        return restarted.takeError();
      if (!*restarted) {
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
            return err;
          record(j);
          restore(std::move(reached));
        }
        if (!*late) {
          // The greedy got part of the way and nothing goes further: the
          // last member lies between two levels (else the least peak the
          // ladder reaches stays a level above the one it got to).
          if (currentEval.peakBytes < ladder.back().peak) {
            if (llvm::Error err = polishFully(currentEval.peakBytes))
              return err;
            record(j);
          }
          // One decision traded for another can still lower the peak where
          // no single one does (AutoSolverBetween.cpp): each such plan is a
          // member below the last.
          if (current != ladder.back().decisions ||
              currentHints != ladder.back().hints)
            if (llvm::Error err =
                    startFrom(ladder.back().decisions, ladder.back().hints))
              return err;
          for (unsigned round = 0; round < kSwapBelowRounds; ++round) {
            llvm::Expected<bool> lower = swapBelow(ladder.back().peak);
            if (!lower)
              return lower.takeError();
            if (!*lower)
              break;
            if (llvm::Error err = polishFully(currentEval.peakBytes))
              return err;
            record(j);
          }
          family.complete = true;
          break;
        }
      }
    }
    // While tied, a level's plan is the greedy's: the searches below act on
    // single activations, and would untie the plan one level at a time.
    if (!tying)
      if (llvm::Error err = searchLevel(level, levelMemo))
        return err;
    if (!tying) {
      // The member is the plan restarted from the seeds where the greedy's
      // is slower, with its costliest decisions flipped where that is
      // faster, but never faster than a member above (a larger budget would
      // not see it: AutoMonotoneTest); the ladder goes on from the plan the
      // greedy built, whose path neither changes (going on from the
      // restart, 65 of 4,631 random-graph plans were slower, by up to 25
      // points, and 9036 rose with the budget at 1% steps).
      double floor = 0.0;
      for (const Member &m : ladder)
        floor = std::max(floor, m.step);
      State path = save();
      if (*reached)
        if (llvm::Error err =
                restartWhereSlower(level, ladder.back().step, family.seedEvals))
          return err;
      if (llvm::Error err = flipCostly(level, floor, levelMemo))
        return err;
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
        if (llvm::Error err = startFrom(above.decisions, above.hints))
          return err;
        ladder.resize(*firstFit);
        firstFit.reset();
        // A tied pick jumps many levels: the untied ladder would refine all
        // of them. The partially tied greedy goes straight to the level
        // above the budget, and the untied ladder starts there.
        llvm::Expected<std::optional<unsigned>> landed =
            descendTied(j, baselinePeak);
        if (!landed)
          return landed.takeError();
        if (*landed) {
          j = **landed;
          record(j);
          if (ladder.back().peak <= budget)
            firstFit = ladder.size() - 1;
        }
        tying = false;
      }
    }
    check();
  }
  if (family.complete) {
    check();
  } else {
    // Where a solve at a lower budget goes on.
    family.resume = save();
    family.resumeMemo = memo;
    family.nextLevel = j;
  }
  return llvm::Error::success();
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

  stepBytes = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(solverOptions.levelStep *
                                           static_cast<double>(baselinePeak))));
  // The ladder of an earlier solve of this step (at another budget): taken
  // as far as this budget's ladder goes, and built on where it stops short.
  AutoFamily local;
  AutoFamily *family = tying ? nullptr : solverOptions.family;
  if (family) {
    AutoFamily::Inputs inputs{acts.size(),
                              baselinePeak,
                              currentEval.stepUs,
                              options.hostBudgetBytes,
                              solverOptions.levelStep,
                              solverOptions.latePrefetch,
                              solverOptions.chainReaders,
                              solverOptions.recomputeChainInput,
                              solverOptions.ladderMemo,
                              {}};
    for (const AutoSeed &seed : seeds)
      inputs.seeds.push_back(seed.decisions);
    if (family->inputs != inputs) {
      *family = AutoFamily();
      family->inputs = std::move(inputs);
    }
  }
  AutoFamily &built = family ? *family : local;
  usedFamily = family;
  AutoFamily::Replay replay = built.replay(budget);
  if (answersAgain && family && replay.end && family->solved &&
      family->solved->budget == budget &&
      family->solved->refined == solverOptions.refine) {
    solvedAgain = true;
    AutoSolution again = family->solved->solution;
    again.reusedMembers = built.checks[*replay.end].members;
    return again;
  }
  if (replay.end) {
    solution.reusedMembers = built.checks[*replay.end].members;
  } else {
    const bool resume = !built.checks.empty();
    if (resume) {
      solution.reusedMembers = built.ladder.size();
      restore(built.resume);
      reusedEvaluations += built.checks.back().evaluations - solveEvaluations();
    }
    if (llvm::Error err =
            buildLadder(budget, baselinePeak, built, resume, replay.firstFit)) {
      // A ladder cut short by an error has no place to go on from.
      built = AutoFamily();
      return std::move(err);
    }
    replay.end = built.checks.size() - 1;
  }
  const AutoFamily::Check &end = built.checks[*replay.end];
  // The evaluations a solve without the family had made by now.
  reusedEvaluations += end.evaluations - solveEvaluations();
  std::vector<Member> ladder(built.ladder.begin(),
                             built.ladder.begin() + end.members);
  std::vector<Evaluation> seedEvals = built.seedEvals;
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
  // Plans between two members far apart (AutoSolverBetween.cpp), keyed as
  // no faster than the member above them: a budget the member above fits
  // never prefers one, and their keys grow along the ladder as the
  // members' do, so the family stays one whatever the budget. Not on a
  // tied ladder: its graphs' activations are small against a level.
  std::vector<std::pair<size_t, BetweenPlan>> between;
  if (solverOptions.tiedClasses.empty()) {
    for (size_t i = 0; i + 1 < ladder.size(); ++i) {
      if (ladder[i].peak - ladder[i + 1].peak <= 2 * stepBytes)
        continue;
      // A plan one decision below the upper member is rarely faster than
      // it, so what a gap can gain is about the step the lower one adds.
      if (ladder[i + 1].step - ladder[i].step <=
          kBetweenMinGain * ladder[i].step)
        continue;
      llvm::Expected<std::vector<BetweenPlan>> plans =
          plansBetween(ladder[i].decisions, ladder[i].hints, ladder[i + 1].peak,
                       ladder[i + 1].step);
      if (!plans)
        return plans.takeError();
      for (BetweenPlan &plan : *plans)
        between.push_back({i, std::move(plan)});
    }
  }
  // Member i is the fastest of the ladder plans i to i + kLookBelow and the
  // plans between them: all fit level i, and one found between two members
  // can be faster than the member above it as well as lower (a random graph:
  // 2441 us one decision below a member of 2566 us). Outside the window it
  // was chosen only below that member's peak, a larger budget got the slower
  // member, and the overhead rose with the budget.
  std::vector<double> keys(ladder.size());
  bool fitted = false;
  double key = 0.0;
  size_t nextBetween = 0; // the first plan between members i and i + 1
  for (size_t i = 0; i < ladder.size(); ++i) {
    while (nextBetween < between.size() && between[nextBetween].first < i)
      ++nextBetween;
    Scored fastest{ladder[i].step, 0, i};
    int64_t fastestPeak = ladder[i].peak;
    for (size_t k = i + 1; k < ladder.size() && k <= i + kLookBelow; ++k)
      if (ladder[k].step < fastest.key) {
        fastest = {ladder[k].step, 0, k};
        fastestPeak = ladder[k].peak;
      }
    for (size_t b = nextBetween;
         b < between.size() && between[b].first < i + kLookBelow; ++b)
      if (between[b].second.step < fastest.key) {
        fastest = {between[b].second.step, 2, b};
        fastestPeak = between[b].second.peak;
      }
    key = std::max(key, fastest.key);
    keys[i] = key;
    if (!fitted && fastestPeak <= budget) {
      consider({key, fastest.rank, fastest.index});
      fitted = true;
    }
  }
  for (size_t i = 0; i < seeds.size(); ++i)
    if (seedEvals[i].peakBytes <= budget && hostFits(seedEvals[i])) {
      if (llvm::Error err = evaluator.simulate(seedEvals[i]))
        return std::move(err);
      consider({seedEvals[i].stepUs, 1, i});
    }
  // Only where it is faster than the plan the family gave: its key may be
  // below a ladder member's whose own step is under its key.
  auto chosenStepOf = [&](const Scored &s) {
    return s.rank == 1   ? seedEvals[s.index].stepUs
           : s.rank == 2 ? between[s.index].second.step
                         : ladder[s.index].step;
  };
  const std::optional<Scored> familyChoice = best;
  for (auto [k, entry] : llvm::enumerate(between))
    if (entry.second.peak <= budget &&
        (!familyChoice || entry.second.step < chosenStepOf(*familyChoice)))
      consider({std::max(keys[entry.first], entry.second.step), 2, k});

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
      if (llvm::Error err = evaluator.simulate(seedEvals[bestSeed]))
        return std::move(err);
      solution.decisions = seeds[bestSeed].decisions;
      solution.reasons = seeds[bestSeed].getReasons();
      solution.evaluation = std::move(seedEvals[bestSeed]);
      solution.chosen = "seed " + seeds[bestSeed].name;
      return solution;
    }
    best = Scored{0.0, 0, ladder.size() - 1};
  } else {
    solution.feasible = true;
  }
  // refineSolution may not make the plan faster than one a larger budget
  // gets unrefined: those of the family above the budget no slower than it.
  const double chosenStep = best->rank == 1   ? seedEvals[best->index].stepUs
                            : best->rank == 2 ? between[best->index].second.step
                                              : ladder[best->index].step;
  // Refining reads the ladder below the plan chosen: how far the ladder goes
  // below it (whether copies are widened) and what building it to there
  // took (refine's evaluations). Both are read kRefineBelow members below the
  // chosen one, built here where this budget's ladder stops short of that:
  // read where this budget's ladder ends, they differed between budgets
  // that choose the same plan, and so did its refinement (one of 300 random
  // graphs slower at a larger budget).
  refineLeastPeak = -1;
  refineEvaluationBase = 0;
  if (family && best->rank != 1) {
    const size_t anchor =
        best->rank == 2 ? between[best->index].first : best->index;
    const size_t want = anchor + kRefineBelow + 1;
    if (built.ladder.size() < want && !built.complete) {
      // Built as a solve at a budget just under the chosen plan's peak
      // builds it; not counted in this solve's evaluations.
      const size_t before = solveEvaluations();
      State chosen = save();
      const int64_t deeper = built.ladder[anchor].peak - 1;
      AutoFamily::Replay more = built.replay(deeper);
      if (!more.end) {
        restore(built.resume);
        // Counted on from the last check, as a solve that resumes the
        // ladder counts (the checks' evaluations are refine's budget).
        reusedEvaluations +=
            built.checks.back().evaluations - solveEvaluations();
        if (llvm::Error err = buildLadder(deeper, baselinePeak, built,
                                          /*resume=*/true, more.firstFit)) {
          built = AutoFamily();
          return std::move(err);
        }
      }
      restore(std::move(chosen));
      reusedEvaluations += before - solveEvaluations();
    }
    const size_t below = std::min(want, built.ladder.size());
    int64_t least = built.ladder[anchor].peak;
    for (size_t j = anchor + 1; j < below; ++j)
      least = std::min(least, built.ladder[j].peak);
    for (const Evaluation &eval : seedEvals)
      if (hostFits(eval))
        least = std::min(least, eval.peakBytes);
    refineLeastPeak = least;
    for (const AutoFamily::Check &check : built.checks)
      if (check.members >= below) {
        refineEvaluationBase = check.evaluations;
        break;
      }
  }
  refineFloor = 0.0;
  for (const Member &m : ladder)
    if (m.peak > budget && m.step <= chosenStep)
      refineFloor = std::max(refineFloor, m.step);
  for (const auto &[i, plan] : between)
    if (plan.peak > budget && plan.step <= chosenStep)
      refineFloor = std::max(refineFloor, plan.step);
  for (Evaluation &eval : seedEvals) {
    if (eval.peakBytes <= budget || !hostFits(eval))
      continue;
    // A seed slower than the plan chosen floors nothing: simulated only
    // until that is certain (its step is then +infinity).
    if (llvm::Error err = evaluator.simulateWithin(eval, chosenStep))
      return std::move(err);
    if (eval.stepUs <= chosenStep)
      refineFloor = std::max(refineFloor, eval.stepUs);
  }
  nextPeakAbove = -1;
  auto above = [&](int64_t peak) {
    if (peak > budget && (nextPeakAbove < 0 || peak < nextPeakAbove))
      nextPeakAbove = peak;
  };
  for (const Member &m : ladder)
    above(m.peak);
  for (const auto &[i, plan] : between)
    above(plan.peak);
  for (const Evaluation &eval : seedEvals)
    if (hostFits(eval))
      above(eval.peakBytes);
  if (best->rank == 1) {
    const AutoSeed &seed = seeds[best->index];
    solution.decisions = seed.decisions;
    solution.reasons.clear();
    for (const std::string &reason : seed.getReasons())
      solution.reasons.push_back(reason + " [auto: the " + seed.name +
                                 " plan is the fastest that fits]");
    solution.evaluation = std::move(seedEvals[best->index]);
    solution.chosen = "seed " + seed.name;
    return solution;
  }
  if (best->rank == 2) {
    const auto &[i, plan] = between[best->index];
    Member m;
    m.decisions = plan.decisions;
    m.hints = plan.hints;
    m.level = ladder[i].level;
    ladder.push_back(std::move(m));
    best->index = ladder.size() - 1;
  }
  const Member &member = ladder[best->index];
  chosenHints = member.hints;
  solution.decisions = member.decisions;
  llvm::Expected<Evaluation> eval =
      evaluator.evaluate(member.decisions, member.hints);
  if (!eval)
    return eval.takeError();
  solution.evaluation = std::move(*eval);
  for (size_t a = 0; a < acts.size(); ++a)
    solution.decisions[a] =
        solution.evaluation.placement->decisions[a].decision;
  solution.chosen =
      llvm::formatv(best->rank == 2 ? "one decision below ladder level {0}"
                                    : "ladder level {0}",
                    member.level)
          .str();
  // A feasible plan is refined next, which explains it as it ends up
  // (explaining a plan of 25,000 activations is ~1% of a `lethe plan`).
  reasonsDeferred = solverOptions.refine && solution.feasible;
  if (!reasonsDeferred)
    explainAll(solution);
  return solution;
}

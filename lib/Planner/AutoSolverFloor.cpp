//===- AutoSolverFloor.cpp - Refine's floor from the budgets above --------===//
//
// Refine never makes a plan faster than the plan `auto` returns at the next
// budget up, which keeps the overhead non-increasing in the budget; that
// step comes from a solve at that budget, nested (solveAt), which may nest
// one level further itself (docs/Planner.md, "The floor from the next
// budget up"). The plan returned reads the floor's value (the quiet
// prefetches take a share of their moves by it), so its nested solve runs
// to its end; a nested solve's refine only compares its trials' steps with
// the floor, so the solve it nests is asked lazily: run only until its step
// is at most the trial's, and not at all where a bound under its step
// already says the trial is under it (docs/Planner.md, "The floor asked
// lazily").
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include <map>

using namespace lethe;
using namespace lethe::autosolver;

namespace {

/// Solves nested for refining's floor (solveAt), one inside the other: each
/// costs about a refine (the ladder is replayed) and is made only where the
/// floor turns a move down. On the Llama-style graph at 50%: 11.47% with
/// none, 11.47% with 1, 11.07% with 2, 10.96% with 3, the solve 290, 316,
/// 349 and 376 ms (bench/results/bound.md, 2026-11-27); on DiT-B/2 at 50%
/// 7.85% with 2, 7.56% with 3 and 4 (bench/results/bound.md, 2026-11-27
/// 11:07).
constexpr unsigned kFloorDepth = 3;
/// Runs of a lazily asked solve stopped at a trial's step before one runs to
/// its end: each replays the moves of the last (the same moves, their
/// trials mostly answered by the verdicts) before going further.
constexpr unsigned kPartialRuns = 3;
/// None where the solve's refine may make fewer evaluations than this: run
/// whole it costs little more than a run stopped short (ConvNeXt-T at 60%,
/// refines of about 40 evaluations: 32 ms on main, 38 with partial runs).
constexpr unsigned kMinPartialRunEvaluations = 64;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// How far down a lazily asked solve's refine was seen to go.
struct LazyStep {
  double least = kInfinity;
  /// Run to its end: `least` is its step.
  bool complete = false;
  bool feasible = true;
  /// No run of it ends under this (floorBound).
  std::optional<double> bound;
  unsigned runs = 0;
  /// Its refine's evaluations (Solver::refineBudget).
  unsigned refineBudget = 0;
};

/// What the solves nested for the floor share with the solve they serve.
struct Nesting {
  const Evaluator &evaluator;
  llvm::ArrayRef<AutoSeed> seeds;
  const AutoSolverOptions &solver;
  Verdicts *verdicts;
  Workers *workers;
  /// What each lazily asked solve (budget, depth) told, kept for all that
  /// ask it: the solve of a budget at a depth is the same whoever asks, and
  /// a run of a solve stopped short and made again asks its own alike.
  /// Read by one thread at a time (the solve made ahead beside refine is
  /// the returned plan's, whose refine asks none lazily).
  std::map<std::pair<int64_t, unsigned>, LazyStep> &asked;
};

} // namespace

/// PlanOptions::threads for a solve on `evaluator`: an evaluation cache is
/// not shared across threads, so with one the solve uses one.
static unsigned planThreads(const Evaluator &evaluator,
                            const PlanOptions &options) {
  if (!evaluator.getCache().keepsNothing())
    return 1;
  return Workers::choose(options.threads, kMaxPlanThreads);
}

/// A bound under the step solveAt(`options`, `depth`) returns: its refine
/// never goes under its floor, which a solve nested at the next budget up
/// lowers at most to that solve's step, bounded alike (+infinity where no
/// plan fits: the floor is then not lowered).
static llvm::Expected<double> floorBound(const Nesting &n, PlanOptions options,
                                         unsigned depth) {
  LazyStep &lazy = n.asked[{options.budgetBytes, depth}];
  if (lazy.bound)
    return *lazy.bound;
  Solver fast(n.evaluator, options, n.seeds, n.solver);
  fast.setVerdicts(n.verdicts);
  fast.setWorkers(n.workers);
  llvm::Expected<AutoSolution> solution = fast.solve();
  if (!solution)
    return solution.takeError();
  if (!solution->feasible)
    return kInfinity;
  lazy.refineBudget = fast.refineBudget();
  double bound = fast.getRefineFloor();
  if (depth < kFloorDepth && fast.getNextPeakAbove() >= 0) {
    options.budgetBytes = fast.getNextPeakAbove();
    llvm::Expected<double> above = floorBound(n, options, depth + 1);
    if (!above)
      return above.takeError();
    bound = std::min(bound, *above);
  }
  lazy.bound = bound;
  return bound;
}

/// Solves at the budget of `options`; where refining meets its floor and
/// `depth` < kFloorDepth, solves at the next budget up (depth + 1, the
/// ladder replayed from `solver.family`) for the floor (refineSolution).
/// Refine stops once its step is at most `stopUs` (`stoppedShort` set).
static llvm::Expected<AutoSolution>
solveAt(const Nesting &n, const PlanOptions &options, unsigned depth,
        unsigned refineLimit = 0, double stopUs = -kInfinity,
        bool *stoppedShort = nullptr) {
  Solver fast(n.evaluator, options, n.seeds, n.solver);
  fast.setVerdicts(n.verdicts);
  fast.setWorkers(n.workers);
  fast.setRefineLimit(refineLimit);
  fast.setRefineStop(stopUs);
  // The solves nested for the floor refine otherwise: only the caller's
  // budget is kept and answered again.
  fast.setAnswersAgain(depth == 0);
  llvm::Expected<AutoSolution> solution = fast.solve();
  if (!solution || fast.isSolvedAgain())
    return solution;
  if (!n.solver.refine) {
    fast.keepSolved(*solution);
    return solution;
  }
  auto stepAbove =
      [&](int64_t budget, unsigned limit,
          double stepUs) -> llvm::Expected<std::optional<FloorNear>> {
    PlanOptions above = options;
    above.budgetBytes = budget;
    if (depth == 0) {
      llvm::Expected<AutoSolution> plan = solveAt(n, above, depth + 1, limit);
      if (!plan)
        return plan.takeError();
      if (!plan->feasible)
        return std::nullopt;
      return FloorNear{plan->evaluation.stepUs, true};
    }
    // Asked lazily: every run takes the same moves, so the trial is under
    // the floor exactly where no run reaches its step, nor one run to its
    // end.
    LazyStep &lazy = n.asked[{budget, depth + 1}];
    while (true) {
      if (!lazy.feasible)
        return std::nullopt;
      if (lazy.complete || lazy.least <= stepUs)
        return FloorNear{lazy.least, lazy.complete};
      if (!lazy.bound)
        if (llvm::Error err = floorBound(n, above, depth + 1).takeError())
          return std::move(err);
      if (stepUs < *lazy.bound)
        return FloorNear{*lazy.bound, false};
      bool stopped = false;
      llvm::Expected<AutoSolution> plan =
          solveAt(n, above, depth + 1, 0,
                  lazy.runs++ < kPartialRuns &&
                          lazy.refineBudget >= kMinPartialRunEvaluations
                      ? stepUs
                      : -kInfinity,
                  &stopped);
      if (!plan)
        return plan.takeError();
      lazy.feasible = plan->feasible;
      lazy.least = std::min(lazy.least, plan->evaluation.stepUs);
      lazy.complete = !stopped;
    }
  };
  const bool nest = depth < kFloorDepth && n.solver.family && !refineLimit;
  if (llvm::Error err = fast.refineSolution(
          *solution, nest ? Solver::StepAbove(stepAbove) : nullptr))
    return std::move(err);
  if (stoppedShort)
    *stoppedShort = fast.stoppedShort();
  fast.keepSolved(*solution);
  return solution;
}

llvm::Expected<AutoSolution> lethe::solveAuto(const Evaluator &evaluator,
                                              const PlanOptions &options,
                                              llvm::ArrayRef<AutoSeed> seeds,
                                              const AutoSolverOptions &solver) {
  // The solves for refining's floor replay this solve's ladder.
  AutoFamily local;
  AutoSolverOptions withFamily = solver;
  if (!withFamily.family && withFamily.tiedClasses.empty())
    withFamily.family = &local;
  // What the trials told, for the searches and the nested solves' refines.
  Verdicts verdicts;
  // After the verdicts, which its threads read: they are joined first.
  Workers workers(planThreads(evaluator, options));
  std::map<std::pair<int64_t, unsigned>, LazyStep> asked;
  llvm::Expected<AutoSolution> solution =
      solveAt({evaluator, seeds, withFamily,
               solver.verdicts ? &verdicts : nullptr, &workers, asked},
              options, 0);
  if (solution) {
    solution->knownTrials = verdicts.getAnswered();
    solution->forks = workers.getSpawned();
  }
  return solution;
}

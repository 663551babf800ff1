//===- Plan.h - A retain/recompute/offload plan for a training step -*- C++ -*-===//
//
// The contract between the solvers (fixed policies, the fast `auto` solver,
// the exact MILP), the simulator, the `lethe-plan` pass and the driver.
//
// Memory model (docs/Planner.md has the full statement):
// - The budget covers what the step itself allocates on the device
//   (activations, gradients, temporaries, recompute results and the device
//   buffers of copies in flight); the step's graph inputs (parameters, data,
//   the gradient seed) are resident before it starts and are reported apart.
// - A storage is live from the start of its producing node to the end of its
//   last use through any alias, or to the end of the step if the step
//   returns it. Without a plan this gives the unplanned (baseline) profile,
//   which the lifetime analysis computes too.
// - An *activation* is a storage produced by a forward node and used, through
//   any alias, by a non-forward node. Activations and *checkpoints* (a
//   layer's input the backward does not read, kept to cut the recompute
//   chains that read it; lethe/Planner/Activations.h) get decisions; a kept
//   checkpoint is live until the last chain that reads it has run.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_PLAN_H
#define LETHE_PLANNER_PLAN_H

#include "lethe/Analysis/TrainingGraph.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace lethe {

enum class SolverKind : uint8_t { Auto, Fast, Exact };

/// How the planner's simulations let host copies share time with
/// collectives.
enum class CollectiveCopyModel : uint8_t {
  /// Yield where the device profile says copies and collectives contend
  /// and the graph has collectives (what lethe-schedule's contention=auto
  /// then usually picks), else overlap.
  Auto,
  /// Side by side, slowing each other by the profile's factors.
  Overlap,
  /// Copies pause while a collective runs (SimOptions::
  /// copiesYieldToCollectives: the runtime's yielding copies).
  Yield,
};

struct ActivationDecision;

/// What the evaluator may keep of the evaluations it made, to answer the
/// ones asked for again without placing, scheduling and simulating
/// (Evaluator.h). Off: on the corpus a fifth to two fifths of a solve's
/// evaluations repeat one, but keeping 64 MiB of them made the solve no
/// faster on the development machine (3-4x the page faults: every new
/// schedule then lands on fresh pages; T5 at 40% 1.75x slower, Swin-T at
/// 50% 0.77x; bench/results/corpus.md, 2026-11-26 13:00).
constexpr int64_t kEvaluationCacheBytes = 0;

/// PlanOptions::threads by default at most: the searches fork at most a
/// few trials at a time (Solver::fork), and a fork waits for the one
/// before it.
constexpr unsigned kMaxPlanThreads = 4;

struct PlanOptions {
  /// Bytes of evaluations kept for reuse (0: none). Plans do not depend on
  /// it, only the time they take (EvaluationCacheTest).
  int64_t evaluationCacheBytes = kEvaluationCacheBytes;
  /// Threads the `auto` solver's searches may use, the caller's included
  /// (0: the cores idle when the solve starts, the caller's included, at
  /// most kMaxPlanThreads; 1: the caller's alone). Plans do not depend on
  /// it, only the time they take (docs/Planner.md, "Threads"). One by
  /// default: no speed-up was measured yet (the 2-core machine it was
  /// built on never had a core free), and a second thread sharing a busy
  /// core made solves up to 19% slower. With an evaluation cache the solve
  /// uses one.
  unsigned threads = 1;
  /// Device bytes the step may allocate at any instant.
  int64_t budgetBytes = std::numeric_limits<int64_t>::max();
  Policy policy = Policy::Auto;
  /// every-n: apply `full` to every n-th layer (layers 0, n, 2n, ...) and
  /// retain the activations of the others, as torchtune's selective layer
  /// checkpointing does.
  int everyN = 2;
  /// selective-op: op kinds whose outputs are kept (substring match on the
  /// op name); empty means the default matmul-like and attention kinds.
  std::vector<std::string> keepOpKinds;
  /// selective-op: send the kept outputs to host instead of retaining them.
  bool offloadKept = false;
  /// Never offload a storage smaller than this.
  int64_t minOffloadBytes = 1 << 20;
  /// Allow re-running RNG ops (dropout) in recompute chains: only sound
  /// when the runtime replays their RNG state. Off by default.
  bool replayRng = false;
  /// Pinned host bytes offloaded storages may occupy at once.
  int64_t hostBudgetBytes = std::numeric_limits<int64_t>::max();
  /// auto: which solver (Auto = exact when the graph is small, else fast).
  SolverKind solver = SolverKind::Auto;
  /// Wall-clock limit for the exact solver, seconds.
  double exactTimeLimitSec = 30.0;
  CollectiveCopyModel copyModel = CollectiveCopyModel::Auto;
  /// Also compute a lower bound on the step-time overhead of every plan at
  /// this budget (Plan::lowerBound; docs/Bound.md).
  bool bound = false;
  /// Policy::Given: the decisions to evaluate instead of planning (`value`,
  /// `decision` and, for an offload, `releaseAfter` / `prefetchAfter`, read
  /// as the solver's copy hints: release after that node at the latest,
  /// issue the prefetch after it at the earliest, -1 for the planner's own
  /// placement; the rest of the placement is the planner's). A placement
  /// written by `lethe plan --json` replays as it was. Activations not
  /// listed are retained.
  std::vector<ActivationDecision> givenDecisions;
};

/// The decision for one activation.
struct ActivationDecision {
  /// The storage-owning value the decision is about.
  ValueId value = -1;
  Decision decision = Decision::Retain;
  /// Offload: the D2H copy is issued when the storage's forward contents
  /// are final (after its producer or its last in-place write); the device
  /// buffer is released after node `releaseAfter` (at or after the last
  /// forward use), the compute stream waiting there for the copy to
  /// complete; the H2D copy is issued after node `prefetchAfter` finishes and
  /// must complete before `firstBackwardUse`. -1 in either field: the
  /// schedule builder places it (placeDecisions, lethe/Planner/Placement.h:
  /// release when the copy is predicted done, prefetch as late as the H2D
  /// queue allows).
  NodeId releaseAfter = -1;
  NodeId prefetchAfter = -1;
  /// Recompute and offload: the node before which the activation is back
  /// on the device (the restore point). It is the first backward use, or
  /// earlier when a recompute chain of another activation reads it.
  NodeId firstBackwardUse = -1;
  /// Recompute: the forward nodes re-run, in program order, just before
  /// `firstBackwardUse`. A chain shared with another activation restored at
  /// the same point lists the same nodes; they run once. Offload: the view
  /// nodes re-run on the prefetched storage to re-create the aliases that
  /// backward nodes read.
  std::vector<NodeId> recomputeNodes;
  /// Why: the alternative this beat and what it costs, for remarks.
  std::string reason;
};

/// How the exact solver's search ended; set only by solveExact.
struct ExactSolveReport {
  /// CBC proved the plan optimal for the exact model (docs/ExactSolver.md)
  /// within its tolerances.
  bool provenOptimal = false;
  /// The search stopped at PlanOptions::exactTimeLimitSec with the best
  /// plan found so far: it may differ between machines of unequal speed.
  bool hitTimeLimit = false;
  /// The MILP objective of the plan and the best lower bound CBC proved:
  /// model step time in microseconds, or, for an infeasible budget, the
  /// least peak in MiB.
  double objective = 0.0;
  double bound = 0.0;
  /// (objective - bound) / objective; 0 when proven optimal.
  double gap = 0.0;
  int64_t branchNodes = 0;
  int rows = 0;
  int columns = 0;
  int integerColumns = 0;
};

/// A lower bound on the step time of every plan that fits the budget
/// (boundStepTime, lethe/Planner/Bound.h; docs/Bound.md states the
/// relaxation and the assumptions that make it valid).
struct OverheadBound {
  /// False: the relaxation proves that no plan fits the budget.
  bool feasible = true;
  /// No plan's simulated step is faster than this, microseconds.
  double stepUs = 0.0;
  /// stepUs / baseline step - 1: no plan's overhead is lower.
  double overhead = 0.0;
  /// Every cut of the relaxation holds at its solution (false: stopped at
  /// the round or time limit; the bound is valid but may be looser).
  bool converged = false;
  int rounds = 0;
  /// Memory points (nodes) whose rows the last LP held.
  int points = 0;
  int rows = 0;
  int columns = 0;
  double solveMs = 0.0;
};

struct Plan {
  Policy policy = Policy::Auto;
  int64_t budgetBytes = std::numeric_limits<int64_t>::max();
  /// One entry per activation, ordered by value id.
  std::vector<ActivationDecision> decisions;
  /// Predictions for this plan (from the simulator) and the unplanned step.
  bool feasible = false;
  int64_t peakBytes = 0;
  double stepUs = 0.0;
  int64_t baselinePeakBytes = 0;
  double baselineStepUs = 0.0;
  /// When infeasible: the least budget this policy/solver can meet.
  std::optional<int64_t> leastFeasibleBudget;
  /// When infeasible, with RNG replay off: the least with it on, where
  /// notably lower (leastWithRngReplay; infeasibleMessage states it).
  std::optional<int64_t> leastWithRngReplay;
  double solveMs = 0.0;
  /// Exact solver only: optimality status and gap.
  std::optional<ExactSolveReport> exactReport;
  /// With PlanOptions::bound: the lower bound on any plan's step time.
  std::optional<OverheadBound> lowerBound;
};

} // namespace lethe

#endif // LETHE_PLANNER_PLAN_H

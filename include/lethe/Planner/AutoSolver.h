//===- AutoSolver.h - The fast solver of policy `auto` ----------*- C++ -*-===//
//
// Joint recompute + offload that minimises the simulated step time subject
// to device memory <= budget at every instant.
//
// The solver builds a *budget-independent* family of plans and returns the
// fastest member whose peak fits the budget:
// - a greedy ladder: starting from "retain everything", for memory levels
//   L_j = (1 - j * levelStep) * unplanned peak, it adds decisions until the
//   exact peak is <= L_j (at the op holding the highest memory, it picks the
//   cheapest freed-bytes candidate: offload when its copies hide in the
//   D2H/H2D windows, else the recompute with the least marginal chain time,
//   shared sub-chains counted once), then undoes decisions no longer needed
//   for L_j (and probes the levels below where copies are exposed or the
//   greedy was stuck; restarts from the seeds where it is stuck or its plan
//   is slower than a seed); a member is the fastest of five consecutive level
//   plans and the plans found between them;
// - seeds: plans of the fixed policies, evaluated the same way.
// On a large step of repeated layers the ladder's greedy ties its picks
// across identical layers (AutoSolverOptions::tiedClasses) down to the
// budget; from the last tied plan above it, picks tied only as far as each
// op needs take it to the level above the budget, and the ladder goes on
// untied from there.
// Because neither the ladder nor the seeds depend on the budget, the peak of
// the chosen plan can only fall as the budget falls, and `auto` is never
// slower than a fixed policy whose plan fits (docs/Planner.md has the
// argument).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_AUTOSOLVER_H
#define LETHE_PLANNER_AUTOSOLVER_H

#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Plan.h"

#include "llvm/ADT/StringRef.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lethe {

/// What a solve builds that does not depend on the budget: the ladder as far
/// as it went and the seeds' evaluations (AutoSolverImpl.h). A later solve
/// of the same step at another budget whose ladder ends within it takes it
/// instead of building it again (docs/Planner.md, "Solving again at another
/// budget").
class AutoFamily;

/// The families of the steps one caller plans again at other budgets, by
/// step (function) name: the pipeline's search for a plan whose packed arena
/// fits (lib/Pipelines) re-plans one step, its graph, device and options the
/// same but for the budget, up to a few times per call.
class AutoFamilies {
public:
  AutoFamilies();
  ~AutoFamilies();
  /// The family of `step` (empty until a solve fills it).
  AutoFamily &get(llvm::StringRef step);

private:
  std::map<std::string, std::unique_ptr<AutoFamily>, std::less<>> families;
};

struct AutoSeed {
  std::string name;
  std::vector<Decision> decisions;
  std::vector<std::string> reasons;
  /// The reasons, where `reasons` is empty: made only for a seed the
  /// solution keeps (a fixed policy's take longer than deciding it).
  std::function<std::vector<std::string>()> explain;

  std::vector<std::string> getReasons() const {
    return reasons.empty() && explain ? explain() : reasons;
  }
};

struct AutoSolution {
  std::vector<Decision> decisions;
  std::vector<std::string> reasons;
  /// Whether some member fits the budget.
  bool feasible = false;
  /// The least peak over every member and seed evaluated.
  int64_t leastPeakBytes = 0;
  /// Which member won: "ladder level 12" or "seed full".
  std::string chosen;
  Evaluation evaluation;
  /// Ladder levels built.
  unsigned levels = 0;
  /// Ladder members taken from AutoSolverOptions::family, not built.
  size_t reusedMembers = 0;
  /// Trials turned down without evaluating them again: an earlier
  /// evaluation of the same plan proved them over the level or no faster
  /// (AutoSolverOptions::verdicts).
  size_t knownTrials = 0;
  /// Searches handed to other threads (PlanOptions::threads; docs/
  /// Planner.md, "Threads"), run there or not: 0 with one thread.
  size_t forks = 0;
};

struct AutoSolverOptions {
  /// Spacing of the ladder's memory levels, as a fraction of the unplanned
  /// peak.
  double levelStep = 0.01;
  /// Classes of activations whose decisions the ladder ties
  /// (lethe/Planner/RepeatedLayers.h): a pick of one member is applied to
  /// every member that frees memory at the same op. Empty: no ties.
  std::vector<std::vector<int32_t>> tiedClasses;
  /// With ties: from the last tied plan above the budget, go straight to
  /// the last level above it with picks tied as far as each op needs, and
  /// refine untied only from there (docs/Planner.md). Off only to compare.
  bool tiedDescent = true;
  /// Where the greedy is stuck and no seed fits the level, keep values
  /// needed only after the peak op off it with late prefetches
  /// (docs/Planner.md). Off only to measure what it adds.
  bool latePrefetch = true;
  /// With latePrefetch: also keep off the peak op a value a recompute chain
  /// run before it read early, by offloading the chain's values instead
  /// (docs/Planner.md). Off only to measure what it adds.
  bool chainReaders = true;
  /// With chainReaders: where a chain-reader move fails with the value
  /// offloaded and prefetched after the peak node, try it again with the
  /// value recomputed instead (docs/Planner.md). Off only to measure what it
  /// adds.
  bool recomputeChainInput = true;
  /// The plan chosen is improved at the budget by a bounded local search
  /// (docs/Planner.md, "Refining"). Off only to measure what it adds.
  bool refine = true;
  /// Trials asked for again (the same decisions and copy hints) are turned
  /// down without evaluating them where an earlier evaluation proves they
  /// would be (docs/Planner.md, "Trials asked for again"); the plans are the
  /// same either way. Off only to compare.
  bool verdicts = true;
  /// The ladder skips trials that failed at the levels above it by a
  /// margin (flips, the replacement of copy-time trades; docs/Planner.md,
  /// "Fewer trials where they do not pay"). Off only to compare.
  bool ladderMemo = true;
  /// Where given, the ladder an earlier solve of this step built (at another
  /// budget) is reused where it reaches this budget's end, and a longer one
  /// built here is kept in it. Only for solves of one step whose graph,
  /// device, seeds and options differ in the budget alone (checked as far
  /// as cheap: the unplanned evaluation, the seeds, the options the ladder
  /// reads); the plans are the same as without it. Not with tiedClasses
  /// (the tied ladder depends on the budget).
  AutoFamily *family = nullptr;
};

llvm::Expected<AutoSolution> solveAuto(const Evaluator &evaluator,
                                       const PlanOptions &options,
                                       llvm::ArrayRef<AutoSeed> seeds,
                                       const AutoSolverOptions &solver = {});

} // namespace lethe

#endif // LETHE_PLANNER_AUTOSOLVER_H

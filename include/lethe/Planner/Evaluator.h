//===- Evaluator.h - Place, schedule and simulate decisions -----*- C++ -*-===//
//
// The one way every policy, solver and baseline turns per-activation
// decisions into predicted numbers: placeDecisions, buildSchedule,
// walkMemory and simulate, in that order.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_EVALUATOR_H
#define LETHE_PLANNER_EVALUATOR_H

#include "lethe/Planner/Placement.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace lethe {

struct Evaluation {
  /// Shared, not copied, by the copies of an evaluation (a solver's saved
  /// states, the Evaluator's cache): they never change once evaluated.
  std::shared_ptr<const Placement> placement;
  std::shared_ptr<const Schedule> schedule;
  MemoryWalk memory;
  /// Simulated figures (without a timeline).
  double stepUs = 0.0;
  double exposedCopyUs = 0.0;
  int64_t peakBytes = 0;
  int64_t hostPeakBytes = 0;
  /// Whether stepUs and exposedCopyUs are the simulation's. Not where the
  /// caller's limits (EvaluationLimits) said it discards the plan: stepUs
  /// is then +infinity, exposedCopyUs 0.
  bool simulated = true;
};

/// What a caller keeps of the plan it asks to evaluate, so that evaluating a
/// plan it will discard stops early: a plan whose device peak is above
/// `peakCap` is not simulated, and one whose step is certain to exceed
/// `stepLimitUs` is simulated only until that is certain (SimOptions::
/// stopAfterUs). Either way the evaluation has its placement, schedule and
/// memory, and stepUs = +infinity: a caller that compares the peak with a
/// cap at most `peakCap` and the step with a limit at most `stepLimitUs`
/// (`<` or `<=`) decides as it would on the whole evaluation. A third of an
/// evaluation is its simulation (bench/results/corpus.md).
struct EvaluationLimits {
  int64_t peakCap = std::numeric_limits<int64_t>::max();
  double stepLimitUs = std::numeric_limits<double>::infinity();
  /// Nothing simulated: the caller judges the plan by its memory and
  /// simulates the one it keeps (Evaluator::simulate).
  static EvaluationLimits memoryOnly() {
    return {std::numeric_limits<int64_t>::min(),
            std::numeric_limits<double>::infinity()};
  }
};

/// Evaluations the Evaluator keeps, to answer a request for decisions (and
/// hints) it has evaluated before without placing, scheduling and
/// simulating them again: the `auto` solver asks again for a fifth to two
/// fifths of its candidate plans (a polish that restores the plan it
/// started from, a search that retries a level). An evaluation is a
/// function of its decisions and hints, so a kept one is the evaluation.
class EvaluationCache {
public:
  explicit EvaluationCache(size_t capacityBytes)
      : capacityBytes(capacityBytes) {}

  /// The kept evaluation of exactly these decisions and hints, or null.
  std::shared_ptr<const Evaluation> lookup(llvm::ArrayRef<Decision> decisions,
                                           llvm::ArrayRef<CopyHint> hints);
  /// Keeps `eval`, dropping the least recently used evaluations beyond the
  /// capacity (one larger than the capacity is not kept).
  void insert(llvm::ArrayRef<Decision> decisions,
              llvm::ArrayRef<CopyHint> hints,
              std::shared_ptr<const Evaluation> eval);
  /// A cache of no capacity: the evaluator neither looks up nor keeps.
  bool keepsNothing() const { return capacityBytes == 0; }
  /// Requests answered from the cache, and all requests.
  size_t getHits() const { return hits; }
  size_t getLookups() const { return lookups; }

private:
  struct Entry {
    uint64_t hash;
    std::vector<Decision> decisions;
    std::vector<CopyHint> hints;
    std::shared_ptr<const Evaluation> eval;
    size_t bytes;
    uint64_t lastUse;
  };
  std::vector<Entry> entries;
  size_t capacityBytes;
  size_t usedBytes = 0;
  uint64_t clock = 0;
  size_t hits = 0, lookups = 0;
};

class Evaluator {
public:
  /// `copiesYield`: simulate copies that pause while a collective runs
  /// (planCopiesYield decides it for a plan).
  /// `cacheBytes`: what it may keep of its evaluations for reuse.
  Evaluator(const ActivationAnalysis &analysis, const DeviceProfile &device,
            bool copiesYield = false,
            int64_t cacheBytes = kEvaluationCacheBytes)
      : analysis(analysis), device(device), copiesYield(copiesYield),
        cache(std::make_shared<EvaluationCache>(
            static_cast<size_t>(std::max<int64_t>(0, cacheBytes)))),
        spares(makeSpares()) {}

  llvm::Expected<Evaluation>
  evaluate(llvm::ArrayRef<Decision> decisions,
           llvm::ArrayRef<CopyHint> hints = {},
           const EvaluationLimits &limits = {}) const;
  /// Simulates an evaluation that was not (`simulated` false), without
  /// limits: the same figures as evaluating its plan whole. Not another
  /// evaluation (getEvaluations counts the plan once).
  llvm::Error simulate(Evaluation &eval) const;
  /// The same, stopping once the step is certain to exceed `stepLimitUs`
  /// (the evaluation then stays not simulated, its step +infinity).
  llvm::Error simulateWithin(Evaluation &eval, double stepLimitUs) const;

  const ActivationAnalysis &getAnalysis() const { return analysis; }
  const DeviceProfile &getDevice() const { return device; }
  bool getCopiesYield() const { return copiesYield; }
  const EvaluationCache &getCache() const { return *cache; }
  /// Evaluations asked for so far (answered by the cache or not): what a
  /// search that must stay a fraction of the solve measures.
  size_t getEvaluations() const { return count(); }
  /// Counts an evaluation the caller asked for and answered without it (it
  /// proved the plan's peak over what it keeps): counted as one evaluated,
  /// so that what depends on the count (refine's share, a family's checks)
  /// is the same either way.
  void countAnswered() const { ++count(); }
  /// Counts `n` evaluations a thread's scope made (ThreadScope) where the
  /// caller takes their result.
  void addEvaluations(size_t n) const { count() += n; }

  /// While it lives, the evaluations this thread asks of `evaluator` are
  /// counted here, not in the evaluator's count (getEvaluations reads the
  /// count at the scope's start plus them), and fail once `*stop` is set:
  /// a search's trials run on another thread (the `auto` solver's workers,
  /// docs/Planner.md, "Threads"), counted where it takes their result
  /// (addEvaluations) and stopped where it discards them. Scopes nest.
  class ThreadScope {
  public:
    /// `base`: the count the scope starts from (the evaluator's, read where
    /// the work was handed over: another thread may be counting there).
    ThreadScope(const Evaluator &evaluator, const std::atomic<bool> *stop,
                size_t base);
    ~ThreadScope();
    ThreadScope(const ThreadScope &) = delete;
    ThreadScope &operator=(const ThreadScope &) = delete;
    /// The evaluations made in the scope.
    size_t getEvaluations() const { return evaluations - base; }

  private:
    friend class Evaluator;
    const Evaluator &evaluator;
    const std::atomic<bool> *stop;
    ThreadScope *outer;
    size_t base, evaluations;
  };

  /// Schedules and placements no evaluation holds any more, whose storage
  /// the next evaluation's are written into (buildSchedule's and
  /// placeDecisions' recycling overloads): most evaluations are discarded
  /// soon after they are made. Opaque (Evaluator.cpp).
  struct Spares;

private:
  /// Places, schedules and simulates, without the cache.
  llvm::Expected<Evaluation>
  evaluateAfresh(llvm::ArrayRef<Decision> decisions,
                 llvm::ArrayRef<CopyHint> hints,
                 const EvaluationLimits &limits) const;

  static std::shared_ptr<Spares> makeSpares();
  /// The count evaluations go to: this thread's innermost scope of this
  /// evaluator, else the evaluator's.
  size_t &count() const;
  /// An error where this thread's scope was told to stop.
  llvm::Error stopped() const;

  /// Simulates `eval`'s schedule, stopping past `stopAfterUs`.
  llvm::Error simulate(Evaluation &eval, double stopAfterUs) const;

  const ActivationAnalysis &analysis;
  /// A copy: callers may pass a temporary.
  DeviceProfile device;
  bool copiesYield;
  /// Shared by copies of the evaluator (evaluate is const: what it keeps
  /// does not change what it answers).
  std::shared_ptr<EvaluationCache> cache;
  /// Shared by copies of the evaluator, and held weakly by the schedules
  /// it made (an evaluation may outlive its evaluator).
  std::shared_ptr<Spares> spares;
  mutable size_t evaluations = 0;
};

} // namespace lethe

#endif // LETHE_PLANNER_EVALUATOR_H

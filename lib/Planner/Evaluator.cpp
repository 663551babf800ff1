//===- Evaluator.cpp - Place, schedule and simulate decisions -------------===//

#include "lethe/Planner/Evaluator.h"

#include "llvm/ADT/Hashing.h"

#include <mutex>

using namespace lethe;

static uint64_t keyHash(llvm::ArrayRef<Decision> decisions,
                        llvm::ArrayRef<CopyHint> hints) {
  llvm::hash_code hash = llvm::hash_combine_range(decisions);
  for (const CopyHint &hint : hints)
    hash = llvm::hash_combine(hash, hint.releaseBy, hint.prefetchNotBefore);
  return llvm::hash_combine(hash, hints.size());
}

/// About what an evaluation holds, for the cache's capacity.
static size_t approxBytes(const Evaluation &eval) {
  size_t bytes = sizeof(Evaluation) +
                 eval.schedule->ops.capacity() * sizeof(ScheduleOp) +
                 eval.schedule->buffers.capacity() * sizeof(ScheduleBuffer) +
                 eval.memory.deviceAtOp.capacity() * sizeof(int64_t);
  const Placement &p = *eval.placement;
  bytes += p.decisions.capacity() * sizeof(ActivationDecision) +
           p.chainBegin.capacity() * sizeof(int32_t) +
           p.chainNodes.capacity() * sizeof(NodeId) +
           (p.chainUs.capacity() + p.chainStartUs.capacity() +
            p.nodeEndUs.capacity() + p.d2hEndUs.capacity() +
            p.h2dStartUs.capacity()) *
               sizeof(double);
  for (const ActivationDecision &d : p.decisions)
    bytes += d.recomputeNodes.capacity() * sizeof(NodeId);
  return bytes;
}

std::shared_ptr<const Evaluation>
EvaluationCache::lookup(llvm::ArrayRef<Decision> decisions,
                        llvm::ArrayRef<CopyHint> hints) {
  ++lookups;
  uint64_t hash = keyHash(decisions, hints);
  for (Entry &entry : entries)
    if (entry.hash == hash && llvm::ArrayRef(entry.decisions) == decisions &&
        llvm::ArrayRef(entry.hints) == hints) {
      entry.lastUse = ++clock;
      ++hits;
      return entry.eval;
    }
  return nullptr;
}

void EvaluationCache::insert(llvm::ArrayRef<Decision> decisions,
                             llvm::ArrayRef<CopyHint> hints,
                             std::shared_ptr<const Evaluation> eval) {
  size_t bytes = approxBytes(*eval) + decisions.size() * sizeof(Decision) +
                 hints.size() * sizeof(CopyHint);
  if (bytes > capacityBytes)
    return;
  while (usedBytes + bytes > capacityBytes && !entries.empty()) {
    auto oldest =
        llvm::min_element(entries, [](const Entry &x, const Entry &y) {
          return x.lastUse < y.lastUse;
        });
    usedBytes -= oldest->bytes;
    *oldest = std::move(entries.back());
    entries.pop_back();
  }
  entries.push_back({keyHash(decisions, hints), decisions.vec(), hints.vec(),
                     std::move(eval), bytes, ++clock});
  usedBytes += bytes;
}

/// This thread's innermost Evaluator::ThreadScope.
static thread_local Evaluator::ThreadScope *innermostScope = nullptr;

Evaluator::ThreadScope::ThreadScope(const Evaluator &evaluator,
                                    const std::atomic<bool> *stop, size_t base)
    : evaluator(evaluator), stop(stop), outer(innermostScope), base(base),
      evaluations(base) {
  innermostScope = this;
}

Evaluator::ThreadScope::~ThreadScope() { innermostScope = outer; }

size_t &Evaluator::count() const {
  for (ThreadScope *scope = innermostScope; scope; scope = scope->outer)
    if (&scope->evaluator == this)
      return scope->evaluations;
  return evaluations;
}

llvm::Error Evaluator::stopped() const {
  for (ThreadScope *scope = innermostScope; scope; scope = scope->outer)
    if (scope->stop && scope->stop->load(std::memory_order_relaxed))
      return llvm::createStringError("evaluation stopped: its search's "
                                     "result is not wanted");
  return llvm::Error::success();
}

llvm::Expected<Evaluation>
Evaluator::evaluate(llvm::ArrayRef<Decision> decisions,
                    llvm::ArrayRef<CopyHint> hints,
                    const EvaluationLimits &limits) const {
  ++count();
  if (llvm::Error err = stopped())
    return std::move(err);
  // Off by default: no lookup, and no copy of the evaluation to keep.
  if (cache->keepsNothing())
    return evaluateAfresh(decisions, hints, limits);
  // A kept evaluation is whole: its figures decide as a limited one would.
  if (std::shared_ptr<const Evaluation> kept = cache->lookup(decisions, hints))
    return *kept;
  llvm::Expected<Evaluation> eval = evaluateAfresh(decisions, hints, limits);
  // Errors are not kept: they are rare, and a caller may stop at one.
  // Neither are evaluations cut short by the limits.
  if (eval && eval->simulated)
    cache->insert(decisions, hints, std::make_shared<const Evaluation>(*eval));
  return eval;
}

llvm::Error Evaluator::simulate(Evaluation &eval) const {
  if (eval.simulated)
    return llvm::Error::success();
  return simulate(eval, std::numeric_limits<double>::infinity());
}

llvm::Error Evaluator::simulateWithin(Evaluation &eval,
                                      double stepLimitUs) const {
  if (eval.simulated)
    return llvm::Error::success();
  return simulate(eval, stepLimitUs);
}

llvm::Error Evaluator::simulate(Evaluation &eval, double stopAfterUs) const {
  SimOptions options;
  options.recordTimeline = false;
  options.copiesYieldToCollectives = copiesYield;
  options.stopAfterUs = stopAfterUs;
  // The evaluation has walked the memory.
  options.walkMemory = false;
  llvm::Expected<SimResult> sim =
      lethe::simulate(*eval.schedule, device, options);
  if (!sim)
    return sim.takeError();
  eval.simulated = !sim->stopped;
  eval.stepUs = sim->stepUs;
  eval.exposedCopyUs = sim->stopped ? 0.0 : sim->exposedCopyUs;
  return llvm::Error::success();
}

namespace {
/// Spare `T`s (schedules, placements) no evaluation holds any more.
template <typename T> struct SparePool {
  /// Two spares per thread evaluating (the `auto` solver's workers): an
  /// evaluation is made while the one before it is still held (a batch
  /// judged against the best so far), and more would only hold memory.
  static constexpr size_t kMaxSpares = 4;
  /// They may be let go on any thread that holds an evaluation.
  std::mutex mutex;
  std::vector<std::unique_ptr<T>> spares;

  T take() {
    std::lock_guard<std::mutex> lock(mutex);
    if (spares.empty())
      return T();
    T spare = std::move(*spares.back());
    spares.pop_back();
    return spare;
  }
  /// Keeps `spare`, or frees it.
  void giveBack(T *spare) {
    std::unique_ptr<T> owned(spare);
    std::lock_guard<std::mutex> lock(mutex);
    if (spares.size() < kMaxSpares)
      spares.push_back(std::move(owned));
  }
};
} // namespace

struct Evaluator::Spares {
  SparePool<Schedule> schedules;
  SparePool<Placement> placements;
};

std::shared_ptr<Evaluator::Spares> Evaluator::makeSpares() {
  return std::make_shared<Spares>();
}

/// `value` shared so that it returns to `member` of the spares when its
/// last holder lets it go (or is freed when the spares are gone or full).
template <typename T>
static std::shared_ptr<const T>
shareSpare(T &&value, const std::shared_ptr<Evaluator::Spares> &spares,
           SparePool<T> Evaluator::Spares::*member) {
  std::weak_ptr<Evaluator::Spares> weak = spares;
  return std::shared_ptr<const T>(
      new T(std::move(value)), [weak, member](const T *done) {
        T *owned = const_cast<T *>(done);
        if (std::shared_ptr<Evaluator::Spares> alive = weak.lock())
          ((*alive).*member).giveBack(owned);
        else
          delete owned;
      });
}

llvm::Expected<Evaluation>
Evaluator::evaluateAfresh(llvm::ArrayRef<Decision> decisions,
                          llvm::ArrayRef<CopyHint> hints,
                          const EvaluationLimits &limits) const {
  Evaluation result;
  llvm::Expected<Placement> placement = placeDecisions(
      analysis, device, decisions, hints, spares->placements.take());
  if (!placement)
    return placement.takeError();
  result.placement =
      shareSpare(std::move(*placement), spares, &Spares::placements);
  llvm::Expected<Schedule> schedule =
      buildSchedule(analysis, result.placement->decisions,
                    spares->schedules.take(), &result.memory);
  if (!schedule)
    return schedule.takeError();
  result.schedule =
      shareSpare(std::move(*schedule), spares, &Spares::schedules);
  result.peakBytes = result.memory.peakBytes;
  result.hostPeakBytes = result.memory.hostPeakBytes;
  if (result.peakBytes > limits.peakCap) {
    result.simulated = false;
    result.stepUs = std::numeric_limits<double>::infinity();
    return result;
  }
  if (llvm::Error err = simulate(result, limits.stepLimitUs))
    return std::move(err);
  return result;
}

//===- AutoSolverFamily.cpp - What a solve keeps for the next ones --------===//
//
// A family (AutoFamily, AutoSolverImpl.h) keeps the ladder a solve built and
// where its loop checked its end condition; a later solve of the same step
// at another budget replays that condition on it (docs/Planner.md, "Work
// done once"), and a solve asked again for the same budget is answered with
// the last solution kept. Verdicts keep what evaluating a plan told of it,
// for a search that asks for the plan again.
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "llvm/ADT/Hashing.h"

using namespace lethe;
using namespace lethe::autosolver;

namespace {

/// What Verdicts keeps of plans, in decisions and hints: a refine of a
/// 25,000-activation step makes about 500 trials (~110 MB whole), most of
/// the corpus's under 2 MB.
constexpr size_t kMaxVerdictBytes = 32 << 20;

uint64_t planHash(llvm::ArrayRef<Decision> decisions,
                  llvm::ArrayRef<CopyHint> hints) {
  llvm::hash_code hash = llvm::hash_combine_range(decisions);
  for (const CopyHint &hint : hints)
    hash = llvm::hash_combine(hash, hint.releaseBy, hint.prefetchNotBefore,
                              hint.prefetchBy, hint.releaseNotBefore);
  return llvm::hash_combine(hash, hints.size());
}

} // namespace

const Verdicts::Entry *Verdicts::find(llvm::ArrayRef<Decision> decisions,
                                      llvm::ArrayRef<CopyHint> hints,
                                      uint64_t hash) const {
  auto it = byHash.find(hash);
  if (it == byHash.end())
    return nullptr;
  for (unsigned i : it->second)
    if (llvm::ArrayRef(entries[i].decisions) == decisions &&
        llvm::ArrayRef(entries[i].hints) == hints)
      return &entries[i];
  return nullptr;
}

bool Verdicts::knownNoBetter(llvm::ArrayRef<Decision> decisions,
                             llvm::ArrayRef<CopyHint> hints, int64_t peakCap,
                             int64_t hostCap, double stepLimitUs,
                             bool tieKept) const {
  std::lock_guard<std::mutex> lock(mutex);
  const Entry *e = find(decisions, hints, planHash(decisions, hints));
  if (!e)
    return false;
  // A step known only to exceed x exceeds stepLimitUs where x is at least it.
  const bool no = e->peak > peakCap || e->hostPeak > hostCap ||
                  (e->exact && tieKept ? e->stepUs > stepLimitUs
                                       : e->stepUs >= stepLimitUs);
  answered += no;
  return no;
}

llvm::Expected<std::optional<Evaluation>> Solver::evaluateTrial(
    llvm::ArrayRef<Decision> decisions, llvm::ArrayRef<CopyHint> hints,
    const EvaluationLimits &limits, int64_t hostCap, bool tieKept) const {
  if (verdicts &&
      verdicts->knownNoBetter(decisions, hints, limits.peakCap, hostCap,
                              limits.stepLimitUs, tieKept)) {
    evaluator.countAnswered();
    return std::nullopt;
  }
  llvm::Expected<Evaluation> eval =
      evaluator.evaluate(decisions, hints, limits);
  if (!eval)
    return eval.takeError();
  if (verdicts)
    verdicts->record(decisions, hints, *eval, limits);
  return std::move(*eval);
}

void Verdicts::record(llvm::ArrayRef<Decision> decisions,
                      llvm::ArrayRef<CopyHint> hints, const Evaluation &eval,
                      const EvaluationLimits &limits) {
  std::lock_guard<std::mutex> lock(mutex);
  const size_t bytes =
      decisions.size() * sizeof(Decision) + hints.size() * sizeof(CopyHint);
  const uint64_t hash = planHash(decisions, hints);
  if (keptBytes + bytes > kMaxVerdictBytes || find(decisions, hints, hash))
    return;
  Entry e;
  e.exact = eval.simulated;
  e.peak = eval.peakBytes;
  e.hostPeak = eval.hostPeakBytes;
  // Not simulated: over the cap (nothing known of the step), or cut once
  // its step was certain to exceed the limit.
  e.stepUs = eval.simulated ? eval.stepUs
             : eval.peakBytes > limits.peakCap
                 ? -std::numeric_limits<double>::infinity()
                 : limits.stepLimitUs;
  e.decisions = decisions.vec();
  e.hints = hints.vec();
  byHash[hash].push_back(static_cast<unsigned>(entries.size()));
  entries.push_back(std::move(e));
  keptBytes += bytes;
}

void Solver::keepSolved(const AutoSolution &solution) const {
  if (answersAgain && usedFamily)
    usedFamily->solved =
        AutoFamily::Solved{options.budgetBytes, solverOptions.refine, solution};
}

AutoFamily::Replay AutoFamily::replay(int64_t budget) const {
  // Solver::buildLadder's loop: firstFit is the first member that fits, set
  // where an iteration ends; the loop ends once kLookBelow members follow
  // it, or by itself (the last check of a complete ladder).
  Replay result;
  for (size_t t = 0; t < checks.size(); ++t) {
    if (complete && t + 1 == checks.size()) {
      result.end = t;
      return result;
    }
    size_t members = checks[t].members;
    if (!result.firstFit && ladder[members - 1].peak <= budget)
      result.firstFit = members - 1;
    if (result.firstFit && members > *result.firstFit + kLookBelow) {
      result.end = t;
      return result;
    }
  }
  return result;
}

AutoFamilies::AutoFamilies() = default;
AutoFamilies::~AutoFamilies() = default;

AutoFamily &AutoFamilies::get(llvm::StringRef step) {
  std::unique_ptr<AutoFamily> &family = families[step.str()];
  if (!family)
    family = std::make_unique<AutoFamily>();
  return *family;
}

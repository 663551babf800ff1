//===- AutoSolverImpl.h - The state of the fast `auto` solver ---*- C++ -*-===//
//
// The Solver of AutoSolver.cpp and what it works on, shared by
// AutoSolver.cpp (the ladder and the greedy that reaches each level),
// AutoSolverCandidates.cpp (the greedy's candidates and their prices),
// AutoSolverSearch.cpp (the improvement searches at a level: polish,
// restarts, probing below, replacing copy-time trades), AutoSolverSwaps.cpp
// (costly decisions retained again or flipped at a level) and
// RepeatedLayers.cpp (tied picks, the tied descent), AutoSolverRefine.cpp
// (the local search on the plan returned) and AutoSolverQuietCopies.cpp
// (its last passes, on where the copies go).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_AUTOSOLVERIMPL_H
#define LETHE_LIB_PLANNER_AUTOSOLVERIMPL_H

#include "AutoSolverTypes.h"
#include "Workers.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lethe::autosolver {

/// Work run on another thread where one is free (Workers), its evaluations
/// counted apart (Evaluator::ThreadScope) until the caller takes its result
/// (join); let go before that, it is discarded: not run where it did not
/// start, else told to stop (its evaluations fail) and waited for.
class Forked {
public:
  Forked(Workers &workers, const Evaluator &evaluator,
         std::function<llvm::Error()> work);
  Forked(Forked &&) = default;
  Forked &operator=(Forked &&) = delete;
  ~Forked();
  /// Waits for the work (running it here where no thread took it), counts
  /// the evaluations it made as this thread's, and gives its error.
  llvm::Error join();

private:
  struct Run;
  std::shared_ptr<Run> run;
  std::shared_ptr<Workers::Task> task;
};

class Solver;

/// Refine's floor as far as it is known near a step: a value on the same
/// side of the step as the floor, the floor itself where `exact`.
struct FloorNear {
  double value;
  bool exact;
};

/// A search run on a copy of the solver (Solver::fork).
struct Fork {
  /// Shared with the work, which a discarded fork may still run.
  std::shared_ptr<Solver> copy;
  /// The reused evaluations of the solver forked.
  size_t reusedBefore = 0;
  std::optional<Forked> forked;
};

class Solver {
public:
  Solver(const Evaluator &evaluator, const PlanOptions &options,
         llvm::ArrayRef<AutoSeed> seeds, const AutoSolverOptions &solver)
      : evaluator(evaluator), analysis(evaluator.getAnalysis()),
        graph(analysis.getGraph()), device(evaluator.getDevice()),
        acts(analysis.getActivations()), options(options), seeds(seeds),
        solverOptions(solver), evaluationsBefore(evaluator.getEvaluations()) {
    tieClass.assign(acts.size(), -1);
    activationOfValue.assign(graph.numValues(), -1);
    for (size_t v = 0; v < graph.numValues(); ++v)
      activationOfValue[v] = analysis.activationIndex(static_cast<ValueId>(v));
    lastForwardUseOf.reserve(acts.size());
    for (const ActivationInfo &act : acts)
      lastForwardUseOf.push_back(act.lastForwardUse);
    for (auto [c, members] : llvm::enumerate(solverOptions.tiedClasses))
      for (int32_t a : members)
        tieClass[a] = static_cast<int32_t>(c);
    tying = !solverOptions.tiedClasses.empty();
    auto difficulty = [&](int32_t a) {
      return acts[a].recomputable
                 ? acts[a].recomputeUs / static_cast<double>(acts[a].bytes)
                 : std::numeric_limits<double>::infinity();
    };
    for (size_t a = 0; a < acts.size(); ++a)
      if (acts[a].offloadable)
        offloadOrder.push_back(static_cast<int32_t>(a));
    contentionPerCopyUs = contentionRate();
    llvm::sort(offloadOrder, [&](int32_t x, int32_t y) {
      double dx = difficulty(x), dy = difficulty(y);
      if (dx != dy)
        return dx > dy;
      if (acts[x].bytes != acts[y].bytes)
        return acts[x].bytes > acts[y].bytes;
      return x < y;
    });
  }

  llvm::Expected<AutoSolution> solve();
  /// Whether solve() answers a budget asked again from the family's last
  /// solution, and keepSolved keeps one (AutoFamily::solved): off for the
  /// solves nested for refine's floor, which refine otherwise.
  void setAnswersAgain(bool answer) { answersAgain = answer; }
  /// Refine makes at most `evaluations` (0: no limit) and nests no solve
  /// for its floor: a solve nested for a floor late in a refine.
  void setRefineLimit(unsigned evaluations) { refineLimit = evaluations; }
  /// Where the searches keep what their trials' evaluations told (shared
  /// by the solves nested for refine's floor, which try many of the same
  /// plans).
  void setVerdicts(Verdicts *kept) { verdicts = kept; }
  /// The threads the searches' trials may run on (none: all on this one).
  void setWorkers(Workers *threads) { workers = threads; }
  /// Whether the searches fork trials to other threads.
  bool forks() const { return workers && workers->getThreads() > 1; }
  /// Runs `search` on a copy of this solver (its plan and what its searches
  /// keep) on another thread where one is free: the trials the serial code
  /// would make next, from the plan as it is now, while this thread makes
  /// those before them.
  Fork fork(std::function<llvm::Error(Solver &)> search) const;
  /// Waits for `fork` (running it here where no thread took it) and counts
  /// the evaluations its search made and reused as this solver's: the
  /// copy, whose plan (and reductions) the caller takes where the serial
  /// code would have had them.
  llvm::Expected<Solver *> join(Fork &fork);
  /// Whether solve() answered with the family's last solution (already
  /// refined where refine is on).
  bool isSolvedAgain() const { return solvedAgain; }
  /// Keeps `solution` as the family's last, where the solve went through a
  /// family and answers again.
  void keepSolved(const AutoSolution &solution) const;
  /// Refines a feasible solution of solve() at the budget (refine), its
  /// decisions, evaluation and reasons replaced where a move was kept.
  /// `stepAbove(b, n, s)`, where given, is the step of the plan `auto`
  /// returns at budget `b` (a solve of its own, perhaps with a higher floor
  /// than a solve of b alone would take, its refine limited to `n`
  /// evaluations where `n` > 0: never a faster plan), or only as far as
  /// step `s` needs (FloorNear), asked only where the floor stopped a move:
  /// refining floored by it instead of the unrefined members above keeps
  /// the overhead non-increasing in the budget (docs/Planner.md, "Refining
  /// and monotonicity").
  using StepAbove = std::function<llvm::Expected<std::optional<FloorNear>>(
      int64_t, unsigned, double)>;
  llvm::Error refineSolution(AutoSolution &solution,
                             const StepAbove &stepAbove = {});
  /// Refine stops once its plan's step is at most `stepUs` (a solve asked
  /// only how far down it gets); stoppedShort() says whether it did.
  void setRefineStop(double stepUs) { refineStopUs = stepUs; }
  bool stoppedShort() const { return stopped; }
  double getRefineFloor() const { return refineFloor; }
  /// The evaluations refine may make in its rounds (after solve()).
  unsigned refineBudget() const;
  int64_t getNextPeakAbove() const { return nextPeakAbove; }

private:
  /// Compute time a moving copy costs per microsecond: the kernels beside it
  /// run slower (the profile's one-way slowdown factors, averaged over the
  /// step's kernel time by class; views are not slowed).
  double contentionRate() const;
  /// The compute time `a`'s copies (one each way) take from the kernels they
  /// run beside on `eval`'s compute-stream times, the D2H copy ending at
  /// `d2hEndUs` and the H2D copy starting at `h2dStartUs`, taking `copy`'s
  /// times.
  double copiesContentionUs(const Evaluation &eval,
                            const PlannedCopyCosts &copy, int32_t a,
                            double d2hEndUs, double h2dStartUs) const;
  /// The current plan's drops that would cost less as the other kind, an
  /// offload's copies priced by copiesContentionUs over their windows plus
  /// the waits it adds (kWaitsPerOffload) and its exposed copy time, a
  /// recompute by `recomputeNowUs` (its exclusive chain time) or, as the
  /// other kind, its re-run in full (recomputeUs): (minus the estimated
  /// gain, activation), the largest gain first.
  std::vector<std::pair<double, int32_t>>
  contentionSwitches(llvm::function_ref<double(int32_t)> recomputeNowUs) const;
  /// The compute time lost while one copy moves from `fromUs` to `toUs` on
  /// `eval`'s compute-stream times (copyLoss of the nodes and chains then).
  double contentionBetweenUs(const Evaluation &eval, double fromUs,
                             double toUs) const;
  /// Refine's last passes on the current plan (mergeReleases, then
  /// quietPrefetches), with a few evaluations of their own counted in
  /// `evaluations`: the moves kept. `floorAt(step)`: the floor a plan of
  /// that step is judged against (refine's, lowered where it first binds).
  using FloorAt = llvm::function_ref<llvm::Expected<double>(double)>;
  llvm::Expected<unsigned> quietCopies(int64_t cap, FloorAt floorAt,
                                       unsigned &evaluations);
  /// What each node's region of `eval`'s schedule (its chain, then the
  /// node) holds at most on the device.
  std::vector<int64_t> regionMemory(const Evaluation &eval) const;
  /// Copy hints for the current plan that release each offload right after
  /// the first release of the copies after it on the D2H stream, whose wait
  /// then covers its own, where the device peak stays within `cap`; empty
  /// where none moves (AutoSolverQuietCopies.cpp).
  std::vector<CopyHint> mergedReleaseHints(int64_t cap) const;
  /// The current plan with mergedReleaseHints, kept where its peak is within
  /// `cap`, its step faster and not under `floor` (true); evaluated only
  /// where `spend` (which counts it) allows.
  llvm::Expected<bool> mergeReleases(int64_t cap, FloorAt floorAt,
                                     llvm::function_ref<bool()> spend);
  /// Copy hints for the current plan that issue its hidden prefetches
  /// earlier where their copies then run beside kernels that lose less
  /// (contentionBetweenUs), in the same order and before their deadlines,
  /// the device peak within `cap`, only those of `allowed` (empty: all)
  /// moved; empty where none moves. `gainUs` gets each moved copy's
  /// estimated gain; `joint`: the copies placed together, else one at a
  /// time (AutoSolverQuietCopies.cpp).
  std::vector<CopyHint> quietPrefetchHints(int64_t cap,
                                           llvm::ArrayRef<uint8_t> allowed,
                                           std::vector<double> &gainUs,
                                           bool joint) const;
  /// The current plan with quietPrefetchHints, kept where its peak is within
  /// `cap`, its step faster and not under `floor` (true); where all the
  /// moves go under it, the moves of most estimated gain that the floor
  /// allows. Each evaluation only where `spend` (which counts it) allows.
  llvm::Expected<bool> quietPrefetches(int64_t cap, FloorAt floorAt,
                                       llvm::function_ref<bool()> spend);
  /// Where things are in `eval`'s schedule: a function of the schedule
  /// alone, so the last one made is kept (with its schedule, which keeps
  /// the pointer from being reused) and given again for the same schedule:
  /// the ladder's next level, polish and refine index the plan the step
  /// before indexed about a third of the time.
  std::shared_ptr<const Positions> index(const Evaluation &eval) const;
  /// Candidates that free bytes at schedule op `op`. Offloads are judged
  /// with the copy model, at most `offloadLimit` of them, hardest to
  /// recompute first. `overLevel` gives the ops around `op` that are above
  /// the level (first, last), which a copy-time trade frees. With
  /// `bestRecomputeOnly`, of the recomputes only the best
  /// (Batch::bestRecomputeAt): bestCandidate picks the same, and the list
  /// is empty, or free candidates are in it, exactly where they are in the
  /// whole list.
  std::vector<const Candidate *>
  candidatesAt(size_t op, const Positions &pos, const Evaluation &eval,
               Batch &batch, const planner::CopyModel &copies,
               size_t offloadLimit,
               llvm::function_ref<std::pair<size_t, size_t>()> overLevel,
               bool bestRecomputeOnly = false);
  /// Recompute candidates of every retained activation, for one batch, in
  /// `batch` (new, or one prepared before: its arrays are reused, and only
  /// the entries it wrote cleared; a new one constructed and freed a
  /// candidate per activation, ~3% of a 10k-op solve).
  void prepareBatch(const Positions &pos, const Evaluation &eval,
                    llvm::ArrayRef<Decision> decisions, Batch &batch) const;
  void computeRecompute(Candidate &c, const Placement &placement,
                        const Batch &batch) const;
  /// Records a picked recompute: its chain nodes are now shared at its
  /// restore point, so the candidates restored there cost less.
  void pickRecompute(Batch &batch, const Candidate &picked,
                     const Placement &placement) const;
  /// The picks that tie `picks.front()` (made at schedule op `op`) to the
  /// other members of its class that free memory there; offloads only as
  /// far as their copies hide in `copies`; members in program order, only
  /// until they free `need` bytes more than the first pick
  /// (RepeatedLayers.cpp).
  void appendTiedPicks(size_t op, const Positions &pos, const Batch &batch,
                       const planner::CopyModel &copies, int64_t need,
                       llvm::SmallVectorImpl<Candidate> &picks) const;
  /// From the last tied plan above the budget (the current plan, at ladder
  /// level `from`), the tied greedy with picks tied only as far as the level
  /// needs, straight down to the last level above the budget: the level
  /// reached, or none (the current plan unchanged) where the budget's level
  /// is next or the greedy is stuck (RepeatedLayers.cpp).
  llvm::Expected<std::optional<unsigned>> descendTied(unsigned from,
                                                      int64_t baselinePeak);
  /// The ladder for `budget` (members from "retain everything" down to
  /// kLookBelow past the first that fits, or to its end) and the seeds'
  /// evaluations, into `family` with where its loop checked its end; with
  /// `resume`, going on from where `family`'s unfinished ladder stopped
  /// (the plan restored, `firstFit` replayed).
  llvm::Error buildLadder(int64_t budget, int64_t baselinePeak,
                          AutoFamily &family, bool resume,
                          std::optional<size_t> firstFit);
  /// Greedy until the peak is <= level. False when stuck. A function of
  /// the plan, the level and the search flags: a call asked for again (the
  /// next level's greedy repeats probeBelow's first descent, the next
  /// probe its others) is answered from `reductions`, which keeps the calls
  /// made with `keep` (probeBelow's: keeping every call cost the solves
  /// without probes 3-6%).
  /// `keeps`: what the caller keeps of the plan reduceTo leaves (not with
  /// `keep`, whose calls are kept simulated).
  llvm::Expected<bool> reduceTo(int64_t level, bool keep = false,
                                const ReduceKeeps &keeps = {});
  /// reduceTo without `reductions`, and without simulating the plans it
  /// goes through: the greedy judges them by their memory (improves), and
  /// the plan it ends with may not be simulated either (reduceTo simulates
  /// it).
  llvm::Expected<bool> reduceToAfresh(int64_t level);
  /// Undoes decisions the level no longer needs; true if the step got
  /// faster.
  llvm::Expected<bool> polish(int64_t level);
  /// The compute stream's predicted wait for `a`'s copies (0 unless it is
  /// offloaded): the release waiting for its D2H copy, its prefetch ending
  /// after the restore point.
  double exposedCopyUs(size_t a) const;
  /// Retains offloads whose copies are exposed where the level still holds
  /// and the step gets faster, the `tries` most exposed first.
  llvm::Error unexposeOffloads(int64_t level, size_t tries = 4);
  /// retainedPeakBound of the current plan.
  int64_t retainedPeakBound(int32_t a) const;
  /// copyOnlyPeak of the current plan.
  int64_t copyOnlyPeak(llvm::ArrayRef<int32_t> retained,
                       llvm::ArrayRef<CopyHint> hints) const;
  /// Polishes until the step stops improving (a plan far from the level,
  /// such as a seed the ladder restarts from, needs several rounds).
  llvm::Error polishFully(int64_t level);
  /// A seed the ladder restarts from recomputes far more than the level
  /// needs, and polishing only undoes what nothing replaces: polish, then
  /// try the costly recomputes against free offloads too, until the step
  /// stops improving.
  llvm::Error improveRestart(int64_t level);
  /// Makes the current plan the seed of `seedEvals` (evaluated for their
  /// memory at least) that fits `level` and the host budget and is fastest
  /// once improved at it (improveRestart), probed below (probeBelow); false
  /// (the plan unchanged) where no seed fits.
  llvm::Expected<bool> restartFromSeed(int64_t level,
                                       llvm::ArrayRef<Evaluation> seedEvals);
  /// Where the greedy reached `level` with a plan slower than a seed that
  /// fits it, or slower than the member above (`aboveStep`) by more than
  /// kRestartJump, restarts from the seeds there as where it is stuck, and
  /// makes the restart the current plan if faster (buildLadder keeps it as
  /// the level's member only). Seeds that fit the level are simulated in
  /// `seedEvals` (once: their step does not depend on it).
  llvm::Error restartWhereSlower(int64_t level, double aboveStep,
                                 llvm::MutableArrayRef<Evaluation> seedEvals);
  /// What the ladder's next levels would do, brought back to this one: the
  /// greedy down to each of the kProbeLevels levels below, then polished
  /// at this level (which undoes trades and recomputes the lower picks make
  /// unnecessary); the fastest result that holds the level is kept.
  llvm::Error probeBelow(int64_t level);
  /// Replaces copy-time trades by decisions that hide their copies where
  /// that holds the level and is faster. With `memo` (the ladder's own
  /// plan), not tried where the replacement at the level above was slower
  /// by more than kSlowReplacement (or not tried for that), and what it
  /// finds recorded there.
  llvm::Error replaceTrades(int64_t level, LadderMemo *memo = nullptr);
  /// What the ladder searches at a level once it has its plan (the
  /// greedy's or a restart's): polish, replaceTrades (with `memo`),
  /// swapCostly.
  llvm::Error searchLevel(int64_t level, LadderMemo *memo = nullptr);
  State save() const {
    return {current, currentHints, currentEval, offloadedBytes};
  }
  /// Simulates the current plan where it was evaluated for its memory only
  /// (the plans reduceToAfresh goes through): every search that compares
  /// step times starts here (nothing to do for a simulated plan).
  llvm::Error simulateCurrent() { return evaluator.simulate(currentEval); }
  void restore(State state) {
    current = std::move(state.decisions);
    currentHints = std::move(state.hints);
    currentEval = std::move(state.eval);
    offloadedBytes = state.offloaded;
  }
  /// The current plan with candidate `c`'s decision, evaluated within
  /// `limits`.
  llvm::Expected<State>
  withCandidate(const Candidate &c, const EvaluationLimits &limits = {}) const {
    State trial{current, currentHints, Evaluation(), offloadedBytes};
    trial.decisions[c.act] = c.decision;
    trial.hints[c.act] = c.hint;
    if (c.decision == Decision::Offload)
      trial.offloaded += acts[c.act].bytes;
    llvm::Expected<Evaluation> eval =
        evaluator.evaluate(trial.decisions, trial.hints, limits);
    if (!eval)
      return eval.takeError();
    trial.eval = std::move(*eval);
    return trial;
  }
  /// A trial the caller keeps only where it is within `limits` and
  /// `hostCap` (and faster than `limits.stepLimitUs`, or as fast where
  /// `tieKept`): evaluated within `limits`, or none where `verdicts` know it
  /// is not (counted as evaluated: refine's share of the evaluations and a
  /// family's checks do not depend on what was known).
  llvm::Expected<std::optional<Evaluation>>
  evaluateTrial(llvm::ArrayRef<Decision> decisions,
                llvm::ArrayRef<CopyHint> hints, const EvaluationLimits &limits,
                int64_t hostCap = std::numeric_limits<int64_t>::max(),
                bool tieKept = false) const;
  /// Whether `eval` holds the level on the device and the host budget.
  bool fitsLevel(const Evaluation &eval, int64_t level) const {
    return eval.peakBytes <= level &&
           eval.hostPeakBytes <= options.hostBudgetBytes;
  }
  /// Recounts the host bytes of the current plan.
  void recountOffloaded() {
    offloadedBytes = 0;
    for (size_t a = 0; a < acts.size(); ++a)
      if (current[a] == Decision::Offload)
        offloadedBytes += acts[a].bytes;
  }
  /// Makes `decisions` with `hints` the current plan, evaluated.
  llvm::Error startFrom(const std::vector<Decision> &decisions,
                        const std::vector<CopyHint> &hints) {
    current = decisions;
    currentHints = hints;
    llvm::Expected<Evaluation> eval = evaluator.evaluate(current, currentHints);
    if (!eval)
      return eval.takeError();
    currentEval = std::move(*eval);
    recountOffloaded();
    return llvm::Error::success();
  }
  /// Copy hints for the offloaded `a`, placed as `d`, that keep it off the
  /// device over nodes [first, last] as far as its gap allows: released
  /// before `first`, prefetched after `last` (copies that then do not hide
  /// cost step time).
  CopyHint widenedHint(size_t a, const ActivationDecision &d, NodeId first,
                       NodeId last) const {
    CopyHint hint;
    hint.releaseBy = std::max<NodeId>(
        acts[a].lastForwardUse, std::min<NodeId>(first - 1, d.releaseAfter));
    hint.prefetchNotBefore = std::min<NodeId>(
        d.firstBackwardUse - 1, std::max<NodeId>(last, d.prefetchAfter));
    return hint;
  }
  /// Swaps the costliest recomputes for free decisions where that holds the
  /// level (small graphs only: it costs a few evaluations per level).
  llvm::Error swapCostly(int64_t level, size_t tries = 3);
  /// One swap of swapCostly: the non-retained `x` retained, the level
  /// reached again by free decisions; true where that is kept (faster),
  /// else the plan is as it was.
  llvm::Expected<bool> swapOne(int64_t level, int32_t x);
  /// Turns the costliest recomputes into offloads and the costliest exposed
  /// offloads into recomputes, one at a time, where the plan is faster and
  /// still holds the level (small graphs only, as swapCostly), and is no
  /// faster than `floor`. With `memo`, a flip not kept at one of the
  /// kFlipMemoLevels levels above is not tried again, and the flips not
  /// kept here are recorded there.
  llvm::Error flipCostly(int64_t level, double floor,
                         LadderMemo *memo = nullptr, size_t tries = 4);
  /// The non-retained activations by what they cost the step, costliest
  /// first: recomputes by their restore point's chain time, offloads by
  /// the time the step waits for their copies.
  std::vector<int32_t> costliestDecisions() const;
  /// The greedy's fallback where a batch does not help: the best few
  /// candidates at the peak op, each evaluated, then offloads widened over
  /// the ops above the level; true where one lowers the peak. `batch` and
  /// `copies`, where given, are the current plan's as prepared for a batch
  /// that picked nothing (their what-ifs reused); else made here.
  llvm::Expected<bool> trySingles(const Positions &pos, int64_t level,
                                  Batch *batch = nullptr,
                                  const planner::CopyModel *copies = nullptr);
  /// Where the ladder ends (the greedy only adds decisions and is stuck):
  /// one of the dropped activations that cost the step most retained again,
  /// and where the plan then peaks at least as high, with a drop the greedy
  /// would pick at the op it now peaks at; the current plan becomes the
  /// trial with the least peak under `below` (true), else stays (false)
  /// (AutoSolverBetween.cpp).
  llvm::Expected<bool> swapBelow(int64_t below);
  /// The plans one decision away from the member `upper` (a drop, or a
  /// drop turned the other way; an offload also with the other copies
  /// where `upper` placed them; an offload's prefetch issued after the peak
  /// node) whose peak is below `upper`'s and at least `lowerPeak` and whose
  /// step is under `lowerStep`: members between two members far apart
  /// (AutoSolverBetween.cpp).
  llvm::Expected<std::vector<BetweenPlan>>
  plansBetween(llvm::ArrayRef<Decision> upper,
               llvm::ArrayRef<CopyHint> upperHints, int64_t lowerPeak,
               double lowerStep) const;
  /// Keeps values needed only after the peak node off the peak op: moves an
  /// offload's prefetch issued before it to after the peak node, or offloads
  /// a retained value live across it with such a prefetch, whichever lowers
  /// the peak for the least step time (AutoSolverLatePrefetch.cpp).
  llvm::Expected<bool> latePrefetch(const Positions &pos, const Batch &batch);
  /// Moves for values live across the peak op only because a recompute
  /// chain run at or before the peak node read them: the chains' values
  /// offloaded instead, the value's prefetch issued after the peak node
  /// (AutoSolverChainReaders.cpp).
  std::vector<LateMove> chainReaderMoves(const Positions &pos) const;
  /// Where no late prefetch lowers the peak: each chain-reader move followed
  /// by the greedy down to below the peak (or to `level`); true when the
  /// peak fell (that plan kept), false with the plan as it was.
  llvm::Expected<bool> chainReadersAhead(const Positions &pos, int64_t level);
  /// Where the ladder is stuck at `level` and no seed fits it: late
  /// prefetches (latePrefetch), each followed by the greedy, until the peak
  /// holds the level (true) or no move lowers it (false).
  llvm::Expected<bool> reduceLate(int64_t level);
  std::string explain(size_t a, llvm::ArrayRef<Decision> decisions,
                      const Evaluation &eval);
  /// Every decision of `solution` explained (explain), each with its note
  /// where `notes` has one (refine's).
  void explainAll(AutoSolution &solution,
                  llvm::ArrayRef<std::string> notes = {});
  /// The last step of the solve: a bounded local search on the current plan
  /// (moves of one or two decisions, ranked by estimated step time saved per
  /// byte, each evaluated whole), keeping a move where the peak stays <= `cap`,
  /// the host budget holds and the step gets faster but no faster than
  /// `floor`. The moves kept; `notes` gets what each changed activation was
  /// (AutoSolverRefine.cpp).
  /// `lowerFloor(n)`, where given, is asked once, where the floor first
  /// turns a move down, for a floor at most `floor` to go on with instead
  /// (from a solve whose refine makes at most `n` evaluations, 0: any).
  using LowerFloor = std::function<llvm::Expected<FloorNear>(unsigned, double)>;
  llvm::Expected<unsigned> refine(int64_t cap, double floor,
                                  std::vector<std::string> &notes,
                                  const LowerFloor &lowerFloor = {});

  static bool improves(const Evaluation &next, const Evaluation &prev) {
    if (next.peakBytes != prev.peakBytes)
      return next.peakBytes < prev.peakBytes;
    auto atPeak = [](const Evaluation &e) {
      return llvm::count(e.memory.deviceAtOp, e.peakBytes);
    };
    return atPeak(next) < atPeak(prev);
  }

  const Evaluator &evaluator;
  const ActivationAnalysis &analysis;
  const TrainingGraph &graph;
  const DeviceProfile &device;
  llvm::ArrayRef<ActivationInfo> acts;
  const PlanOptions &options;
  llvm::ArrayRef<AutoSeed> seeds;
  AutoSolverOptions solverOptions;

  std::vector<Decision> current;
  /// Copy placements the current offloads need (one per activation).
  std::vector<CopyHint> currentHints;
  Evaluation currentEval;
  /// Activations in the order offload candidates are judged: hardest to
  /// recompute (per byte) first, then largest, then lowest id.
  std::vector<int32_t> offloadOrder;
  int64_t offloadedBytes = 0;
  /// contentionRate(): an offload's copies cost this much compute time per
  /// microsecond of copying even when the copy model hides them.
  double contentionPerCopyUs = 0.0;
  /// Per node: the compute time it loses per microsecond of one copy moving
  /// beside it, 1 - 1 / kernelSlowdown (the simulator's rule); made by the
  /// first contentionBetweenUs (most solves never ask).
  mutable std::vector<double> copyLoss;
  /// contentionBetweenUs's timeline of the last placement asked about (kept,
  /// so that its pointer is not reused): the compute stream's segments (each
  /// node's chain, then the node) as their ends and the loss summed to them.
  mutable std::shared_ptr<const Placement> lossPlacement;
  mutable std::vector<double> lossEndUs, lossSumUs;
  /// While set, candidatesAt offers only candidates that cost no time.
  bool freeOnly = false;
  /// While set, candidatesAt offers no copy-time trades.
  bool noTrades = false;
  /// Per activation: its tied class, or -1 (AutoSolverOptions::tiedClasses).
  std::vector<int32_t> tieClass;
  /// analysis.activationIndex of every value, and each activation's
  /// lastForwardUse, as flat arrays: index() reads them for every buffer
  /// of every schedule, where the two lookups of activationIndex and the
  /// 248-byte ActivationInfo were a cache miss each (~45% of index()).
  std::vector<int32_t> activationOfValue;
  std::vector<NodeId> lastForwardUseOf;
  /// The greedy's batch and memory (reduceToAfresh), their arrays kept from
  /// one batch to the next.
  Batch greedyBatch;
  MaxTree greedyTree;
  /// index()'s last schedule and its positions.
  mutable std::shared_ptr<const Schedule> indexedSchedule;
  mutable std::shared_ptr<const Positions> indexedPositions;
  /// While set, reduceTo ties its picks across their classes.
  bool tying = false;
  /// While set (and tying), a tied pick takes only the members that bring
  /// its op down to the level (descendTied).
  bool partialTies = false;
  /// Set by reduceLate: the plan its first chain-reader move started from,
  /// which the ladder keeps as a member (faster, its peak higher).
  std::optional<State> chainReadersFrom;
  /// The copy hints of the ladder member solve() returned (empty for a
  /// seed: its copies are placed by default).
  std::vector<CopyHint> chosenHints;
  /// The step refineSolution may not go below: that of the slowest plan of
  /// the family a larger budget could get (above the budget, no slower than
  /// the plan chosen), so more budget never gets a slower plan.
  double refineFloor = 0.0;
  /// The least peak of a member above the budget (-1: none): the next
  /// budget at which the family gives another plan.
  int64_t nextPeakAbove = -1;
  /// The least peak kRefineBelow ladder members below the plan chosen (or of
  /// a seed), and the evaluations building the ladder to there took: what
  /// refining reads (-1, 0: this solve's least peak and evaluations).
  int64_t refineLeastPeak = -1;
  size_t refineEvaluationBase = 0;
  /// Whether refine may widen an offload's copies (refineSolution).
  bool widenCopies = true;
  /// The family solve() went through (none while tying), and whether it
  /// answered with the family's last solution.
  AutoFamily *usedFamily = nullptr;
  bool answersAgain = false;
  unsigned refineLimit = 0;
  double refineStopUs = -std::numeric_limits<double>::infinity();
  bool stopped = false;
  bool solvedAgain = false;
  /// setVerdicts's (none: every trial evaluated).
  Verdicts *verdicts = nullptr;
  /// setWorkers's.
  Workers *workers = nullptr;
  /// solve() left a feasible plan's reasons to refineSolution, which
  /// explains the plan it returns (refined or not).
  bool reasonsDeferred = false;
  /// The evaluator's count when the solve began (refine's budget is a share
  /// of the solve's evaluations).
  size_t evaluationsBefore = 0;
  /// Spacing of the ladder's levels in bytes.
  int64_t stepBytes = 1;
  /// What the ladder's searches found at the levels built so far
  /// (AutoSolverOptions::ladderMemo; buildLadder).
  LadderMemo memo;
  /// The last reduceTo calls: what each started from (its plan, host bytes,
  /// level and flags) and ended with, and the evaluations it made.
  struct Reduction {
    std::vector<Decision> decisions;
    std::vector<CopyHint> hints;
    int64_t offloaded = 0;
    int64_t level = 0;
    unsigned flags = 0;
    State result;
    bool reached = false;
    size_t evaluations = 0;
  };
  std::vector<Reduction> reductions;
  /// Evaluations the reductions answered from `reductions` would have made:
  /// counted as made (refine's budget is a share of the solve's
  /// evaluations, and must not depend on what was reused).
  size_t reusedEvaluations = 0;

public:
  /// The evaluations the solve made so far, those reused included.
  size_t solveEvaluations() const {
    return evaluator.getEvaluations() + reusedEvaluations - evaluationsBefore;
  }
};

/// Candidate order: least time per freed byte, then recompute before
/// offload, then hardest alternative first, then largest, then lowest id.
bool betterCandidate(const Candidate &x, const Candidate &y);

/// The first best of `cands` (non-empty) by betterCandidate, as
/// std::min_element finds it, with each candidate's score computed once;
/// the scores and ties of `batch`'s recompute candidates read from
/// Batch::recomputeKey.
const Candidate *bestCandidate(llvm::ArrayRef<const Candidate *> cands,
                               const Batch *batch = nullptr);

} // namespace lethe::autosolver

namespace lethe {

class AutoFamily {
public:
  /// What the ladder is built from, to tell a solve of another step (or of
  /// other options) from one this family may serve.
  struct Inputs {
    size_t activations = 0;
    int64_t baselinePeak = 0;
    double baselineStep = 0.0;
    int64_t hostBudget = 0;
    double levelStep = 0.0;
    bool latePrefetch = false, chainReaders = false,
         recomputeChainInput = false, ladderMemo = false;
    std::vector<std::vector<Decision>> seeds;
    bool operator==(const Inputs &other) const {
      return activations == other.activations &&
             baselinePeak == other.baselinePeak &&
             baselineStep == other.baselineStep &&
             hostBudget == other.hostBudget && levelStep == other.levelStep &&
             latePrefetch == other.latePrefetch &&
             chainReaders == other.chainReaders &&
             recomputeChainInput == other.recomputeChainInput &&
             ladderMemo == other.ladderMemo && seeds == other.seeds;
    }
    bool operator!=(const Inputs &other) const { return !(*this == other); }
  };
  /// Where the ladder's loop checked its end condition: the members built
  /// and the solve's evaluations so far (refine's budget is a share of
  /// them).
  struct Check {
    size_t members = 0;
    size_t evaluations = 0;
  };

  /// The loop of Solver::buildLadder replayed for a budget on the checks:
  /// the check at which it ends, if the ladder reaches it, and the first
  /// member that fits the budget.
  struct Replay {
    std::optional<size_t> end;
    std::optional<size_t> firstFit;
  };
  Replay replay(int64_t budget) const;

  Inputs inputs;
  std::vector<autosolver::Member> ladder;
  std::vector<Check> checks;
  /// The ladder ended by itself (no level left, or stuck), not at a budget.
  bool complete = false;
  /// Where an unfinished ladder goes on: the plan the loop left, and the
  /// next level index.
  autosolver::State resume;
  autosolver::LadderMemo resumeMemo;
  unsigned nextLevel = 1;
  std::vector<Evaluation> seedEvals;
  /// The last solution solveAuto returned through the family, refined as
  /// `refined` says, at `budget`: a solve is a function of the inputs and the
  /// budget (the ladder's members and refine's evaluation budget do not
  /// depend on what the family held before), so one asked again for that
  /// budget is answered with it. The pipeline asks so each time its walk
  /// down keeps a plan: it plans the kept budget again for the plan it
  /// states.
  struct Solved {
    int64_t budget = 0;
    bool refined = false;
    AutoSolution solution;
  };
  std::optional<Solved> solved;
};

} // namespace lethe

#endif // LETHE_LIB_PLANNER_AUTOSOLVERIMPL_H

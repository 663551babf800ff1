//===- AutoSolverTypes.h - What the fast `auto` solver uses -----*- C++ -*-===//
//
// The value types of the Solver (AutoSolverImpl.h): where things are in the
// schedule, the greedy's candidates and batches, the searches' moves, the
// verdicts on trials already evaluated, a snapshot of the current plan.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_AUTOSOLVERTYPES_H
#define LETHE_LIB_PLANNER_AUTOSOLVERTYPES_H

#include "lethe/Planner/AutoSolver.h"

#include "CopyModel.h"
#include "MaxTree.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lethe::autosolver {

/// Ladder levels built below the first one that fits the budget: a member is
/// the fastest plan this far down. Random graphs 9100-9699 in 5% budget
/// steps rose with the budget on 7 of 600 graphs at 3, 4 at 4, 2 at 5, 1 at
/// 6 (a faster plan deeper down); the corpus solves summed +3% at 4, +12% at
/// 5, +18% at 6 (bench/results/scaling.md, 2026-11-27). Read by the ladder
/// (AutoSolver.cpp) and by its replay (AutoSolverFamily.cpp).
constexpr unsigned kLookBelow = 4;

/// Where things are in the current schedule.
struct Positions {
  std::vector<OpIndex> nodeOp;
  /// First op of the recompute chain run before node i (nodeOp[i] if none).
  std::vector<OpIndex> regionStart;
  /// The node whose region an op belongs to (after-ops of node i belong to
  /// node i + 1).
  std::vector<NodeId> opNode;
  /// Per activation: op that frees its produced buffer (last op if never).
  std::vector<OpIndex> producedFree;
  /// Per retained activation: the node before which it is needed again
  /// after its forward life (its restore point if it were dropped).
  std::vector<NodeId> needNode;
  /// Per offloaded activation: its release and prefetch ops.
  std::vector<OpIndex> releaseOp, prefetchOp;
};

/// A lower bound on the device peak of `eval`'s plan with offloaded
/// activation `a` retained instead (its other decisions and copy hints
/// the same), or INT64_MIN where none is known; `nodeOp` and `regionStart`
/// as Positions has them for `eval`'s schedule. What may and may not move
/// when `a`'s copies leave the queues: AutoSolverSearch.cpp.
/// unexposeOffloads skips a trial this proves over the level.
int64_t retainedPeakBound(const ActivationAnalysis &analysis,
                          const Evaluation &eval,
                          llvm::ArrayRef<OpIndex> nodeOp,
                          llvm::ArrayRef<OpIndex> regionStart, int32_t a);

/// The device peak of `eval`'s plan with its copies changed alone: the
/// copy hints `hints` (one per activation) and the offloaded activations
/// `retained` retained, each of them without a re-derived view or input and
/// not a checkpoint; INT64_MIN where one is not such. Exact: no chain and
/// no node time moves, so the trial's copies are placed on `eval`'s times
/// (placeCopies) and every buffer but the offloaded ones is made and freed
/// by the same compute ops, whose memory bounds every copy op's; `nodeOp`
/// and `regionStart` as Positions has them for `eval`'s schedule
/// (AutoSolverSearch.cpp). polish and unexposeOffloads skip a trial this
/// puts over the level.
int64_t copyOnlyPeak(const ActivationAnalysis &analysis,
                     const DeviceProfile &device, const Evaluation &eval,
                     llvm::ArrayRef<OpIndex> nodeOp,
                     llvm::ArrayRef<OpIndex> regionStart,
                     llvm::ArrayRef<int32_t> retained,
                     llvm::ArrayRef<CopyHint> hints);

/// A plan of the ladder.
struct Member {
  std::vector<Decision> decisions;
  std::vector<CopyHint> hints;
  int64_t peak = 0;
  double step = 0.0;
  unsigned level = 0;
};

struct Candidate {
  int32_t act = -1;
  Decision decision = Decision::Retain;
  double costUs = 0.0;
  /// Part of costUs the kernels beside its copies lose (offload only):
  /// what any offload costs, so a "free" offload may have it.
  double contentionUs = 0.0;
  int64_t bytes = 0;
  /// Bytes freed at the op considered (the activation's bytes, less what
  /// other offloads stop freeing there because of this one).
  int64_t benefit = 0;
  /// Tie-break for equal cost per byte: how hard the alternative is
  /// (recompute time per byte for an offload; infinity if it cannot be
  /// recomputed).
  double difficulty = 0.0;
  size_t gapBegin = 0, gapEnd = 0;
  size_t chainPos = 0;
  int64_t chainExtra = 0;
  NodeId restore = -1;
  /// Offload: the copy placement it needs (default: hidden copies).
  CopyHint hint;
  llvm::SmallVector<NodeId, 4> newChainNodes;

  double score() const {
    return costUs / static_cast<double>(std::max<int64_t>(1, benefit));
  }
};

/// State of one greedy batch: positions are those of the schedule the
/// batch started from.
struct Batch {
  /// Per activation: restore point if dropped (-1: not a candidate).
  std::vector<NodeId> restore;
  /// Per activation: its recompute candidate (act = -1 if none).
  std::vector<Candidate> recompute;
  /// Per activation: its recompute candidate's score() and the fields
  /// betterCandidate breaks its ties on, set wherever the candidate's cost
  /// is: bestCandidate reads them instead of the Candidate, a cache miss at
  /// every pick for each live candidate, most of them tied in a step of
  /// repeated layers (18% of planning a 200k-op step at 70%).
  struct RecomputeKey {
    double score = 0.0, difficulty = 0.0;
    int64_t bytes = 0;
  };
  std::vector<RecomputeKey> recomputeKey;
  void setRecomputeKey(const Candidate &c) {
    recomputeKey[c.act] = {c.score(), c.difficulty, c.bytes};
    if (!keyMoved.empty() && !keyMoved[c.act]) {
      keyMoved[c.act] = 1;
      movedKeys.push_back(c.act);
    }
  }
  /// betterCandidate(recompute[a], recompute[b]), from the keys.
  bool recomputeBefore(int32_t a, int32_t b) const;
  /// The best recompute candidate that frees op `op` (the best of the
  /// recomputes candidatesAt lists there), or null: the first in
  /// recomputeOrder that frees it, against those whose keys moved since.
  /// Each pick scanned every live activation: quadratic in the step, whose
  /// picks grow with it (477 and 948 on 100k and 200k-op steps at 50%).
  const Candidate *bestRecomputeAt(size_t op);
  /// Sorts recomputeOrder afresh and forgets the moved keys.
  void sortRecomputes();
  /// The batch's recompute candidates by recomputeBefore as of the last
  /// sort; those before `orderHead` are picked.
  std::vector<int32_t> recomputeOrder;
  size_t orderHead = 0;
  /// The candidates whose keys changed since (marked in keyMoved, empty
  /// until the batch is prepared).
  std::vector<int32_t> movedKeys;
  std::vector<uint8_t> keyMoved;
  /// Per activation: its entry in the live arrays below, -1 if none.
  std::vector<int32_t> liveIndex;
  std::vector<uint8_t> picked;
  /// (restore, activation), sorted.
  std::vector<std::pair<NodeId, int32_t>> byRestore;
  /// Chain nodes added by the batch: (restore << 32) | node.
  llvm::DenseSet<uint64_t> chain;
  /// Per activation: what offloading it would do to the copy queues as they
  /// stand (cleared when the queues change).
  std::vector<std::optional<planner::CopyWhatIf>> whatIf;
  /// The same for a copy-time trade (its hint, the what-if).
  std::vector<std::optional<std::pair<CopyHint, planner::CopyWhatIf>>>
      tradeWhatIf;
  /// The activations that may be dropped, with the ops their produced
  /// buffer is live between, as flat arrays (scanned at every pick).
  std::vector<int32_t> liveAct;
  std::vector<OpIndex> liveBegin, liveEnd;
  /// The same entries' recompute gap (empty where there is no recompute
  /// candidate; picks never move it), whether they may be offloaded, and
  /// their bytes: the scan reads no ActivationInfo or Candidate of an
  /// activation that is not a candidate (a cache miss each: most of the
  /// scan's time on a 100k-op step).
  std::vector<size_t> liveGapBegin, liveGapEnd;
  std::vector<uint8_t> liveOffloadable;
  std::vector<int64_t> liveBytes;
  /// Scratch of candidatesAt: offload candidates judged in the last call.
  std::vector<Candidate> offloadScratch;
};

/// What a caller of Solver::reduceTo keeps of the plan it leaves, which is
/// simulated only as far as that needs: by default the plan, simulated;
/// with `onlyReached`, only a plan that reaches the level (one that does not
/// is left not simulated, and the caller restores its own plan); and only
/// one whose step is under `fasterThanUs` (one that is not may be left with
/// a step of +infinity). swapCostly keeps a swap that reaches the level
/// faster, replaceTrades a plan without trades that reaches it.
struct ReduceKeeps {
  bool onlyReached = false;
  double fasterThanUs = std::numeric_limits<double>::infinity();
  /// The plan left judged by its memory alone, not simulated: the ladder's
  /// polish simulates it as far as it reads its step.
  bool memoryOnly = false;
};

/// A move of the late-prefetch step (AutoSolverLatePrefetch.cpp,
/// AutoSolverChainReaders.cpp): decisions and copy hints changed together.
struct LateMove {
  struct Change {
    int32_t act;
    Decision decision;
    CopyHint hint;
  };
  llvm::SmallVector<Change, 2> changes;
  /// The value it keeps off the peak op, and its bytes (the order moves are
  /// tried in: the largest first).
  int32_t act = -1;
  int64_t bytes = 0;
  /// Chain-reader moves only: where the move fails with `act` offloaded and
  /// prefetched late, it is tried again with `act` recomputed at its own
  /// restore point (AutoSolverChainReaders.cpp).
  bool orRecomputeInput = false;
};

/// A plan between two ladder members (plansBetween).
struct BetweenPlan {
  std::vector<Decision> decisions;
  std::vector<CopyHint> hints;
  int64_t peak = 0;
  double step = 0.0;
};

/// What evaluating plans told of them, kept so that a plan asked for again
/// is turned down without evaluating it where the first evaluation proves
/// it would be: its device and host peaks, and its step (exact where it was
/// simulated whole, else known to exceed the limit it was cut at). By the
/// contract of EvaluationLimits, a caller that compares the peak with a cap
/// and the step with a limit decides on a cut evaluation as on the whole
/// one, so it decides on a verdict alike. The solves nested for refine's
/// floor (solveAt) refine the plan the caller's solve refines, or one a
/// move away, and ask for many of its trials again (Llama-8l at 50%: 117 of
/// refine's 458 evaluations); the ladder's polish, probes and flips ask
/// again for trials an earlier level or probe turned down (Llama-8l at its
/// least: 147 of polish's 312). Keeps at most kMaxVerdictBytes of plans.
class Verdicts {
public:
  /// Whether `decisions` with `hints` was evaluated and is known to be over
  /// `peakCap` on the device or `hostCap` on the host, or to take at least
  /// `stepLimitUs` (more than it, where `tieKept`: the caller keeps a plan
  /// as fast).
  bool knownNoBetter(llvm::ArrayRef<Decision> decisions,
                     llvm::ArrayRef<CopyHint> hints, int64_t peakCap,
                     int64_t hostCap, double stepLimitUs,
                     bool tieKept = false) const;
  /// Keeps what `eval`, evaluated within `limits`, tells of its plan.
  void record(llvm::ArrayRef<Decision> decisions,
              llvm::ArrayRef<CopyHint> hints, const Evaluation &eval,
              const EvaluationLimits &limits);
  /// The trials knownNoBetter turned down.
  size_t getAnswered() const {
    std::lock_guard<std::mutex> lock(mutex);
    return answered;
  }

private:
  struct Entry {
    std::vector<Decision> decisions;
    std::vector<CopyHint> hints;
    int64_t peak = 0, hostPeak = 0;
    /// The step where `exact` (simulated whole), else a value it exceeds.
    double stepUs = 0.0;
    bool exact = false;
  };
  const Entry *find(llvm::ArrayRef<Decision> decisions,
                    llvm::ArrayRef<CopyHint> hints, uint64_t hash) const;
  llvm::DenseMap<uint64_t, llvm::SmallVector<unsigned, 1>> byHash;
  std::vector<Entry> entries;
  size_t keptBytes = 0;
  mutable size_t answered = 0;
  /// The searches' forks (Solver::fork) share the verdicts across threads.
  mutable std::mutex mutex;
};

/// What the ladder's searches found at the levels above that tells which
/// of their trials at the next level are not worth making (docs/Planner.md,
/// "Fewer trials where they do not pay"). Kept where an unfinished ladder
/// goes on (AutoFamily), so that a ladder resumed by a later solve skips
/// what one built in one go skips.
struct LadderMemo {
  /// Per activation: the last level at which flipCostly tried it as
  /// `flipFailedTo` and did not keep it (-1: none since it was last kept).
  std::vector<int64_t> flipFailedAt;
  std::vector<Decision> flipFailedTo;
  /// The last level at which replaceTrades found the plan without copy-time
  /// trades slower than the plan by more than kSlowReplacement, or skipped
  /// it for that (-1: none).
  int64_t slowReplacementAt = -1;
};

/// Snapshot of the solver's current plan.
struct State {
  std::vector<Decision> decisions;
  std::vector<CopyHint> hints;
  Evaluation eval;
  int64_t offloaded = 0;
};

} // namespace lethe::autosolver

#endif // LETHE_LIB_PLANNER_AUTOSOLVERTYPES_H

//===- BoundRelaxation.h - The lower bound's LP (private) -------*- C++ -*-===//
//
// The relaxation of docs/Bound.md as a class, shared by Bound.cpp (the
// columns, the memory points and their copy cuts, row generation) and
// BoundContention.cpp (kernels slowed by the copies beside them).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_BOUNDRELAXATION_H
#define LETHE_LIB_PLANNER_BOUNDRELAXATION_H

#include "lethe/Planner/Bound.h"
#include "lethe/Planner/ExactModel.h"

#include "Milp.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <vector>

namespace lethe {
struct DeviceProfile;
} // namespace lethe

namespace lethe::bound {

/// Rows are in MiB and microseconds: both stay within a few decades of 1 on
/// real graphs, which keeps the simplex well scaled.
constexpr double kMiB = 1024.0 * 1024.0;
/// Breakpoints of the copy cuts: release thresholds spread over the forward
/// part's time, restore deadlines over the backward part's nodes. More make
/// the bound tighter and the LP larger. 256 thresholds (16 before
/// 2026-11-27) are about 0.1 ms apart on the corpus's forwards, where a
/// copy out of one activation takes 0.1-2 ms (bench/results/bound.md: the
/// bound rose in 31 of 78 corpus cells, Mixtral 60% by 0.13 points).
constexpr int kNumReadyThresholds = 256;
constexpr int kNumDeadlines = 32;
/// Row generation: nodes added per round (the most violated first), and the
/// limits after which the bound so far is returned (still valid).
constexpr int kPointsPerRound = 32;
/// Nodes added in one round are at least numNodes / this apart.
constexpr int kPointSpacingDivisor = 256;
constexpr int kMaxRounds = 80;
constexpr double kTimeLimitSec = 30.0;
/// Pieces of the late-recompute cost per point (addLateRecompute).
constexpr int kLatePieces = 8;
/// The copy coverage's rows join LPs of at most this many columns
/// (addCoverageRows): every corpus graph's but Mamba's.
constexpr int kCoverageMaxColumns = 5000;
/// Nodes at which the contention is split into before and after
/// (addPhaseSplit): the nodes that must free the most, at least
/// numNodes / kPointSpacingDivisor apart. Each adds two dense rows.
constexpr int kPhaseSplits = 16;

class Relaxation {
public:
  Relaxation(const ExactModel &model, const DeviceProfile &device,
             const PlanOptions &options, double baselineStepUs);

  /// Fixes each activation's columns to `fixed`'s decision (boundStepTime's
  /// `fixed`); an error where the decision is not allowed.
  llvm::Error fixDecisions(llvm::ArrayRef<Decision> fixed);
  /// Runs row generation; fills `bound`'s status fields and `overheadUs`
  /// (the bound on step time minus the unplanned step's).
  llvm::Error solve(OverheadBound &bound, double &overheadUs);

private:
  /// Per node p: the sum over activations in their gap at p (last forward
  /// use < p < first backward use) of `weight(a)`.
  template <typename Weight> std::vector<double> gapSums(Weight weight) const;
  /// Activations in their gap at node p.
  const std::vector<int> &gapAt(NodeId p);
  void addPoint(NodeId p);
  /// The checkpoints' terms of point p's memory row, and their absent parts
  /// as members of absentParts[p].
  void addCheckpoints(NodeId p, std::vector<std::pair<int, double>> &memory);
  void addLateRecompute(NodeId p);
  /// A copy cut of point p: family k < kNumReadyThresholds is the D2H cut
  /// with threshold k, the others the H2D cut with deadline
  /// k - kNumReadyThresholds.
  void addCut(NodeId p, int k);
  bool cutValid(NodeId p, int k) const;
  /// Cut k's window at p (microseconds, before the overhead).
  double cutWindow(NodeId p, int k) const;
  /// The most MiB per microsecond of its window cut k moves (separate's
  /// estimate at a node that is not a point yet): the channel's rate
  /// lowered by the copies' fixed costs, `perCopy` copies per MiB.
  double cutRate(int k, double perCopy) const;
  /// A lower bound on the copies per MiB of any bytes absent at p: one
  /// over the largest offloadable activation (or checkpoint) in its gap at
  /// p, since no copy holds more. (Not the gap's count over its MiB: the
  /// fewest copies that hold b MiB, largest first, grow convexly in b.)
  double copiesPerMiB(NodeId p);
  /// Per node, the largest offloadable MiB in its gap there (copiesPerMiB;
  /// filled on first use).
  std::vector<double> largestInGap;
  bool cutIncludes(int a, int k) const;
  /// Kernels slowed by the copies moving beside them (docs/Bound.md, §1
  /// "Contention"): the step pays for the time the copies move.
  void addContention(const DeviceProfile &device,
                     const llvm::DenseMap<NodeId, int> &colZ);
  /// Forward kernels beside the D2H copies that start after their
  /// producers (docs/Bound.md, §1 "Copy coverage"; BoundCoverage.cpp):
  /// `addCopyCoverage` finds, per forward node, the offloads whose copy is
  /// sure to move beside it (`coveredBy`); `addCoverageRows` writes them
  /// into phase 1 of the contention splits whose row the answer `x` breaks,
  /// once (false where it added nothing or had before).
  void addCopyCoverage(bool collectives);
  bool addCoverageRows(const std::vector<double> &x);
  std::vector<std::vector<int>> coveredBy;
  bool coverageAdded = false;
  /// Per contention split: its node, its phase-1 extra-time column and its
  /// phase-1 both-ways column.
  struct SplitColumns {
    NodeId node;
    int extra1, both1;
  };
  std::vector<SplitColumns> splitColumns;
  /// Per node, the simulator's slowdown factor beside copies moving one
  /// way and both ways (kernelSlowdown; filled by addContention).
  std::vector<double> slowOne, slowBoth;
  /// The contention split at the kPhaseSplits nodes that must free the
  /// most, where the profile slows kernels beside copies.
  void addPhaseSplits();
  /// The contention split at node p (docs/Bound.md, §1 "Contention split"):
  /// the offloaded bytes absent at p are copied out before p ends and back
  /// in after it, mostly one way at a time.
  void addPhaseSplit(NodeId p);
  /// Chain nodes run once per restore point: `chainOf` has, per chain node
  /// (its column in `colZ`), the activations whose chain it is in.
  void addRestoreRuns(const llvm::DenseMap<NodeId, int> &colZ,
                      const llvm::DenseMap<NodeId, std::vector<int>> &chainOf);
  /// A column at least the part of activation `a` dropped (recomputed, or
  /// offloaded) and restored at a point at or before `by`: its drop column
  /// where its first backward use is by then, else one capped by its drop
  /// and by its readers' own such columns (a reader's chain restores it
  /// early; only by the drop where a reader is a checkpoint, which the
  /// relaxation does not decide), created on first use; -1 where no plan
  /// restores it by then, -2 where `a` has no such drop column.
  int earlyColumn(int a, bool recomputed, NodeId by);
  llvm::DenseMap<std::pair<int, NodeId>, int> earlyCols;
  /// A set by first backward use of a chain node (addRestoreRuns): the
  /// node's runs column and the members in order of first backward use.
  struct FirstUseRun {
    int runs = -1;
    std::vector<int> own;
    bool added = false;
  };
  std::vector<FirstUseRun> firstUseRuns;
  int firstUseRounds = 0;
  void addFirstUseRow(const FirstUseRun &run);
  /// earlyColumn's largest value at the answer `x` (nullopt for -2).
  std::optional<double>
  earlyValue(int a, bool recomputed, NodeId by, const std::vector<double> &x,
             llvm::DenseMap<std::pair<int, NodeId>, double> &memo);
  /// Adds the sets by first backward use that `x` breaks; returns how many.
  int separateFirstUseRuns(const std::vector<double> &x);
  /// Adds the rows the answer `x` breaks; returns how many.
  int separate(const std::vector<double> &x);

  const ExactModel &model;
  int numNodes = 0;
  double slack = 0.0;
  /// Copy rates, MiB per microsecond (the profile's lone rates: no copy in
  /// the simulator is faster).
  double rateD2h = 0.0, rateH2d = 0.0;
  /// Each copy's fixed cost (the profile's d2h_fixed_us, h2d_fixed_us).
  double fixedD2h = 0.0, fixedH2d = 0.0;
  std::vector<double> lo, hi;
  /// Bytes (MiB) a plan must free at each node: every storage resident in
  /// the unplanned step minus the budget.
  std::vector<double> need;
  std::vector<double> bytes, readyLo;
  std::vector<double> thresholds;
  std::vector<NodeId> deadlines;

  milp::Problem lp;
  int colT = -1;
  std::vector<int> colC, colO, pointCol;
  /// Per checkpoint with a drop column, its MiB (0 elsewhere): the memory
  /// rows count it where a chain that reads it is still to run (addPoint).
  std::vector<double> ckBytes;
  /// Per point, what may be absent there: the offloadable activations and
  /// checkpoints in their gap (each with the column of its offload, or for
  /// a checkpoint of its part absent while needed: addCheckpoints) and the
  /// size classes (MiB within a power of two), each a column of its absent
  /// MiB with its largest member, which the copy cuts and the contention
  /// split read (docs/Bound.md, *Fixed costs in the cuts*).
  struct AbsentParts {
    struct Member {
      int activation;
      int col;
      double mib;
      int sizeClass;
    };
    struct Class {
      int exponent;
      int col;
      double largest;
    };
    std::vector<Member> members;
    std::vector<Class> classes;
    /// A class's absent MiB copied at `rate` with `fixed` per copy: the
    /// MiB of channel time per MiB (one copy per `largest` MiB at least).
    double perMiB(int sizeClass, double rate, double fixed) const;
  };
  llvm::DenseMap<NodeId, AbsentParts> absentParts;
  /// Per point p: a column for the recompute work that runs after p starts
  /// (-1: none), which the D2H cuts take off the time before p.
  std::vector<int> lateCol;
  /// Per re-run node (a chain node or a re-derived view): its time and the
  /// restore points at which it may run, ascending (addLateRecompute).
  struct RerunPoints {
    double timeUs = 0.0;
    std::vector<NodeId> points;
  };
  std::vector<RerunPoints> rerunPoints;
  /// One tangent of the contention price (docs/Bound.md, §1 "Contention
  /// levels"): the loss per microsecond charged beside copies moving one
  /// way and both ways, per node the deficit times its time (`U` at this
  /// level), and the column of the re-runs' deficits sum(d_n t_n z_n) (-1:
  /// no chain node has one), defined by an equality row; and the largest
  /// deficit per microsecond of a chain node's re-run, which caps the
  /// deficits of the re-runs that a phase holds by their time.
  struct ContentionLevel {
    double one = 0.0, both = 0.0;
    std::vector<double> unslowedUs;
    int colRerunDeficit = -1;
    double densestRerun = 0.0;
  };
  /// The contention rows' state (addContention; colBoth < 0: no contention
  /// in the profile): the columns of copy time both ways, only D2H, only
  /// H2D; the levels, the first at the least kernel losses; the most and
  /// the least a moving copy's rate is, as fractions of its lone rate (the
  /// least with the other direction moving too, and with it not moving);
  /// and per activation its copy work each way (full-rate microseconds).
  int colBoth = -1, colD2hOnly = -1, colH2dOnly = -1;
  std::vector<ContentionLevel> levels;
  double rateAlone = 1.0, rateBeside = 1.0;
  double leastD2h = 0.0, leastH2d = 0.0;
  double leastD2hAlone = 0.0, leastH2dAlone = 0.0;
  /// The most the simulator adds to one copy op's work in waits, each
  /// direction, and the column of the number of offloads, sum(o_a) (-1
  /// where no wait costs anything): a direction moves at most its copies'
  /// work and their waits.
  double waitsD2hUs = 0.0, waitsH2dUs = 0.0;
  int colOffloads = -1;
  std::vector<double> workD2h, workH2d;
  /// The re-run time sum(t_n z_n) and each direction's copy work
  /// sum(w_a o_a), each a column defined by an equality row: the rows that
  /// read them would otherwise repeat every chain node or activation.
  int colRerun = -1;
  int colWorkD2h = -1, colWorkH2d = -1;
  llvm::DenseSet<int64_t> cuts;
  llvm::DenseMap<NodeId, std::vector<int>> gapCache;
  int numPoints = 0;
};

} // namespace lethe::bound

#endif // LETHE_LIB_PLANNER_BOUNDRELAXATION_H

//===- BoundRuns.cpp - How often the bound's chain nodes run --------------===//
//
// The rows of the lower bound (docs/Bound.md, §1 "Recompute") that count a
// recompute chain node's runs: once per restore point of the activations
// recomputed through it, for sets whose restore points no two share and,
// added where the LP's answer breaks them, for sets by first backward use
// less the members a dropped reader restores early.
//
//===----------------------------------------------------------------------===//

#include "BoundRelaxation.h"

#include <algorithm>

using namespace lethe;
using namespace lethe::bound;

void Relaxation::addRestoreRuns(
    const llvm::DenseMap<NodeId, int> &colZ,
    const llvm::DenseMap<NodeId, std::vector<int>> &chainOf) {
  // A recomputed activation is restored at one of its restore points
  // (ExactModel::restorePoints) and its whole chain runs there, each node
  // once per point (Placement.cpp). Activations whose restore points no two
  // share are restored at distinct points, so a node in all their chains
  // runs at least once for each of them that is recomputed: z_n >= sum c_a
  // over such a set. One set per node, built in restore order (the
  // earliest first restore point first), kept where it has two or more;
  // and one by first backward use, below, for those whose restore points
  // overlap only through readers that few plans drop.
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  for (auto &[node, readers] : chainOf) {
    if (readers.size() < 2)
      continue;
    std::vector<int> order = readers;
    llvm::sort(order, [&](int x, int y) {
      return std::make_pair(acts[x].restorePoints.front(), x) <
             std::make_pair(acts[y].restorePoints.front(), y);
    });
    std::vector<int> apart;
    for (int a : order) {
      llvm::ArrayRef<NodeId> points = acts[a].restorePoints;
      bool disjoint = llvm::all_of(apart, [&](int b) {
        llvm::ArrayRef<NodeId> other = acts[b].restorePoints;
        // Both ascending.
        size_t i = 0, j = 0;
        while (i < points.size() && j < other.size()) {
          if (points[i] == other[j])
            return false;
          points[i] < other[j] ? ++i : ++j;
        }
        return true;
      });
      if (disjoint)
        apart.push_back(a);
    }
    if (apart.size() >= 2) {
      std::vector<std::pair<int, double>> row{{colZ.lookup(node), 1.0}};
      for (int a : apart)
        row.push_back({colC[a], -1.0});
      lp.addRow(0, INFINITY, row);
    }
    // Restore points shared or not, a recomputed activation is restored at
    // its first backward use unless a chain that reads it runs earlier
    // (Placement.cpp), which needs a reader dropped. Take a set of them
    // with distinct first backward uses k_1 < k_2 < ...: where some share a
    // point, all but the one with the least k_j are restored before their
    // own k_j, at a point at or before the k_i of one before them, so
    // z_n >= sum_j c_j - sum_{j >= 2} e_j, with e_j at most c_j and at most
    // the drops of a_j's readers that can run by k_{j-1} (earlyColumn).
    std::vector<int> own = readers;
    llvm::sort(own, [&](int x, int y) {
      return std::make_pair(acts[x].firstBackwardUse, x) <
             std::make_pair(acts[y].firstBackwardUse, y);
    });
    own.erase(std::unique(own.begin(), own.end(),
                          [&](int x, int y) {
                            return acts[x].firstBackwardUse ==
                                   acts[y].firstBackwardUse;
                          }),
              own.end());
    // Added where the answer breaks them (separateFirstUseRuns): their
    // columns for early restores take tens of thousands of rows on Mamba,
    // where they move nothing.
    firstUseRuns.push_back({colZ.lookup(node), std::move(own)});
  }
}

void Relaxation::addFirstUseRow(const FirstUseRun &run) {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  std::vector<std::pair<int, double>> row{{run.runs, 1.0}};
  int members = 0;
  for (size_t j = 0; j < run.own.size(); ++j) {
    int a = run.own[j];
    int early =
        j == 0 ? -1
               : earlyColumn(a, /*recomputed=*/true,
                             acts[run.own[j - 1]].firstBackwardUse);
    if (early == -2 || early == colC[a])
      continue;
    ++members;
    row.push_back({colC[a], -1.0});
    if (early >= 0)
      row.push_back({early, 1.0});
  }
  if (members >= 2)
    lp.addRow(0, INFINITY, row);
}

std::optional<double>
Relaxation::earlyValue(int a, bool recomputed, NodeId by,
                       const std::vector<double> &x,
                       llvm::DenseMap<std::pair<int, NodeId>, double> &memo) {
  // earlyColumn's largest value at the answer x: nullopt for -2, 0 for -1.
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  int dropped = recomputed ? colC[a] : colO[a];
  if (dropped < 0 || acts[a].checkpoint)
    return std::nullopt;
  if (acts[a].firstBackwardUse <= by)
    return x[dropped];
  const std::pair<int, NodeId> key{2 * a + (recomputed ? 1 : 0), by};
  if (auto found = memo.find(key); found != memo.end())
    return found->second;
  double sum = 0.0;
  bool capped = true;
  for (bool recomputes : {true, false})
    for (int r :
         recomputes ? acts[a].recomputeReaders : acts[a].rederiveReaders) {
      if (!capped || acts[r].restorePoints.empty() ||
          acts[r].restorePoints.front() > by)
        continue;
      std::optional<double> value = earlyValue(r, recomputes, by, x, memo);
      capped = value.has_value();
      sum += value.value_or(0.0);
    }
  return memo[key] = capped ? std::min(x[dropped], sum) : x[dropped];
}

int Relaxation::separateFirstUseRuns(const std::vector<double> &x) {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::DenseMap<std::pair<int, NodeId>, double> memo;
  int added = 0;
  for (FirstUseRun &run : firstUseRuns) {
    if (run.added)
      continue;
    double least = 0.0;
    for (size_t j = 0; j < run.own.size(); ++j) {
      int a = run.own[j];
      std::optional<double> early =
          j == 0 ? 0.0
                 : earlyValue(a, /*recomputed=*/true,
                              acts[run.own[j - 1]].firstBackwardUse, x, memo);
      if (early)
        least += x[colC[a]] - *early;
    }
    if (x[run.runs] < least - 1e-6 * std::max(1.0, least)) {
      addFirstUseRow(run);
      run.added = true;
      ++added;
    }
  }
  // Where the next answer breaks others again, all join: adding only the
  // broken ones took up to 10 rounds (Llama-timed 60%, 1 s).
  if (added > 0 && ++firstUseRounds >= 2)
    for (FirstUseRun &run : firstUseRuns)
      if (!run.added) {
        addFirstUseRow(run);
        run.added = true;
        ++added;
      }
  return added;
}

int Relaxation::earlyColumn(int a, bool recomputed, NodeId by) {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  int dropped = recomputed ? colC[a] : colO[a];
  if (dropped < 0 || acts[a].checkpoint)
    return -2;
  // Restored at its first backward use, when that is by `by`.
  if (acts[a].firstBackwardUse <= by)
    return dropped;
  const std::pair<int, NodeId> key{2 * a + (recomputed ? 1 : 0), by};
  if (auto found = earlyCols.find(key); found != earlyCols.end())
    return found->second;
  // Else a reader's chain runs at its restore point, by `by`: the reader is
  // dropped and restored by then itself. Where a reader the relaxation does
  // not decide (a checkpoint) can be, only the drop caps it; where none
  // can, -1.
  std::vector<std::pair<int, double>> cap;
  for (bool recomputes : {true, false})
    for (int r :
         recomputes ? acts[a].recomputeReaders : acts[a].rederiveReaders) {
      if (acts[r].restorePoints.empty() || acts[r].restorePoints.front() > by)
        continue;
      int col = earlyColumn(r, recomputes, by);
      if (col == -2)
        return earlyCols[key] = dropped;
      if (col >= 0)
        cap.push_back({col, -1.0});
    }
  if (cap.empty())
    return earlyCols[key] = -1;
  int col = lp.addColumn(0, INFINITY, 0, false);
  lp.addRow(-INFINITY, 0, {{col, 1.0}, {dropped, -1.0}});
  cap.push_back({col, 1.0});
  lp.addRow(-INFINITY, 0, cap);
  return earlyCols[key] = col;
}

//===- BoundCoverage.cpp - Forward kernels beside D2H copies, in the bound ===//
//
// The copy-coverage rows of the lower bound (docs/Bound.md, §1 "Copy
// coverage"): the schedule issues an offload's D2H copy right after the
// node that makes its content final, on a stream that runs its copies one
// after the other, so the copy moves beside the kernels that follow that
// node for at least its own duration. The contention rows let a plan's
// copies meet the kernels that lose least wherever they are; these columns
// mark the forward kernels an offload's copy cannot avoid, which phase 1 of
// each contention split then pays. They join the LP once the other rows
// have converged: added from the start they changed the simplex's path so
// that row generation took 7 rounds instead of 2 on DiT-B/2 at 50%.
//
//===----------------------------------------------------------------------===//

#include "BoundRelaxation.h"

#include <algorithm>

using namespace lethe;
using namespace lethe::bound;

void Relaxation::addCopyCoverage(bool collectives) {
  // A copy paused by a collective (copies that yield) moves beside
  // nothing, and a collective's node may end before the copy is issued:
  // only steps without collectives.
  if (collectives || colBoth < 0 || workD2h.empty())
    return;
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  const NodeId forwardEnd = model.firstBackward();
  // Per node, the activations whose copies it is beside.
  coveredBy.assign(numNodes, {});
  for (size_t a = 0; a < acts.size(); ++a) {
    if (colO[a] < 0 || acts[a].checkpoint || !(workD2h[a] > 0))
      continue;
    // The copy takes at least its work at the fastest rate a copy moves,
    // and the kernels after its node take at most their slowest wall time
    // each: those that fit in that time run beside it (or the compute
    // stream spends the time otherwise, which the step pays in full).
    const double duration = workD2h[a] / rateAlone;
    double wall = 0.0;
    for (NodeId n = acts[a].contentReadyAfter + 1; n < forwardEnd; ++n) {
      wall += std::max(slowOne[n], slowBoth[n]) * model.nodeTimeUs(n);
      if (wall > duration)
        break;
      if (slowOne[n] > 1.0 && model.nodeTimeUs(n) > 0)
        coveredBy[n].push_back(static_cast<int>(a));
    }
  }
}

bool Relaxation::addCoverageRows(const std::vector<double> &x) {
  // Each split the rows join costs the LP another answer, solved from
  // scratch: not on LPs as large as Mamba's (10,000 columns, 0.4-2.7 s an
  // answer), where they lifted the bound by 0.0016 points at most.
  if (coverageAdded || coveredBy.empty() ||
      lp.numColumns() > kCoverageMaxColumns)
    return false;
  coverageAdded = true;
  // Per covered node, its least extra time, and the most of it the answer
  // `x` makes (its largest covering offload).
  double giveBack = 0.0;
  std::vector<double> extraUs(numNodes, 0.0), answer(numNodes, 0.0);
  for (NodeId n = 0; n < numNodes; ++n) {
    if (coveredBy[n].empty())
      continue;
    extraUs[n] = (slowOne[n] - 1.0) * model.nodeTimeUs(n);
    for (int a : coveredBy[n])
      answer[n] = std::max(answer[n], x[colO[a]]);
    giveBack = std::max(giveBack, std::max(0.0, slowOne[n] - slowBoth[n]));
  }
  // Phase 1 of each contention split: its extra time is at least that of
  // the covered kernels up to p, less what copies moving both ways there
  // give back of it. Only the splits whose row the answer breaks.
  std::vector<const SplitColumns *> broken;
  for (const SplitColumns &split : splitColumns) {
    double charged = -giveBack * x[split.both1];
    for (NodeId n = 0; n <= split.node; ++n)
      charged += extraUs[n] * answer[n];
    if (charged > x[split.extra1] + 1e-6 * std::max(1.0, charged))
      broken.push_back(&split);
  }
  if (broken.empty())
    return false;
  // Consecutive slowed nodes covered by the same offloads share a column
  // (covers are runs of nodes, so they change only at a run's ends): the
  // same relaxation, fewer rows where many short kernels follow one
  // another.
  std::vector<std::pair<NodeId, int>> columns;
  const std::vector<int> *previous = nullptr;
  int col = -1;
  for (NodeId n = 0; n < numNodes; ++n) {
    if (coveredBy[n].empty())
      continue;
    if (!previous || *previous != coveredBy[n]) {
      col = lp.addColumn(0, 1, 0, false);
      for (int a : coveredBy[n])
        lp.addRow(0, INFINITY, {{col, 1}, {colO[a], -1}});
      previous = &coveredBy[n];
    }
    columns.push_back({n, col});
  }
  for (const SplitColumns *split : broken) {
    std::vector<std::pair<int, double>> row{{split->extra1, 1},
                                            {split->both1, giveBack}};
    for (auto [n, column] : columns) {
      if (n > split->node)
        break;
      if (row.back().first == column)
        row.back().second -= extraUs[n];
      else
        row.push_back({column, -extraUs[n]});
    }
    lp.addRow(0, INFINITY, row);
  }
  return true;
}

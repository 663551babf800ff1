//===- BoundCoverage.cpp - Forward kernels beside D2H copies, in the bound ===//
//
// The copy-coverage rows of the lower bound (docs/Bound.md, §1 "Copy
// coverage"): the schedule issues an offload's D2H copy right after the
// node that makes its content final, on a stream that runs its copies one
// after the other, so the copy moves beside the kernels that follow that
// node for at least its own duration. The contention rows let a plan's
// copies meet the kernels that lose least wherever they are; these columns
// mark the forward kernels an offload's copy cannot avoid, which phase 1 of
// each contention split then pays (addPhaseSplit).
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
  // Per node, the activations whose copies it is beside (filled below).
  std::vector<std::vector<int>> coveredBy(numNodes);
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
  for (NodeId n = 0; n < numNodes; ++n) {
    if (coveredBy[n].empty())
      continue;
    int col = lp.addColumn(0, 1, 0, false);
    for (int a : coveredBy[n])
      lp.addRow(0, INFINITY, {{col, 1}, {colO[a], -1}});
    coverCols.push_back({n, col});
    coverUs.push_back((slowOne[n] - 1.0) * model.nodeTimeUs(n));
    coverGiveBack =
        std::max(coverGiveBack, std::max(0.0, slowOne[n] - slowBoth[n]));
  }
}

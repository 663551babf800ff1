//===- BoundStretches.cpp - Copies move in stretches, in the bound --------===//
//
// The copy-stretch rows of the lower bound (docs/Bound.md, §1 "Copy
// stretches"): phase 2 of a contention split lets the copies move beside
// the kernels that lose least wherever those are after the split node. But
// a copy op, once started, moves without a break until it ends, and no
// copy of a large activation is short: the time in which some copy moves
// comes in stretches at least one large copy long (but for the one in
// flight at the split and those holding only small copies). Such stretches
// meet at most the deficits of the densest windows that long, which on the
// vision transformers' backwards is well under all of them: the unslowed
// kernels come in runs shorter than a copy.
//
//===----------------------------------------------------------------------===//

#include "BoundRelaxation.h"

#include <algorithm>
#include <cmath>
#include <deque>

using namespace lethe;
using namespace lethe::bound;

namespace {

/// The most deficit a set of disjoint windows on a grid can meet, less
/// `lambda` per microsecond of their length (Relaxation::addStretchRows):
/// each window at least `minCells` long or paying `mu` per microsecond it
/// falls short, and `bonus` more each (what the partial cells at its ends
/// may hold); one window of any length free of both.
double mostMet(const std::vector<double> &cells, double cellUs, int minCells,
               double minUs, double lambda, double mu, double bonus) {
  const int n = static_cast<int>(cells.size());
  // prefix[i]: the cells before i, less lambda per microsecond.
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + cells[i] - lambda * cellUs;
  // best[f][i]: the most over windows within the first i cells, f free
  // windows used. A window [j, i) is worth prefix[i] - prefix[j] + bonus,
  // less mu (minUs - (i - j) cellUs) where shorter than minUs.
  std::vector<double> best[2] = {std::vector<double>(n + 1, 0.0),
                                 std::vector<double>(n + 1, 0.0)};
  double longBest[2] = {-INFINITY, -INFINITY}, freeBest = -INFINITY;
  // Short windows: the largest best[f][j] - prefix[j] - mu cellUs j over
  // the last minCells starts (a deque of decreasing values).
  std::deque<int> shortStarts[2];
  auto shortKey = [&](int f, int j) {
    return best[f][j] - prefix[j] - mu * cellUs * j;
  };
  for (int i = 1; i <= n; ++i) {
    for (int f = 0; f < 2; ++f) {
      const int j = i - 1;
      while (!shortStarts[f].empty() &&
             shortKey(f, shortStarts[f].back()) <= shortKey(f, j))
        shortStarts[f].pop_back();
      shortStarts[f].push_back(j);
      while (!shortStarts[f].empty() && shortStarts[f].front() <= i - minCells)
        shortStarts[f].pop_front();
      if (i - minCells >= 0)
        longBest[f] =
            std::max(longBest[f], best[f][i - minCells] - prefix[i - minCells]);
    }
    freeBest = std::max(freeBest, best[0][i - 1] - prefix[i - 1]);
    for (int f = 0; f < 2; ++f) {
      double value = best[f][i - 1];
      value = std::max(value, longBest[f] + prefix[i] + bonus);
      if (!shortStarts[f].empty())
        value =
            std::max(value, shortKey(f, shortStarts[f].front()) + prefix[i] +
                                mu * cellUs * i - mu * minUs + bonus);
      if (f == 1)
        value = std::max(value, freeBest + prefix[i] + bonus);
      best[f][i] = value;
    }
  }
  return std::max(best[0][n], best[1][n]);
}

} // namespace

void Relaxation::prepareStretches() {
  // A copy paused by a collective (copies that yield) breaks its stretch.
  if (hasCollectives || colBoth < 0 || splitColumns.empty() || workD2h.empty())
    return;
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  NodeId first = numNodes;
  for (const SplitColumns &split : splitColumns)
    first = std::min(first, split.node);
  // The windows lie after the earliest split node: every split's phase 2
  // is within it, and a larger domain only lifts the most met.
  const double begin = lo[first + 1], end = lo[numNodes];
  if (!(end > begin))
    return;
  const double cellUs = std::max(1.0, (end - begin) / kStretchCells);
  const int numCells = static_cast<int>(std::ceil((end - begin) / cellUs));
  // A slowed kernel's wall time is at most `slowest` times its work: the
  // nodes a stretch of wall time meets are at least 1 / slowest of it.
  double slowest = 1.0;
  for (NodeId n = first + 1; n < numNodes; ++n)
    slowest = std::max({slowest, slowOne[n], slowBoth[n]});
  // The shortest copy of an activation of at least `threshold` MiB: its
  // bytes at the fastest rate any copy moves. Thresholds: the least member
  // of each size class (a power of two) with offloadable members, largest
  // first; those below one are the small copies, whose moving time is
  // bounded by their work at the least rate.
  std::vector<double> sizes;
  for (size_t a = 0; a < acts.size(); ++a)
    if (colO[a] >= 0 && acts[a].bytes > 0)
      sizes.push_back(static_cast<double>(acts[a].bytes) / kMiB);
  llvm::sort(sizes);
  std::vector<double> thresholds;
  for (double mib : sizes)
    if (thresholds.empty() ||
        std::floor(std::log2(mib)) > std::floor(std::log2(thresholds.back())))
      thresholds.push_back(mib);
  std::reverse(thresholds.begin(), thresholds.end());
  if (thresholds.size() > kStretchThresholds)
    thresholds.resize(kStretchThresholds);
  const double fastest = std::max(rateD2h, rateH2d) * rateAlone;
  for (double threshold : thresholds) {
    const double minUs = threshold / fastest / slowest;
    for (auto [k, level] : llvm::enumerate(levels)) {
      // The deficits per cell of the nominal timeline after `first`.
      std::vector<double> cells(numCells, 0.0);
      double densest = 0.0;
      for (NodeId n = first + 1; n < numNodes; ++n) {
        const double t = model.nodeTimeUs(n);
        if (!(t > 0) || !(level.unslowedUs[n] > 0))
          continue;
        const double density = level.unslowedUs[n] / t;
        densest = std::max(densest, density);
        for (double at = lo[n] - begin, stop = at + t; at < stop;) {
          int cell = std::min(numCells - 1, static_cast<int>(at / cellUs));
          double next = cell + 1 == numCells
                            ? stop
                            : std::max(std::nextafter(at, INFINITY),
                                       std::min(stop, (cell + 1) * cellUs));
          cells[cell] += density * (next - at);
          at = next;
        }
      }
      // A stretch's nodes form a window of the nominal timeline; the grid
      // window inside it is at most two cells shorter, and the cells it
      // leaves out hold at most two cells' worth.
      double bonus = 0.0;
      for (double c : cells)
        bonus = std::max(bonus, 2.0 * c);
      const double innerUs = minUs - 2.0 * cellUs;
      if (!(densest > 0) || innerUs < cellUs)
        continue;
      StretchFamily family;
      family.level = static_cast<int>(k);
      family.densest = densest;
      family.threshold = threshold;
      for (int i = 0; i < kStretchLambdas; ++i) {
        const double lambda = densest * i / kStretchLambdas;
        for (double mu : {0.002, 0.005, 0.01, 0.02, 0.05}) {
          // A stretch over no node at all is worth `bonus` less mu times
          // its whole shortfall: never positive, or there is no cap.
          if (mu * innerUs < bonus)
            continue;
          family.tangents.push_back(
              {lambda, mu,
               mostMet(cells, cellUs, static_cast<int>(innerUs / cellUs),
                       innerUs, lambda, mu, bonus)});
        }
      }
      if (!family.tangents.empty())
        stretchFamilies.push_back(std::move(family));
    }
  }
}

int Relaxation::smallCopiesColumn(double threshold) {
  auto [it, inserted] = smallCopyCols.try_emplace(threshold, -1);
  if (!inserted)
    return it->second;
  // Each copy op moves for at most its work and waits at the least rate
  // (the copy-work rows of addContention).
  const double leastOut = std::min(leastD2h, leastD2hAlone);
  const double leastIn = std::min(leastH2d, leastH2dAlone);
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  std::vector<std::pair<int, double>> row;
  for (size_t a = 0; a < acts.size(); ++a)
    if (colO[a] >= 0 && static_cast<double>(acts[a].bytes) / kMiB < threshold)
      row.push_back({colO[a], -((workD2h[a] + waitsD2hUs) / leastOut +
                                (workH2d[a] + waitsH2dUs) / leastIn)});
  if (row.empty())
    return it->second = -2;
  it->second = lp.addColumn(0, INFINITY, 0, false);
  row.push_back({it->second, 1});
  lp.addRow(0, 0, row);
  return it->second;
}

int Relaxation::addStretchRows(const std::vector<double> &x) {
  if (!stretchesPrepared) {
    stretchesPrepared = true;
    prepareStretches();
  }
  if (stretchFamilies.empty() || stretchRounds >= kStretchRounds)
    return 0;
  ++stretchRounds;
  const double leastOut = std::min(leastD2h, leastD2hAlone);
  const double leastIn = std::min(leastH2d, leastH2dAlone);
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  // The small copies' moving time at the answer, per threshold.
  std::map<double, double> smallAt;
  auto smallTime = [&](double threshold) {
    auto [it, inserted] = smallAt.try_emplace(threshold, 0.0);
    if (inserted)
      for (size_t a = 0; a < acts.size(); ++a)
        if (colO[a] >= 0 &&
            static_cast<double>(acts[a].bytes) / kMiB < threshold)
          it->second += x[colO[a]] * ((workD2h[a] + waitsD2hUs) / leastOut +
                                      (workH2d[a] + waitsH2dUs) / leastIn);
    return it->second;
  };
  int added = 0;
  for (const SplitColumns &split : splitColumns) {
    const double both2 = x[colBoth] - x[split.both1];
    const double one2 =
        x[colD2hOnly] - x[split.d2h1] + x[colH2dOnly] - x[split.h2d1];
    // E_2 >= k2 X_2 + k1 Y_2 - (most met + lambda M_2 + mu Q + densest
    // M_small) - D, Q <= T + s: the most broken tangent of each family.
    double worst = 0.0;
    const StretchFamily *worstFamily = nullptr;
    const StretchFamily::Tangent *worstTangent = nullptr;
    for (const StretchFamily &family : stretchFamilies) {
      const ContentionLevel &level = levels[family.level];
      double slack2 = x[split.extra2] - level.both * both2 - level.one * one2 +
                      family.densest * smallTime(family.threshold);
      if (level.colRerunDeficit >= 0)
        slack2 += x[level.colRerunDeficit];
      for (const StretchFamily::Tangent &tangent : family.tangents) {
        double value = slack2 + tangent.most + tangent.lambda * (both2 + one2) +
                       tangent.mu * (x[colT] + slack);
        if (value < worst - 1e-3) {
          worst = value;
          worstFamily = &family;
          worstTangent = &tangent;
        }
      }
    }
    if (!worstFamily)
      continue;
    const ContentionLevel &level = levels[worstFamily->level];
    const double lambda = worstTangent->lambda;
    std::vector<std::pair<int, double>> row{{split.extra2, 1},
                                            {colBoth, lambda - level.both},
                                            {split.both1, level.both - lambda},
                                            {colD2hOnly, lambda - level.one},
                                            {split.d2h1, level.one - lambda},
                                            {colH2dOnly, lambda - level.one},
                                            {split.h2d1, level.one - lambda},
                                            {colT, worstTangent->mu}};
    if (level.colRerunDeficit >= 0)
      row.push_back({level.colRerunDeficit, 1});
    int small = smallCopiesColumn(worstFamily->threshold);
    if (small >= 0)
      row.push_back({small, worstFamily->densest});
    lp.addRow(-worstTangent->most - worstTangent->mu * slack, INFINITY, row);
    ++added;
  }
  return added;
}

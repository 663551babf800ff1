//===- Bound.cpp - A lower bound on any plan's step time ------------------===//
//
// The LP relaxation of docs/Bound.md, solved by row generation: start with
// the rows every plan obeys globally (recompute time, copy channels), solve,
// find the nodes whose memory row the answer breaks, add them, solve again.
// Every LP along the way holds a subset of valid inequalities, so each
// answer is a valid bound; the last one is the full relaxation's when no
// row is broken (`converged`).
//
//===----------------------------------------------------------------------===//

#include "BoundRelaxation.h"

#include "lethe/Planner/Bound.h"
#include "lethe/Planner/ExactModel.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

using namespace lethe;
using namespace lethe::bound;

Relaxation::Relaxation(const ExactModel &model, const DeviceProfile &device,
                       const PlanOptions &options, double baselineStepUs)
    : model(model) {
  numNodes = static_cast<int>(model.numNodes());
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  lo.resize(numNodes + 1);
  double total = 0.0;
  for (NodeId i = 0; i < numNodes; ++i) {
    lo[i] = model.nominalStartUs(i);
    total += model.nodeTimeUs(i);
  }
  lo[numNodes] = total;
  // The unplanned step may wait for collectives on the compute stream: a
  // plan may hide up to that much of its own work in those waits.
  slack = std::max(0.0, baselineStepUs - total);
  hi.resize(numNodes + 1);
  for (NodeId i = 0; i <= numNodes; ++i)
    hi[i] = lo[i] + slack;
  rateD2h = device.d2hBytesPerSec / kMiB / 1e6;
  rateH2d = device.h2dBytesPerSec / kMiB / 1e6;
  fixedD2h = std::max(0.0, device.d2hFixedUs);
  fixedH2d = std::max(0.0, device.h2dFixedUs);

  // Bytes resident at each node in the unplanned step: what every plan
  // keeps (ExactModel's fixed bytes: storages without a decision and the
  // forward part of every activation), the backward part of every
  // activation, and every gap.
  // A checkpoint is resident after its forward uses only while a chain
  // that reads it is still to run, which a plan that recomputes nothing
  // avoids: the unplanned step holds none of it, and the memory rows
  // count it where such a chain is (addCheckpoints).
  std::vector<double> diff(numNodes + 1, 0.0);
  for (const ExactModel::Activation &act : acts) {
    double b = act.checkpoint ? 0.0 : static_cast<double>(act.bytes) / kMiB;
    bytes.push_back(b);
    readyLo.push_back(lo[act.contentReadyAfter] +
                      model.nodeTimeUs(act.contentReadyAfter));
    diff[act.lastForwardUse + 1] += b;
    diff[std::max(act.lastUse, act.firstBackwardUse) + 1] -= b;
  }
  need.resize(numNodes);
  double budget = static_cast<double>(options.budgetBytes) / kMiB;
  double running = 0.0;
  for (NodeId p = 0; p < numNodes; ++p) {
    running += diff[p];
    double fixed =
        static_cast<double>(model.points()[model.nodePoint(p)].fixedBytes) /
        kMiB;
    need[p] = fixed + running - budget;
  }

  double forwardEnd = model.forwardEndUs();
  for (int k = 0; k < kNumReadyThresholds; ++k)
    thresholds.push_back(forwardEnd * k / kNumReadyThresholds);
  NodeId first = model.firstBackward();
  for (int k = 0; k < kNumDeadlines && first < numNodes; ++k) {
    // Spread over the backward part's time.
    double at = lo[first] + (total - lo[first]) * (k + 1) / kNumDeadlines;
    NodeId q = static_cast<NodeId>(
        std::lower_bound(lo.begin() + first, lo.begin() + numNodes, at) -
        lo.begin());
    q = std::min<NodeId>(std::max(q, first), numNodes - 1);
    if (deadlines.empty() || deadlines.back() != q)
      deadlines.push_back(q);
  }

  // Columns: T (the overhead, microseconds), then per activation the
  // fractions recomputed and offloaded.
  colT = lp.addColumn(-slack, INFINITY, 1.0, false);
  colC.assign(acts.size(), -1);
  colO.assign(acts.size(), -1);
  for (size_t a = 0; a < acts.size(); ++a) {
    // A checkpoint's bytes are outside the unplanned step's (it is freed
    // after its forward uses there) and count only where a chain that
    // reads it is still to run (the rows of addPoint); its drop columns
    // free them and its copies take the copy streams (BoundContention.cpp).
    if (acts[a].canRecompute)
      colC[a] = lp.addColumn(0, 1, 0, false);
    if (acts[a].canOffload)
      colO[a] = lp.addColumn(0, 1, 0, false);
    if (colC[a] >= 0 && colO[a] >= 0)
      lp.addRow(-INFINITY, 1, {{colC[a], 1}, {colO[a], 1}});
  }
  // Recompute: each chain node runs at least once per step in which any
  // activation it re-creates is recomputed, and once per restore point at
  // which one is (a column counts its runs); the compute stream is serial.
  // An offloaded activation's re-derived views (the view nodes that
  // re-create its backward-read aliases from the prefetched storage) run
  // likewise at its restore point, in the same chain (Placement.cpp).
  llvm::DenseMap<NodeId, std::vector<int>> chainOf, rederiveOf;
  for (size_t a = 0; a < acts.size(); ++a) {
    if (colC[a] >= 0)
      for (NodeId node : acts[a].recomputeNodes)
        chainOf[node].push_back(static_cast<int>(a));
    if (colO[a] >= 0 && !acts[a].checkpoint)
      for (NodeId node : acts[a].rederiveNodes)
        rederiveOf[node].push_back(static_cast<int>(a));
  }
  // A node runs at most once per restore point of the activations whose
  // chain has it: its column's cap (the runs' deficits in the contention
  // rows cannot then pay for runs no plan makes).
  llvm::DenseMap<NodeId, int> colZ;
  colRerun = lp.addColumn(0, INFINITY, 0, false);
  std::vector<std::pair<int, double>> recompute{{colRerun, 1.0}};
  auto readers = [](const llvm::DenseMap<NodeId, std::vector<int>> &map,
                    NodeId node) -> llvm::ArrayRef<int> {
    auto found = map.find(node);
    if (found == map.end())
      return {};
    return found->second;
  };
  for (NodeId node = 0; node < numNodes; ++node) {
    llvm::ArrayRef<int> recomputed = readers(chainOf, node);
    llvm::ArrayRef<int> offloaded = readers(rederiveOf, node);
    if (recomputed.empty() && offloaded.empty())
      continue;
    // A view only one offloadable activation re-derives, in no chain, runs
    // exactly when that one is offloaded: its runs are o_a itself (no
    // column, no row; the contention rows read it through colZ too).
    std::vector<NodeId> points;
    for (int a : llvm::concat<const int>(recomputed, offloaded))
      points.insert(points.end(), acts[a].restorePoints.begin(),
                    acts[a].restorePoints.end());
    llvm::sort(points);
    points.erase(std::unique(points.begin(), points.end()), points.end());
    rerunPoints.push_back({model.nodeTimeUs(node), points});
    if (recomputed.empty() && offloaded.size() == 1) {
      colZ[node] = colO[offloaded.front()];
      recompute.push_back({colO[offloaded.front()], -model.nodeTimeUs(node)});
      continue;
    }
    int runs = static_cast<int>(points.size());
    int col = lp.addColumn(0, std::max(1, runs), 0, false);
    colZ[node] = col;
    recompute.push_back({col, -model.nodeTimeUs(node)});
    for (int a : recomputed)
      lp.addRow(0, INFINITY, {{col, 1}, {colC[a], -1}});
    for (int a : offloaded)
      lp.addRow(0, INFINITY, {{col, 1}, {colO[a], -1}});
  }
  addRestoreRuns(colZ, chainOf);
  // A checkpoint is dropped only where a chain that reads it runs: a
  // reader recomputed, or offloaded with views that read it re-derived
  // (Placement.cpp, effectiveDecisions). Where every reader has its column,
  // c_x + o_x <= sum of theirs.
  ckBytes.assign(acts.size(), 0.0);
  for (size_t x = 0; x < acts.size(); ++x) {
    if (!acts[x].checkpoint || (colC[x] < 0 && colO[x] < 0))
      continue;
    ckBytes[x] = static_cast<double>(acts[x].bytes) / kMiB;
    std::vector<std::pair<int, double>> row;
    for (int col : {colC[x], colO[x]})
      if (col >= 0)
        row.push_back({col, 1});
    bool capped = true;
    for (bool recomputes : {true, false})
      for (int r :
           recomputes ? acts[x].recomputeReaders : acts[x].rederiveReaders) {
        int col = recomputes ? colC[r] : colO[r];
        capped &= col >= 0;
        row.push_back({col, -1});
      }
    if (capped)
      lp.addRow(-INFINITY, 0, row);
  }
  // The re-run time as one column (R = sum(t_n z_n)), which the contention
  // rows and each contention split read instead of every chain node.
  lp.addRow(0, 0, recompute);
  lp.addRow(-slack, INFINITY, {{colT, 1.0}, {colRerun, -1.0}});
  addContention(device, colZ);
  // Copy channels: an offloaded activation is copied out and back in
  // before its first backward use starts, each copy its bytes at the
  // channel's rate and its fixed cost (rate x fixed MiB).
  for (NodeId q : deadlines)
    for (auto [rate, fixed] :
         {std::pair(rateD2h, fixedD2h), std::pair(rateH2d, fixedH2d)}) {
      std::vector<std::pair<int, double>> row{{colT, -rate}};
      for (size_t a = 0; a < acts.size(); ++a)
        if (colO[a] >= 0 && bytes[a] > 0 && acts[a].firstBackwardUse <= q)
          row.push_back({colO[a], bytes[a] + rate * fixed});
      if (row.size() > 1)
        lp.addRow(-INFINITY, rate * hi[q], row);
    }
  pointCol.assign(numNodes, -1);
  lateCol.assign(numNodes, -1);
  addPhaseSplits();
}

template <typename Weight>
std::vector<double> Relaxation::gapSums(Weight weight) const {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  std::vector<double> diff(numNodes + 1, 0.0);
  for (size_t a = 0; a < acts.size(); ++a) {
    double w = weight(static_cast<int>(a));
    if (w == 0.0 || acts[a].firstBackwardUse <= acts[a].lastForwardUse + 1)
      continue;
    diff[acts[a].lastForwardUse + 1] += w;
    diff[acts[a].firstBackwardUse] -= w;
  }
  double running = 0.0;
  for (int p = 0; p < numNodes; ++p) {
    running += diff[p];
    diff[p] = running;
  }
  diff.pop_back();
  return diff;
}

const std::vector<int> &Relaxation::gapAt(NodeId p) {
  auto [it, inserted] = gapCache.try_emplace(p);
  if (inserted) {
    llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
    for (size_t a = 0; a < acts.size(); ++a)
      if (!acts[a].checkpoint && acts[a].lastForwardUse < p &&
          p < acts[a].firstBackwardUse)
        it->second.push_back(static_cast<int>(a));
  }
  return it->second;
}

bool Relaxation::cutValid(NodeId p, int k) const {
  if (k < kNumReadyThresholds)
    return thresholds[k] <= lo[p];
  return deadlines[k - kNumReadyThresholds] > p;
}

double Relaxation::cutRate(int k, double perCopy) const {
  // The bytes the cut limits take their time at the channel's rate plus a
  // fixed cost per copy, and need at least perCopy copies per MiB
  // (copiesPerMiB): at most rate / (1 + rate x fixed x perCopy) MiB
  // per microsecond of the window.
  bool d2h = k < kNumReadyThresholds;
  double rate = d2h ? rateD2h : rateH2d;
  return rate / (1.0 + rate * (d2h ? fixedD2h : fixedH2d) * perCopy);
}

double Relaxation::cutWindow(NodeId p, int k) const {
  if (k < kNumReadyThresholds)
    return hi[p] - thresholds[k];
  return hi[deadlines[k - kNumReadyThresholds]] - lo[p + 1];
}

/// Whether cut k limits offloadable activation (or checkpoint) a where it
/// is in its gap, with the MiB it may have absent there.
static bool limits(bool offloadable, double mib, bool includes) {
  return offloadable && mib > 0 && !includes;
}

double Relaxation::copiesPerMiB(NodeId p) {
  if (largestInGap.empty()) {
    // A sweep over the nodes with the gaps' offloadable MiB in a multiset:
    // each enters after its last forward use and leaves at its first
    // backward use.
    llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
    std::vector<std::vector<double>> enter(numNodes + 1), leave(numNodes + 1);
    for (size_t a = 0; a < acts.size(); ++a) {
      double mib = bytes[a] + ckBytes[a];
      if (!limits(colO[a] >= 0, mib, false) ||
          acts[a].firstBackwardUse <= acts[a].lastForwardUse + 1)
        continue;
      enter[acts[a].lastForwardUse + 1].push_back(mib);
      leave[acts[a].firstBackwardUse].push_back(mib);
    }
    std::multiset<double> inGap;
    largestInGap.assign(numNodes, 0.0);
    for (NodeId q = 0; q < numNodes; ++q) {
      for (double mib : enter[q])
        inGap.insert(mib);
      for (double mib : leave[q])
        inGap.erase(inGap.find(mib));
      if (!inGap.empty())
        largestInGap[q] = *inGap.rbegin();
    }
  }
  return largestInGap[p] > 0 ? 1.0 / largestInGap[p] : 0.0;
}

bool Relaxation::cutIncludes(int a, int k) const {
  // The activations the cut leaves unlimited: ready before the threshold
  // (their copy may have started any time), or restored after the deadline.
  if (k < kNumReadyThresholds)
    return readyLo[a] < thresholds[k];
  return model.activations()[a].firstBackwardUse >
         deadlines[k - kNumReadyThresholds];
}

void Relaxation::addPoint(NodeId p) {
  pointCol[p] = lp.addColumn(0, INFINITY, 0, false);
  ++numPoints;
  // Memory: what the gap's recomputes free plus the offloaded bytes absent
  // here covers what the budget lacks, and the checkpoints still needed.
  std::vector<std::pair<int, double>> memory{{pointCol[p], 1}};
  AbsentParts &parts = absentParts[p];
  for (int a : gapAt(p)) {
    if (colC[a] >= 0)
      memory.push_back({colC[a], bytes[a]});
    if (colO[a] >= 0 && bytes[a] > 0)
      parts.members.push_back({a, colO[a], bytes[a], -1});
  }
  addCheckpoints(p, memory);
  lp.addRow(need[p], INFINITY, memory);
  // Only offloaded bytes may be absent, each size class's (MiB within a
  // power of two) at most its offloaded bytes: the copy cuts charge a
  // class's absent MiB the fixed cost of a copy of its largest member.
  std::vector<std::pair<int, double>> absent{{pointCol[p], 1}};
  std::vector<std::vector<std::pair<int, double>>> rows;
  for (AbsentParts::Member &member : parts.members) {
    int exponent = std::ilogb(member.mib);
    auto found = llvm::find_if(parts.classes, [&](const AbsentParts::Class &c) {
      return c.exponent == exponent;
    });
    if (found == parts.classes.end()) {
      parts.classes.push_back(
          {exponent, lp.addColumn(0, INFINITY, 0, false), 0.0});
      rows.push_back({{parts.classes.back().col, 1}});
      absent.push_back({parts.classes.back().col, -1});
      found = parts.classes.end() - 1;
    }
    member.sizeClass = static_cast<int>(found - parts.classes.begin());
    found->largest = std::max(found->largest, member.mib);
    rows[member.sizeClass].push_back({member.col, -member.mib});
  }
  for (std::vector<std::pair<int, double>> &row : rows)
    lp.addRow(-INFINITY, 0, row);
  lp.addRow(-INFINITY, 0, absent);
  addLateRecompute(p);
}

double Relaxation::AbsentParts::perMiB(int sizeClass, double rate,
                                       double fixed) const {
  return 1.0 + rate * fixed / classes[sizeClass].largest;
}

void Relaxation::addCheckpoints(NodeId p,
                                std::vector<std::pair<int, double>> &memory) {
  // A checkpoint in its gap (after its forward uses, before the first
  // backward use of the chains that read it) is resident while a chain
  // that reads it is still to run, unless it is dropped: w_x, the part of
  // it needed and not recomputed, is at least each reader's drop less the
  // part of that reader restored by p (earlyColumn; the chain runs at the
  // reader's restore point) less c_x. Its absent part, u_x <= min(o_x,
  // w_x), joins the offloaded bytes absent at p (and their copy cuts):
  // a checkpoint not needed at p frees nothing there.
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  for (size_t x = 0; x < acts.size(); ++x) {
    if (ckBytes[x] <= 0 || acts[x].lastForwardUse >= p ||
        p >= acts[x].firstBackwardUse)
      continue;
    int needed = -1;
    for (bool recomputes : {true, false})
      for (int r :
           recomputes ? acts[x].recomputeReaders : acts[x].rederiveReaders) {
        int drop = recomputes ? colC[r] : colO[r];
        int early = drop < 0 ? -2 : earlyColumn(r, recomputes, p);
        if (early == -2 || early == drop)
          continue;
        if (needed < 0)
          needed = lp.addColumn(0, INFINITY, 0, false);
        std::vector<std::pair<int, double>> row{{needed, 1}, {drop, -1}};
        if (early >= 0)
          row.push_back({early, 1});
        if (colC[x] >= 0)
          row.push_back({colC[x], 1});
        lp.addRow(0, INFINITY, row);
      }
    if (needed < 0)
      continue;
    memory.push_back({needed, -ckBytes[x]});
    if (colO[x] < 0)
      continue;
    int gone = lp.addColumn(0, INFINITY, 0, false);
    lp.addRow(-INFINITY, 0, {{gone, 1}, {colO[x], -1}});
    lp.addRow(-INFINITY, 0, {{gone, 1}, {needed, -1}});
    absentParts[p].members.push_back(
        {static_cast<int>(x), gone, ckBytes[x], -1});
  }
}

void Relaxation::addLateRecompute(NodeId p) {
  // What the offloads do not free at p, recomputes free, and a recomputed
  // activation absent at p is re-created after p starts: its chain runs
  // after p (at its restore point), which leaves that much less of the
  // step before p for the D2H copies. Each chain node's time is shared
  // among the gap's activations whose chain has it, by bytes, so any set
  // of them re-runs at least sum(bytes x mu) (mu: the activation's share
  // per MiB); freeing x MiB costs at least the cheapest such set, a convex
  // piecewise-linear phi(x) (fractional knapsack), and each of its pieces
  // is a valid row: late >= phi_k(need - P).
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::DenseMap<NodeId, double> chainBytes;
  for (int a : gapAt(p))
    if (colC[a] >= 0)
      for (NodeId node : acts[a].recomputeNodes)
        chainBytes[node] += bytes[a];
  std::vector<std::pair<double, double>> items; // (mu, MiB)
  for (int a : gapAt(p)) {
    if (colC[a] < 0 || bytes[a] <= 0)
      continue;
    double mu = 0.0;
    for (NodeId node : acts[a].recomputeNodes)
      mu += model.nodeTimeUs(node) / chainBytes[node];
    items.push_back({mu, bytes[a]});
  }
  llvm::sort(items);
  // And every re-run is at a restore point, in the segment before a
  // backward node (Placement.cpp), once per point: a node runs before p
  // starts at most once per restore point up to p of those it runs for,
  // and its other runs are late. So L_p >= R - sum_n t_n (its restore
  // points up to p); before the first restore point, L_p >= R.
  double earlyUs = 0.0;
  bool anyLate = false;
  for (const RerunPoints &node : rerunPoints) {
    auto upTo = std::upper_bound(node.points.begin(), node.points.end(), p);
    earlyUs += node.timeUs * static_cast<double>(upTo - node.points.begin());
    anyLate |= node.timeUs > 0 && upTo != node.points.end();
  }
  bool knapsack = !items.empty() && items.back().first > 0;
  if (!knapsack && !anyLate)
    return;
  lateCol[p] = lp.addColumn(0, INFINITY, 0, false);
  if (anyLate)
    lp.addRow(-earlyUs, INFINITY, {{lateCol[p], 1}, {colRerun, -1}});
  if (!knapsack)
    return;
  // Pieces: the greedy's slopes at up to kLatePieces byte levels spread
  // over the bytes it can free (any tangent of a convex function is below
  // it).
  double total = 0.0;
  for (auto [mu, mib] : items)
    total += mib;
  double freed = 0.0, cost = 0.0;
  size_t next = 0;
  for (int k = 0; k < kLatePieces; ++k) {
    double level = total * k / kLatePieces;
    while (next < items.size() && freed + items[next].second <= level) {
      freed += items[next].second;
      cost += items[next].first * items[next].second;
      ++next;
    }
    if (next == items.size())
      break;
    // The piece of slope mu through (freed, cost): phi(x) >= cost + mu (x -
    // freed); as a row on late and P: late + mu P >= cost + mu (need -
    // freed).
    double mu = items[next].first;
    if (mu <= 0)
      continue;
    lp.addRow(cost + mu * (need[p] - freed), INFINITY,
              {{lateCol[p], 1}, {pointCol[p], mu}});
  }
}

void Relaxation::addCut(NodeId p, int k) {
  cuts.insert(static_cast<int64_t>(p) * 1024 + k);
  const bool d2h = k < kNumReadyThresholds;
  const double rate = d2h ? rateD2h : rateH2d;
  const double fixed = d2h ? fixedD2h : fixedH2d;
  std::vector<std::pair<int, double>> row{{colT, -rate}};
  // A D2H cut's window ends when p starts, before the late recomputes.
  if (d2h && lateCol[p] >= 0)
    row.push_back({lateCol[p], rate});
  // Each class's absent MiB less its offloaded MiB the cut leaves unlimited
  // (at most its absent MiB the cut limits) was copied in the window, at
  // the channel's rate and at least one fixed cost per its largest
  // member's MiB.
  const AbsentParts &parts = absentParts[p];
  for (auto [c, sizeClass] : llvm::enumerate(parts.classes))
    row.push_back({sizeClass.col, parts.perMiB(c, rate, fixed)});
  for (const AbsentParts::Member &member : parts.members)
    if (cutIncludes(member.activation, k))
      row.push_back({member.col, -member.mib * parts.perMiB(member.sizeClass,
                                                            rate, fixed)});
  lp.addRow(-INFINITY, rate * cutWindow(p, k), row);
}

int Relaxation::separate(const std::vector<double> &x) {
  const int numCuts = kNumReadyThresholds + static_cast<int>(deadlines.size());
  auto value = [&](int col) { return col >= 0 ? x[col] : 0.0; };
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  // (A checkpoint taken as needed wherever a reader is dropped, and never
  // absent: more than its row holds, which at worst adds a point whose row
  // holds.)
  std::vector<double> recomputed = gapSums([&](int a) {
    if (ckBytes[a] <= 0)
      return bytes[a] * value(colC[a]);
    double needed = 0.0;
    for (int r : acts[a].recomputeReaders)
      needed = std::max(needed, value(colC[r]));
    for (int r : acts[a].rederiveReaders)
      needed = std::max(needed, value(colO[r]));
    return -ckBytes[a] * std::max(0.0, needed - value(colC[a]));
  });
  std::vector<double> offloaded =
      gapSums([&](int a) { return bytes[a] * value(colO[a]); });
  std::vector<std::vector<double>> included(numCuts);
  for (int k = 0; k < numCuts; ++k)
    included[k] = gapSums([&](int a) {
      return cutIncludes(a, k) ? bytes[a] * value(colO[a]) : 0.0;
    });
  // copiesPerMiB, where the direction's copies cost fixed time (the
  // estimate of what a node that is not a point may have absent).
  auto perCopy = [&](int k, NodeId p) {
    return (k < kNumReadyThresholds ? fixedD2h : fixedH2d) > 0 ? copiesPerMiB(p)
                                                               : 0.0;
  };
  double overhead = x[colT];
  int added = 0;
  std::vector<std::pair<double, NodeId>> violated;
  for (NodeId p = 0; p < numNodes; ++p) {
    if (need[p] <= 0)
      continue;
    double tolerance = 1e-6 * std::max(1.0, need[p]);
    if (pointCol[p] >= 0) {
      // The cuts of a point, as addCut writes them.
      const AbsentParts &parts = absentParts[p];
      for (int k = 0; k < numCuts; ++k) {
        if (!cutValid(p, k) ||
            cuts.contains(static_cast<int64_t>(p) * 1024 + k))
          continue;
        const bool d2h = k < kNumReadyThresholds;
        const double rate = d2h ? rateD2h : rateH2d;
        const double fixed = d2h ? fixedD2h : fixedH2d;
        double window = cutWindow(p, k) + overhead;
        if (d2h && lateCol[p] >= 0)
          window -= x[lateCol[p]];
        double moved = 0.0;
        for (size_t c = 0; c < parts.classes.size(); ++c)
          moved += parts.perMiB(c, rate, fixed) * x[parts.classes[c].col];
        for (const AbsentParts::Member &member : parts.members)
          if (cutIncludes(member.activation, k))
            moved -= member.mib * x[member.col] *
                     parts.perMiB(member.sizeClass, rate, fixed);
        if (moved > rate * window + tolerance) {
          addCut(p, k);
          ++added;
        }
      }
      continue;
    }
    // The most the copies can have absent at p.
    double absent = offloaded[p];
    for (int k = 0; k < numCuts; ++k) {
      if (!cutValid(p, k))
        continue;
      const double rate = cutRate(k, perCopy(k, p));
      double cap = rate * (cutWindow(p, k) + overhead) + included[k][p];
      if (k < kNumReadyThresholds && lateCol[p] >= 0)
        cap -= rate * x[lateCol[p]];
      absent = std::min(absent, cap);
    }
    double shortfall = need[p] - recomputed[p] - std::max(0.0, absent);
    if (shortfall > tolerance)
      violated.push_back({shortfall, p});
  }
  llvm::sort(violated, [](auto &x, auto &y) { return x.first > y.first; });
  // Neighbouring nodes have nearly the same gap, so their rows are nearly
  // the same dense row: take the most violated ones at least `spacing`
  // nodes apart (later rounds add the others if they are still broken).
  const int spacing = std::max(1, numNodes / kPointSpacingDivisor);
  std::vector<NodeId> chosen;
  for (const auto &entry : violated) {
    const NodeId p = entry.second;
    if (static_cast<int>(chosen.size()) == kPointsPerRound)
      break;
    if (llvm::all_of(chosen,
                     [&](NodeId q) { return std::abs(q - p) >= spacing; }))
      chosen.push_back(p);
  }
  for (NodeId p : chosen) {
    addPoint(p);
    ++added;
    // With the D2H and the H2D cut that limit it now, so that the next
    // answer cannot just move the shortfall to copies.
    int tightest[2] = {-1, -1};
    double least[2] = {INFINITY, INFINITY};
    for (int k = 0; k < numCuts; ++k) {
      if (!cutValid(p, k))
        continue;
      double cap = cutRate(k, perCopy(k, p)) * (cutWindow(p, k) + overhead) +
                   included[k][p];
      int family = k < kNumReadyThresholds ? 0 : 1;
      if (cap < least[family]) {
        least[family] = cap;
        tightest[family] = k;
      }
    }
    for (int k : tightest)
      if (k >= 0) {
        addCut(p, k);
        ++added;
      }
  }
  return added + separateFirstUseRuns(x);
}

llvm::Error Relaxation::fixDecisions(llvm::ArrayRef<Decision> fixed) {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  if (fixed.size() != acts.size())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0} decisions fixed for {1} activations", fixed.size(),
                      acts.size()));
  // A checkpoint is offloaded only where a chain that reads it runs
  // (Placement.cpp): its copies count only then.
  const std::vector<Decision> effective =
      effectiveDecisions(model.getAnalysis(), fixed);
  for (size_t a = 0; a < acts.size(); ++a) {
    const bool recompute = fixed[a] == Decision::Recompute;
    const bool offload = fixed[a] == Decision::Offload;
    // A checkpoint's bytes are outside the relaxation (it has no recompute
    // column); its offload column only carries its copies.
    if (acts[a].checkpoint) {
      for (auto [col, decision] : {std::pair(colC[a], Decision::Recompute),
                                   std::pair(colO[a], Decision::Offload)})
        if (col >= 0)
          lp.colLower[col] = lp.colUpper[col] =
              effective[a] == decision ? 1.0 : 0.0;
      continue;
    }
    if ((recompute && colC[a] < 0) || (offload && colO[a] < 0))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("activation {0} cannot be {1} in the relaxation", a,
                        recompute ? "recomputed" : "offloaded"));
    for (auto [col, on] :
         {std::pair(colC[a], recompute), std::pair(colO[a], offload)})
      if (col >= 0)
        lp.colLower[col] = lp.colUpper[col] = on ? 1.0 : 0.0;
  }
  return llvm::Error::success();
}

llvm::Error Relaxation::solve(OverheadBound &bound, double &overheadUs) {
  auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         started)
        .count();
  };
  bool haveBound = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    milp::Result result =
        milp::solveLp(lp, std::max(1.0, kTimeLimitSec - elapsed()));
    bound.rows = lp.numRows();
    bound.columns = lp.numColumns();
    bound.points = numPoints;
    if (result.status == milp::Result::Status::Infeasible) {
      // Some node keeps more than the budget whatever is recomputed or
      // offloaded, however slow the step.
      bound.feasible = false;
      bound.converged = true;
      bound.rounds = round + 1;
      return llvm::Error::success();
    }
    if (result.status != milp::Result::Status::Optimal) {
      if (haveBound)
        return llvm::Error::success();
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("the lower-bound LP was not solved ({0} rows, {1} "
                        "columns){2}{3}",
                        lp.numRows(), lp.numColumns(),
                        result.error.empty() ? "" : ": ", result.error));
    }
    // The simplex meets its rows up to a tolerance: shave the answer by a
    // relative 1e-6 so that rounding never lifts it above the optimum.
    overheadUs = result.objective - 1e-6 * std::fabs(result.objective);
    bound.rounds = round + 1;
    haveBound = true;
    if (elapsed() > kTimeLimitSec)
      return llvm::Error::success();
    // The copy coverage joins once the other rows have converged, for one
    // more answer (BoundCoverage.cpp). The rows that answer breaks, added
    // until none is, took up to 4 more rounds (DiT-B/2 at 60%) and lifted
    // the 13 corpus bounds where it breaks some by at most 1.5 us (Llama
    // 90%, 0.003 points): the bound is that answer's, converged where it
    // breaks nothing.
    if (coverageAdded) {
      bound.converged = separate(result.values) == 0;
      return llvm::Error::success();
    }
    if (separate(result.values) == 0 && !addCoverageRows(result.values)) {
      bound.converged = true;
      return llvm::Error::success();
    }
  }
  return llvm::Error::success();
}

llvm::Expected<OverheadBound>
lethe::boundStepTime(const TrainingGraph &graph, const DeviceProfile &device,
                     const PlanOptions &options, double baselineStepUs,
                     int64_t baselinePeakBytes,
                     llvm::ArrayRef<Decision> fixed) {
  auto started = std::chrono::steady_clock::now();
  OverheadBound bound;
  bound.stepUs = baselineStepUs;
  bound.converged = true;
  if (baselinePeakBytes > options.budgetBytes) {
    ExactModel model(graph, device, options);
    Relaxation relaxation(model, device, options, baselineStepUs);
    if (!fixed.empty())
      if (llvm::Error error = relaxation.fixDecisions(fixed))
        return std::move(error);
    bound.converged = false;
    double overheadUs = 0.0;
    if (llvm::Error error = relaxation.solve(bound, overheadUs))
      return std::move(error);
    bound.stepUs = bound.feasible ? baselineStepUs + overheadUs : 0.0;
  }
  bound.overhead =
      bound.feasible && baselineStepUs > 0 ? bound.stepUs / baselineStepUs - 1
                                           : 0.0;
  bound.solveMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  return bound;
}

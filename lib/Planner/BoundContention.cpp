//===- BoundContention.cpp - Kernels slowed by copies, in the bound -------===//
//
// The contention rows of the lower bound (docs/Bound.md, §1 "Contention"
// and "Contention split"): where the profile slows kernels beside moving
// copies, the step pays for the time the copies move, at each kernel
// class's loss per microsecond less what the kernels that lose less give
// back; and at the nodes that must free the most, the copies of the bytes
// absent there move out before the node and back in after it, so that
// mostly one way at a time.
//
//===----------------------------------------------------------------------===//

#include "BoundRelaxation.h"

#include "lethe/Planner/Activations.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/DeviceProfile.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace lethe;
using namespace lethe::bound;

/// The least rate a copy moves at while it moves at all, as a fraction of
/// its direction's lone rate: Simulator.cpp's factors below 1 (duplex
/// where `beside`, the other direction busy; beside a collective, beside a
/// kernel), then shareHostBandwidth's caps, the other direction (where
/// busy) taken at the most it moves. 0 where the profile leaves no bound.
static double leastMovingRate(const DeviceProfile &device, bool h2d,
                              bool beside) {
  auto slows = [](double f) { return f > 0.0 ? std::min(1.0, f) : 1.0; };
  auto speeds = [](double f) { return f > 0.0 ? std::max(1.0, f) : 1.0; };
  double lone = h2d ? device.h2dBytesPerSec : device.d2hBytesPerSec;
  double otherLone = h2d ? device.d2hBytesPerSec : device.h2dBytesPerSec;
  if (!(lone > 0) || !(otherLone > 0))
    return 0.0;
  double least = (beside ? slows(device.duplexFactor) : 1.0) *
                 slows(device.copySlowdownWithCollectives) *
                 std::min(slows(device.copySlowdownWithMatmul),
                          slows(device.copySlowdownWithMemoryBound));
  double most = speeds(device.copySlowdownWithCollectives) *
                std::max(speeds(device.copySlowdownWithMatmul),
                         speeds(device.copySlowdownWithMemoryBound));
  const double ranks =
      static_cast<double>(std::max<int64_t>(1, device.ranksPerHost));
  double own = least * lone, other = most * otherLone;
  double ownCap = h2d ? device.hostH2DBytesPerSec : device.hostD2HBytesPerSec;
  double otherCap = h2d ? device.hostD2HBytesPerSec : device.hostH2DBytesPerSec;
  if (ownCap > 0)
    own = std::min(own, ownCap / ranks);
  if (!beside)
    return own / lone;
  if (otherCap > 0)
    other = std::min(other, otherCap / ranks);
  // Both directions capped together: each scaled by cap / (sum), which for
  // this direction is least where it is slowest and the other fastest.
  if (device.hostBothBytesPerSec > 0)
    own *= std::min(1.0, device.hostBothBytesPerSec / ranks / (own + other));
  return own / lone;
}

void Relaxation::addContention(const DeviceProfile &device,
                               const llvm::DenseMap<NodeId, int> &colZ) {
  // The losses per microsecond a kernel class takes beside copies moving
  // one way and both ways (kernelSlowdown in Simulator.cpp clamps its
  // factors at 1). Each pair of them is a level: the step pays at least
  // that much per microsecond the copies move, less what the nodes that
  // lose less give back; the least pair is the first level.
  auto loss = [](double f) { return 1.0 - 1.0 / std::max(1.0, f); };
  llvm::SmallVector<double, 2> ones{loss(device.matmulSlowdownWithCopies),
                                    loss(device.memoryBoundSlowdownWithCopies)};
  llvm::SmallVector<double, 2> boths{
      loss(device.matmulSlowdownWithBothCopies),
      loss(device.memoryBoundSlowdownWithBothCopies)};
  for (auto *list : {&ones, &boths}) {
    llvm::sort(*list);
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  if (std::max(ones.back(), boths.back()) <= 0.0 ||
      !(device.d2hBytesPerSec > 0) || !(device.h2dBytesPerSec > 0))
    return;
  for (double one : ones)
    for (double both : boths) {
      levels.emplace_back();
      levels.back().one = one;
      levels.back().both = both;
      levels.back().unslowedUs.assign(numNodes, 0.0);
    }
  // The fastest a copy moves, as a fraction of its lone rate (the
  // simulator's factors beside a collective, a kernel and the other
  // direction; host caps only slow it).
  auto positive = [](double f) { return f > 0.0 ? f : 1.0; };
  rateAlone = std::max(1.0, positive(device.copySlowdownWithCollectives)) *
              std::max({1.0, positive(device.copySlowdownWithMatmul),
                        positive(device.copySlowdownWithMemoryBound)});
  rateBeside = rateAlone * positive(device.duplexFactor);
  leastD2h = leastMovingRate(device, /*h2d=*/false, /*beside=*/true);
  leastH2d = leastMovingRate(device, /*h2d=*/true, /*beside=*/true);
  // While only one direction moves, the other is idle (no duplex factor,
  // no shared host cap) -- unless copies yield to a collective: then the
  // paused direction is still busy and the moving one keeps the duplex
  // factor (Simulator.cpp), so a step with collectives takes the least
  // rate of both ways.
  bool collectives = false;
  for (NodeId i = 0; i < numNodes && !collectives; ++i)
    collectives = model.getGraph().getNode(i).hasFlag(NodeFlagCollective);
  leastD2hAlone = collectives
                      ? leastD2h
                      : leastMovingRate(device, /*h2d=*/false, /*beside=*/false);
  leastH2dAlone = collectives
                      ? leastH2d
                      : leastMovingRate(device, /*h2d=*/true, /*beside=*/false);
  // A node whose kernel loses less than a level's loss per microsecond
  // beside copies (a view: nothing; a memory-bound kernel whose memory
  // traffic is a small part of its time: kernelSlowdown's roofline; at a
  // level above the least, a kernel of the cheaper class) lets copies move
  // beside it for less: per microsecond of its work, the step may be
  // `deficit` less than the level's row charges (docs/Bound.md, assumption
  // 6). With the least losses copies may hide beside every such kernel at
  // a small price; with a class's higher loss the copies that outlast the
  // cheaper kernels pay that class's loss.
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  const TrainingGraph &graph = model.getGraph();
  const ActivationAnalysis &analysis = model.getAnalysis();
  std::vector<char> deficitOverOne(levels.size(), 0);
  slowOne.assign(numNodes, 1.0);
  slowBoth.assign(numNodes, 1.0);
  for (NodeId i = 0; i < numNodes; ++i) {
    const GraphNode &node = graph.getNode(i);
    KernelClass kernel = kernelClassOf(node);
    double share = memoryShare(device, kernel, std::max(0.0, node.timeUs),
                               analysis.trafficBytes(i));
    double one = slowOne[i] =
        kernelSlowdown(device, kernel, true, false, share);
    double two = slowBoth[i] =
        kernelSlowdown(device, kernel, true, true, share);
    // Its wall time is at most max(one, two) times its work, and in each
    // microsecond of it beside copies it loses 1 - 1/factor, not the
    // level's loss.
    for (auto [k, level] : llvm::enumerate(levels)) {
      double deficit = std::max({0.0, level.one - (1.0 - 1.0 / one),
                                 level.both - (1.0 - 1.0 / two)}) *
                       std::max(one, two);
      deficitOverOne[k] |= deficit > 1.0;
      level.unslowedUs[i] = deficit * model.nodeTimeUs(i);
    }
  }
  // A chain node re-run at several restore points is counted once in the
  // rows below, its time less its deficit: valid only while that is not
  // negative (every profile so far: deficits are a few percent).
  for (size_t k = levels.size(); k-- > 0;)
    if (deficitOverOne[k])
      levels.erase(levels.begin() + k);
  if (levels.empty())
    return;
  // Columns: microseconds in which copies move both ways, only D2H, only
  // H2D. Each direction's copy work (full-rate microseconds) is done in
  // them.
  workD2h.assign(acts.size(), 0.0);
  workH2d.assign(acts.size(), 0.0);
  bool anyOffload = false;
  for (size_t a = 0; a < acts.size(); ++a) {
    if (colO[a] < 0)
      continue;
    anyOffload = true;
    double b = static_cast<double>(acts[a].bytes);
    workD2h[a] =
        b / device.d2hBytesPerSec * 1e6 + std::max(0.0, device.d2hFixedUs);
    workH2d[a] =
        b / device.h2dBytesPerSec * 1e6 + std::max(0.0, device.h2dFixedUs);
  }
  if (!anyOffload)
    return;
  colBoth = lp.addColumn(0, INFINITY, 0, false);
  colD2hOnly = lp.addColumn(0, INFINITY, 0, false);
  colH2dOnly = lp.addColumn(0, INFINITY, 0, false);
  // Each direction's whole copy work as one column (an equality row), which
  // the rows below and every contention split read instead of repeating
  // every offloadable activation: the same LP, far fewer nonzeros.
  colWorkD2h = lp.addColumn(0, INFINITY, 0, false);
  colWorkH2d = lp.addColumn(0, INFINITY, 0, false);
  std::vector<std::pair<int, double>> d2hWork{{colWorkD2h, 1}},
      h2dWork{{colWorkH2d, 1}};
  for (size_t a = 0; a < acts.size(); ++a) {
    if (colO[a] < 0)
      continue;
    d2hWork.push_back({colO[a], -workD2h[a]});
    h2dWork.push_back({colO[a], -workH2d[a]});
  }
  lp.addRow(0, 0, d2hWork);
  lp.addRow(0, 0, h2dWork);
  lp.addRow(0, INFINITY,
            {{colBoth, rateBeside}, {colD2hOnly, rateAlone}, {colWorkD2h, -1}});
  lp.addRow(0, INFINITY,
            {{colBoth, rateBeside}, {colH2dOnly, rateAlone}, {colWorkH2d, -1}});
  // And each moves at least at its least rate: a direction's moving time
  // does at least that much work, and all it does is its copies' work
  // (the checkpoints' too: they have offload columns for it) plus what the
  // simulator adds to a copy op (Simulator.cpp, addLaunchCosts): a wait
  // per dependency on another stream that the stream does not already
  // know of, and an event record where an op waits for it. An offload
  // depends on the compute stream (its node) and on its storage's producer,
  // on the compute stream too unless a collective made it; a prefetch on
  // its offload and on the compute stream (ScheduleBuilder.cpp). Per
  // offloaded activation, the D2H stream does at most its copy work and
  // `waitsD2hUs`, the H2D stream `waitsH2dUs` more (docs/Bound.md, §1
  // "Copy work"). Without these rows the LP let a direction move with
  // nothing to move, beside the other, so that the other's copies took the
  // both-ways loss (on the calibrated H200 1.7% against 4.9%).
  auto waits = [&](double dependencies) {
    return std::max(
        {0.0,
         dependencies * std::max(0.0, device.waitUs) +
             std::max(0.0, device.eventRecordUs),
         dependencies * std::max(0.0, device.graphWaitUs)});
  };
  waitsD2hUs = waits(collectives ? 2.0 : 1.0);
  waitsH2dUs = waits(2.0);
  if (waitsD2hUs > 0 || waitsH2dUs > 0) {
    colOffloads = lp.addColumn(0, INFINITY, 0, false);
    std::vector<std::pair<int, double>> count{{colOffloads, 1}};
    for (size_t a = 0; a < acts.size(); ++a)
      if (colO[a] >= 0)
        count.push_back({colO[a], -1});
    lp.addRow(0, 0, count);
  }
  for (auto [only, least, leastAlone, work, waited] :
       {std::tuple(colD2hOnly, leastD2h, leastD2hAlone, colWorkD2h,
                   waitsD2hUs),
        std::tuple(colH2dOnly, leastH2d, leastH2dAlone, colWorkH2d,
                   waitsH2dUs)}) {
    if (!(least > 0) || !(leastAlone > 0))
      continue;
    std::vector<std::pair<int, double>> row{
        {colBoth, least}, {only, leastAlone}, {work, -1}};
    if (colOffloads >= 0)
      row.push_back({colOffloads, -waited});
    lp.addRow(-INFINITY, 0, row);
  }
  // Each direction's copies move on one stream, at most the step's wall
  // time, B + T (docs/Bound.md, §1 "Stream capacity").
  lp.addRow(-INFINITY, hi[numNodes],
            {{colBoth, 1}, {colD2hOnly, 1}, {colT, -1}});
  lp.addRow(-INFINITY, hi[numNodes],
            {{colBoth, 1}, {colH2dOnly, 1}, {colT, -1}});
  for (ContentionLevel &level : levels) {
    // The re-runs' deficits, D = sum(d_n t_n z_n), likewise one column.
    std::vector<std::pair<int, double>> rerunDeficit;
    for (auto [node, col] : colZ)
      if (level.unslowedUs[node] > 0) {
        rerunDeficit.push_back({col, -level.unslowedUs[node]});
        level.densestRerun =
            std::max(level.densestRerun,
                     level.unslowedUs[node] / model.nodeTimeUs(node));
      }
    if (!rerunDeficit.empty()) {
      level.colRerunDeficit = lp.addColumn(0, INFINITY, 0, false);
      rerunDeficit.push_back({level.colRerunDeficit, 1});
      lp.addRow(0, 0, rerunDeficit);
    }
    // The step: every kernel's time, slowed where copies move beside it;
    // the re-runs' sum(t_n (1 - d_n) z_n) is the re-run time less D.
    std::vector<std::pair<int, double>> row{{colT, 1.0},
                                            {colBoth, -level.both},
                                            {colD2hOnly, -level.one},
                                            {colH2dOnly, -level.one},
                                            {colRerun, -1.0}};
    if (level.colRerunDeficit >= 0)
      row.push_back({level.colRerunDeficit, 1.0});
    double unslowed = 0.0;
    for (double us : level.unslowedUs)
      unslowed += us;
    lp.addRow(-slack - unslowed, INFINITY, row);
  }
  addCopyCoverage(collectives);
}

void Relaxation::addPhaseSplits() {
  if (colBoth < 0 || !(leastD2h > 0) || !(leastH2d > 0))
    return;
  // The nodes that must free the most, apart as the row generation's
  // points are (neighbours have nearly the same rows).
  std::vector<std::pair<double, NodeId>> order;
  for (NodeId p = 0; p < numNodes; ++p)
    if (need[p] > 0)
      order.push_back({-need[p], p});
  llvm::sort(order);
  const int spacing = std::max(1, numNodes / kPointSpacingDivisor);
  std::vector<NodeId> chosen;
  for (const auto &entry : order) {
    if (static_cast<int>(chosen.size()) == kPhaseSplits)
      break;
    NodeId p = entry.second;
    if (llvm::all_of(chosen,
                     [&](NodeId q) { return std::abs(q - p) >= spacing; }))
      chosen.push_back(p);
  }
  for (NodeId p : chosen)
    addPhaseSplit(p);
}

void Relaxation::addPhaseSplit(NodeId p) {
  // Phase 1 is the step until p ends, phase 2 the rest. The bytes absent at
  // p (P_p) were copied out before p starts and are copied back after it
  // ends: phase 1 does at least P_p / R_d of D2H work and phase 2 at least
  // P_p / R_h of H2D work; so phase 1 does at most the rest of the H2D work,
  // and a copy moving at all moves at least at `least` of its lone rate:
  // the copies can move both ways at once only for that long. Columns:
  // the phase-1 parts of the three copy-time columns (phase 2's are the
  // rest), and each phase's extra time.
  if (pointCol[p] < 0)
    addPoint(p);
  // The work of the copies of what is absent at p each way (full-rate
  // microseconds): each size class's absent MiB at the lone rate and at
  // least one fixed cost per its largest member's MiB, a column each.
  int workOut = lp.addColumn(0, INFINITY, 0, false);
  int workIn = lp.addColumn(0, INFINITY, 0, false);
  std::vector<std::pair<int, double>> out{{workOut, 1}}, in{{workIn, 1}};
  const AbsentParts &parts = absentParts[p];
  for (auto [c, sizeClass] : llvm::enumerate(parts.classes)) {
    out.push_back(
        {sizeClass.col, -parts.perMiB(c, rateD2h, fixedD2h) / rateD2h});
    in.push_back(
        {sizeClass.col, -parts.perMiB(c, rateH2d, fixedH2d) / rateH2d});
  }
  lp.addRow(0, 0, out);
  lp.addRow(0, 0, in);
  int both1 = lp.addColumn(0, INFINITY, 0, false);
  int d2h1 = lp.addColumn(0, INFINITY, 0, false);
  int h2d1 = lp.addColumn(0, INFINITY, 0, false);
  lp.addRow(-INFINITY, 0, {{both1, 1}, {colBoth, -1}});
  lp.addRow(-INFINITY, 0, {{d2h1, 1}, {colD2hOnly, -1}});
  lp.addRow(-INFINITY, 0, {{h2d1, 1}, {colH2dOnly, -1}});
  // D2H work before p, H2D work after p.
  lp.addRow(0, INFINITY,
            {{both1, rateBeside}, {d2h1, rateAlone}, {workOut, -1}});
  lp.addRow(0, INFINITY,
            {{colBoth, rateBeside},
             {both1, -rateBeside},
             {colH2dOnly, rateAlone},
             {h2d1, -rateAlone},
             {workIn, -1}});
  // An H2D copy moving in phase 1 restores an activation not absent at p
  // whose prefetch is issued before p ends, so after its release, which
  // follows its last forward use: one whose gap ends by p (both its copies
  // are in phase 1), or one in its gap at p copied out and back in before p
  // ends, whose D2H work in phase 1 is at least `ratio` times its H2D
  // work. So phase 1's D2H work covers P_p / R_d, the former's D2H work,
  // and ratio x (the H2D work moving in phase 1 less the former's): the
  // copies cannot move both ways there without moving bytes the memory at
  // p does not gain from.
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  double ratio = INFINITY;
  for (int a : gapAt(p))
    if (colO[a] >= 0 && workH2d[a] > 0)
      ratio = std::min(ratio, workD2h[a] / workH2d[a]);
  // And the checkpoints in their gap at p (gapAt leaves them out: their
  // bytes are outside the memory rows), whose copies have columns.
  for (size_t a = 0; a < acts.size(); ++a)
    if (acts[a].checkpoint && colO[a] >= 0 && workH2d[a] > 0 &&
        acts[a].lastForwardUse < p && p < acts[a].firstBackwardUse)
      ratio = std::min(ratio, workD2h[a] / workH2d[a]);
  if (std::isfinite(ratio) && ratio > 0) {
    std::vector<std::pair<int, double>> roundTrips{
        {both1, rateBeside - ratio * leastH2d},
        {d2h1, rateAlone},
        {h2d1, -ratio * leastH2dAlone},
        {workOut, -1}};
    for (size_t a = 0; a < acts.size(); ++a)
      if (colO[a] >= 0 && acts[a].firstBackwardUse <= p)
        roundTrips.push_back({colO[a], ratio * workH2d[a] - workD2h[a]});
    // The H2D stream's moving time does its copies' work and their waits
    // (addContention): the copy work is that less the waits.
    if (colOffloads >= 0)
      roundTrips.push_back({colOffloads, ratio * waitsH2dUs});
    lp.addRow(0, INFINITY, roundTrips);
  }
  // Each direction's stream moves in phase 1 at most its wall time, which
  // is the step less phase 2's, and phase 2 lasts at least its nodes and
  // the re-runs after p starts (L_p, where the point has that column; they
  // run on the same serial stream): hi_{p+1} + T - L_p. In phase 2 at most
  // the step less phase 1's nodes.
  double phase1 = hi[p + 1], phase2 = hi[numNodes] - lo[p + 1];
  for (int only : {d2h1, h2d1}) {
    std::vector<std::pair<int, double>> row{{both1, 1}, {only, 1}, {colT, -1}};
    if (lateCol[p] >= 0)
      row.push_back({lateCol[p], 1});
    lp.addRow(-INFINITY, phase1, row);
  }
  lp.addRow(
      -INFINITY, phase2,
      {{colBoth, 1}, {both1, -1}, {colD2hOnly, 1}, {d2h1, -1}, {colT, -1}});
  lp.addRow(
      -INFINITY, phase2,
      {{colBoth, 1}, {both1, -1}, {colH2dOnly, 1}, {h2d1, -1}, {colT, -1}});
  // H2D moving in phase 1 does at most the H2D work phase 2 does not;
  // D2H moving in phase 2 at most the D2H work phase 1 does not.
  // (What a direction moves includes its copies' waits, as in
  // addContention.)
  std::vector<std::pair<int, double>> h2dEarly{
      {both1, leastH2d}, {h2d1, leastH2dAlone}, {workIn, 1}, {colWorkH2d, -1}};
  std::vector<std::pair<int, double>> d2hLate{
      {colBoth, leastD2h},    {both1, -leastD2h}, {colD2hOnly, leastD2hAlone},
      {d2h1, -leastD2hAlone}, {workOut, 1},       {colWorkD2h, -1}};
  if (colOffloads >= 0) {
    h2dEarly.push_back({colOffloads, -waitsH2dUs});
    d2hLate.push_back({colOffloads, -waitsD2hUs});
  }
  lp.addRow(-INFINITY, 0, h2dEarly);
  lp.addRow(-INFINITY, 0, d2hLate);
  // Each phase lasts at least its nodes' time plus the re-runs in it, and
  // beside copies at least a level's loss more per microsecond they move,
  // less the deficits of its nodes and of the re-runs (all of them: which
  // phase they run in is not known). E_i >= loss C_i - U_i - D, per level.
  int extra1 = lp.addColumn(0, INFINITY, 0, false);
  int extra2 = lp.addColumn(0, INFINITY, 0, false);
  // Phase 1's extra time is at least that of the kernels up to p that the
  // copies out are sure to move beside (addCoverageRows).
  splitColumns.push_back({p, extra1, both1});
  for (const ContentionLevel &level : levels) {
    double unslowed1 = 0.0, unslowed2 = 0.0;
    for (NodeId i = 0; i < numNodes; ++i)
      (i <= p ? unslowed1 : unslowed2) += level.unslowedUs[i];
    std::vector<std::pair<int, double>> row1{{extra1, 1},
                                             {both1, -level.both},
                                             {d2h1, -level.one},
                                             {h2d1, -level.one}};
    std::vector<std::pair<int, double>> row2{
        {extra2, 1},         {colBoth, -level.both},
        {both1, level.both}, {colD2hOnly, -level.one},
        {d2h1, level.one},   {colH2dOnly, -level.one},
        {h2d1, level.one}};
    if (level.colRerunDeficit >= 0) {
      row2.push_back({level.colRerunDeficit, 1});
      if (lateCol[p] >= 0) {
        // Phase 1 holds the re-runs that run before p starts: the re-run
        // time less the late ones, R - L_p. Their deficits are at most D
        // and at most that time at the densest re-run's deficit per
        // microsecond: D_1 <= min(D, delta (R - L_p)). Without it, phase 1
        // took the deficits of every re-run (on T5 at 50%, 5.6 ms of
        // re-runs, 0.2 ms of them before the peak).
        int early = lp.addColumn(0, INFINITY, 0, false);
        lp.addRow(-INFINITY, 0, {{early, 1}, {level.colRerunDeficit, -1}});
        lp.addRow(-INFINITY, 0,
                  {{early, 1},
                   {colRerun, -level.densestRerun},
                   {lateCol[p], level.densestRerun}});
        row1.push_back({early, 1});
      } else {
        row1.push_back({level.colRerunDeficit, 1});
      }
    }
    lp.addRow(-unslowed1, INFINITY, row1);
    lp.addRow(-unslowed2, INFINITY, row2);
  }
  // T >= (re-run time) + E_1 + E_2 - slack.
  lp.addRow(-slack, INFINITY,
            {{colT, 1}, {extra1, -1}, {extra2, -1}, {colRerun, -1}});
}

//===- ExactMilp.cpp - The exact model as a MILP --------------------------===//
//
// Variables and constraints follow docs/ExactSolver.md §3; the comments
// name the constraint families used there (A, R, P, D, W, M).
//
//===----------------------------------------------------------------------===//

#include "ExactMilp.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace lethe;

static constexpr double kMiB = 1024.0 * 1024.0;

ExactMilp::ExactMilp(const ExactModel &model, Goal goal, int64_t budgetBytes)
    : model(model), goal(goal),
      budgetMiB(static_cast<double>(budgetBytes) / kMiB) {
  buildDecisions();
  buildRestores();
  buildD2H();
  buildPrefetchIssue();
  buildWindows();
  buildMemory();
}

int ExactMilp::numIntegerColumns() const {
  return static_cast<int>(llvm::count(problem.isInteger, true));
}

int ExactMilp::restoredBy(int act, Kind kind, NodeId node) const {
  const std::vector<int> &cols = restoreCol[kind][act];
  if (cols.empty())
    return -1;
  llvm::ArrayRef<NodeId> points = model.activations()[act].restorePoints;
  auto it = std::upper_bound(points.begin(), points.end(), node);
  if (it == points.begin())
    return -1;
  return cols[it - points.begin() - 1];
}

void ExactMilp::addRestoredAt(Expr &expr, int act, Kind kind, NodeId point,
                              double coef) const {
  const std::vector<int> &cols = restoreCol[kind][act];
  llvm::ArrayRef<NodeId> points = model.activations()[act].restorePoints;
  auto it = llvm::lower_bound(points, point);
  if (cols.empty() || it == points.end() || *it != point)
    return;
  add(expr, cols[it - points.begin()], coef);
  add(expr, restoredBy(act, kind, point - 1), -coef);
}

void ExactMilp::addRestoredFrom(Expr &expr, int act, Kind kind, NodeId node,
                                bool segment, double coef) const {
  const std::vector<int> &cols = restoreCol[kind][act];
  if (cols.empty())
    return;
  add(expr, cols.back(), coef);
  add(expr, restoredBy(act, kind, segment ? node - 1 : node), -coef);
}

int ExactMilp::issuedBy(int act, NodeId after) const {
  const ExactModel::Activation &a = model.activations()[act];
  if (offloadCol[act] < 0 || after < model.earliestPrefetchAfter())
    return -1;
  if (after >= a.firstBackwardUse - 1)
    return offloadCol[act];
  return issueCol[act][after - model.earliestPrefetchAfter()];
}

int ExactMilp::inFlightAt(int act, int point) const {
  int k = point - inFlightFirst[act];
  if (k < 0 || k >= static_cast<int>(inFlight[act].size()))
    return -1;
  return inFlight[act][k];
}

int ExactMilp::chainColumn(NodeId node, NodeId point) const {
  auto it = chainCol.find({node, point});
  return it == chainCol.end() ? -1 : it->second;
}

// A: one decision per activation; the host budget.
void ExactMilp::buildDecisions() {
  Expr host;
  for (const ExactModel::Activation &act : model.activations()) {
    retainCol.push_back(binary());
    recomputeCol.push_back(act.canRecompute ? binary() : -1);
    offloadCol.push_back(act.canOffload ? binary() : -1);
    Expr one;
    add(one, retainCol.back(), 1);
    add(one, recomputeCol.back(), 1);
    add(one, offloadCol.back(), 1);
    problem.addRow(1, 1, one);
    add(host, offloadCol.back(), static_cast<double>(act.bytes) / kMiB);
  }
  const int64_t hostBudget = model.getOptions().hostBudgetBytes;
  if (!host.empty() && hostBudget < std::numeric_limits<int64_t>::max())
    problem.addRow(-INFINITY, static_cast<double>(hostBudget) / kMiB, host);
}

// R: where each activation is restored, and the chains run there.
void ExactMilp::buildRestores() {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  for (Kind kind : {Recompute, Offload}) {
    restoreCol[kind].assign(acts.size(), {});
    for (auto [a, act] : llvm::enumerate(acts)) {
      int decided = kind == Recompute ? recomputeCol[a] : offloadCol[a];
      if (decided < 0)
        continue;
      std::vector<int> &cols = restoreCol[kind][a];
      for (size_t k = 0; k < act.restorePoints.size(); ++k) {
        cols.push_back(binary());
        if (k > 0) // R1: once restored, it stays restored.
          problem.addRow(-INFINITY, 0, {{cols[k - 1], 1}, {cols[k], -1}});
      }
      // R1: restored by its first backward use iff so decided.
      problem.addRow(0, 0, {{cols.back(), 1}, {decided, -1}});
    }
  }
  // R2: a chain restored at a point needs the activations it reads there:
  // kept, or restored at that point or earlier.
  for (auto [reader, act] : llvm::enumerate(acts))
    for (Kind kind : {Recompute, Offload}) {
      const std::vector<int> &cols = restoreCol[kind][reader];
      for (int x : kind == Recompute ? act.recomputeInputs
                                     : act.rederiveInputs)
        for (size_t k = 0; k < cols.size(); ++k) {
          NodeId point = act.restorePoints[k];
          Expr expr{{cols[k], -1}};
          add(expr, retainCol[x], 1);
          add(expr, restoredBy(x, Recompute, point), 1);
          add(expr, restoredBy(x, Offload, point), 1);
          problem.addRow(0, INFINITY, expr);
        }
    }
  // R3: restored before its first backward use, or where a chain reading
  // it is restored (the earliest such point: the planner's rule).
  for (auto [x, act] : llvm::enumerate(acts))
    for (NodeId point : act.restorePoints) {
      Expr expr;
      addRestoredAt(expr, x, Recompute, point, 1);
      addRestoredAt(expr, x, Offload, point, 1);
      if (expr.empty())
        continue;
      if (point == act.firstBackwardUse) {
        add(expr, recomputeCol[x], -1);
        add(expr, offloadCol[x], -1);
      }
      for (int r : act.recomputeReaders)
        addRestoredAt(expr, r, Recompute, point, -1);
      for (int r : act.rederiveReaders)
        addRestoredAt(expr, r, Offload, point, -1);
      problem.addRow(-INFINITY, 0, expr);
    }
  // R4: a chain node runs at a point if any chain restored there lists it.
  for (auto [a, act] : llvm::enumerate(acts))
    for (Kind kind : {Recompute, Offload}) {
      if (restoreCol[kind][a].empty())
        continue;
      for (NodeId point : act.restorePoints)
        for (NodeId n : kind == Recompute ? act.recomputeNodes
                                          : act.rederiveNodes) {
          auto [it, inserted] = chainCol.insert({{n, point}, -1});
          if (inserted)
            it->second = continuous(0, 1);
          Expr expr{{it->second, 1}};
          addRestoredAt(expr, a, kind, point, -1);
          problem.addRow(0, INFINITY, expr);
        }
    }
}

// D: the D2H channel, first in first out, and which device buffers still
// wait for their copy at each point.
void ExactMilp::buildD2H() {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::ArrayRef<ExactModel::Point> points = model.points();
  auto readyAt = [&](int a) {
    NodeId ready = acts[a].contentReadyAfter;
    return model.nominalStartUs(ready) + model.nodeTimeUs(ready);
  };
  // D1: done >= (ready + copy) when offloaded, done >= previous done + copy
  // when offloaded, done >= previous done otherwise: with o = 1 these are
  // the FIFO recurrence, and no big-M is needed.
  d2hDoneCol.assign(acts.size(), -1);
  int prev = -1;
  for (int a : model.d2hOrder()) {
    const ExactModel::Activation &act = acts[a];
    int q = d2hDoneCol[a] = continuous(0, model.latestD2hEndUs(a));
    problem.addRow(0, INFINITY,
                   {{q, 1}, {offloadCol[a], -(readyAt(a) + act.d2hUs)}});
    if (prev >= 0)
      problem.addRow(0, INFINITY,
                     {{q, 1}, {d2hDoneCol[prev], -1}, {offloadCol[a], -act.d2hUs}});
    prev = a;
  }
  // D2: inFlight[a][p - inFlightFirst[a]] is 1 while activation a's device
  // buffer waits for its copy at point p: the copy is done by the point's
  // (unplanned) start unless the indicator is set.
  inFlightFirst.assign(acts.size(), 0);
  inFlight.assign(acts.size(), {});
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    double latest = model.latestD2hEndUs(a);
    inFlightFirst[a] = model.nodePoint(act.lastForwardUse) + 1;
    for (size_t p = inFlightFirst[a]; p < points.size(); ++p) {
      double slack = latest - points[p].nominalStartUs;
      if (slack <= 0)
        break;
      int col = binary();
      problem.addRow(-INFINITY, latest,
                     {{d2hDoneCol[a], 1}, {col, -slack}, {offloadCol[a], slack}});
      problem.addRow(-INFINITY, 0, {{col, 1}, {offloadCol[a], -1}});
      if (!inFlight[a].empty())
        problem.addRow(-INFINITY, 0, {{col, 1}, {inFlight[a].back(), -1}});
      inFlight[a].push_back(col);
    }
  }
  // D3 (valid inequalities that tighten the relaxation): the D2H channel
  // is a single work-conserving server, so the copy work not yet done at a
  // point's start is the fluid backlog B (B_p >= B_{p-1} + work arrived -
  // elapsed time, B >= 0), and every unfinished copy's buffer is still on
  // the device: the copy time of the buffers in flight is at least B.
  double horizon = 0.0;
  for (int a : model.d2hOrder())
    horizon = std::max(horizon, model.latestD2hEndUs(a));
  llvm::ArrayRef<int> order = model.d2hOrder();
  int backlog = -1;
  double prevStart = 0.0;
  size_t arrived = 0;
  for (size_t p = 0; p < points.size(); ++p) {
    double start = points[p].nominalStartUs;
    if (start >= horizon)
      break;
    int b = continuous(0, INFINITY);
    Expr next{{b, 1}};
    add(next, backlog, -1);
    for (; arrived < order.size() && readyAt(order[arrived]) <= start;
         ++arrived)
      add(next, offloadCol[order[arrived]], -acts[order[arrived]].d2hUs);
    problem.addRow(-(start - prevStart), INFINITY, next);
    backlog = b;
    prevStart = start;
    Expr inFlightWork{{b, -1}};
    for (size_t k = 0; k < arrived; ++k) {
      int a = order[k];
      if (static_cast<int>(p) < inFlightFirst[a])
        add(inFlightWork, offloadCol[a], acts[a].d2hUs);
      else
        add(inFlightWork, inFlightAt(a, static_cast<int>(p)), acts[a].d2hUs);
    }
    problem.addRow(0, INFINITY, inFlightWork);
  }
}

// P: after which node each prefetch is issued.
void ExactMilp::buildPrefetchIssue() {
  const NodeId first = model.earliestPrefetchAfter();
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  issueCol.assign(acts.size(), {});
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    for (NodeId j = first; j < act.firstBackwardUse - 1; ++j) {
      issueCol[a].push_back(binary());
      // P3: not before the device buffer is released (its D2H copy done
      // by the unplanned start of the next point).
      if (int h = inFlightAt(a, model.segmentPoint(j + 1)); h >= 0)
        problem.addRow(-INFINITY, 1, {{issueCol[a].back(), 1}, {h, 1}});
    }
    // P1: issued by j implies issued by j+1; issued at all iff offloaded.
    for (size_t k = 0; k < issueCol[a].size(); ++k) {
      int next = k + 1 < issueCol[a].size() ? issueCol[a][k + 1]
                                            : offloadCol[a];
      problem.addRow(-INFINITY, 0, {{issueCol[a][k], 1}, {next, -1}});
    }
    if (int h = inFlightAt(a, model.segmentPoint(act.firstBackwardUse));
        h >= 0)
      problem.addRow(-INFINITY, 1, {{offloadCol[a], 1}, {h, 1}});
    // P2: issued before its restore point.
    for (NodeId point : act.restorePoints) {
      if (point >= act.firstBackwardUse)
        break;
      Expr expr;
      add(expr, issuedBy(a, point - 1), 1);
      add(expr, restoredBy(a, Offload, point), -1);
      problem.addRow(0, INFINITY, expr);
    }
  }
}

// W: the backward part as windows, one per backward point. A window lasts
// at least its compute (the node, or the chains run in the segment) and at
// least the H2D copy work placed in it; each prefetch is spread over the
// windows from its issue to its restore point's segment.
void ExactMilp::buildWindows() {
  const NodeId f = model.firstBackward();
  const NodeId numNodes = static_cast<NodeId>(model.numNodes());
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::ArrayRef<ExactModel::Point> points = model.points();
  const double timeCost = goal == Goal::MinTime ? 1.0 : 0.0;
  if (f >= numNodes)
    return;
  const int firstWindow = model.segmentPoint(f);
  if (goal == Goal::MinTime) {
    offset = model.forwardEndUs();
    for (NodeId i = f; i < numNodes; ++i)
      offset += model.nodeTimeUs(i);
  }
  std::vector<Expr> copyWork(points.size());
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    // done[p]: copy work done by the end of window p (cumulative, which
    // keeps the relaxation tight).
    const double dh = act.h2dUs;
    const int last = model.segmentPoint(act.firstBackwardUse);
    std::vector<int> done(points.size(), -1);
    for (int p = firstWindow; p <= last; ++p) {
      int col = done[p] = continuous(0, dh);
      copyWork[p].push_back({col, 1});
      if (p > firstWindow) {
        copyWork[p].push_back({done[p - 1], -1});
        problem.addRow(0, INFINITY, {{col, 1}, {done[p - 1], -1}});
      }
      // W1: nothing before the issue.
      Expr issued{{col, 1}};
      add(issued, issuedBy(a, points[p].node - 1), -dh);
      problem.addRow(-INFINITY, 0, issued);
    }
    // W2: all done by the end of its restore point's segment.
    for (NodeId point : act.restorePoints) {
      Expr expr{{done[model.segmentPoint(point)], 1}};
      add(expr, restoredBy(a, Offload, point), -dh);
      problem.addRow(0, INFINITY, expr);
    }
  }
  std::vector<std::vector<std::pair<NodeId, int>>> chainsAt(numNodes);
  for (auto [key, col] : chainCol)
    chainsAt[key.second].push_back({key.first, col});
  for (int p = firstWindow, e = static_cast<int>(points.size()); p < e; ++p) {
    const ExactModel::Point &point = points[p];
    Expr copies;
    for (auto [col, coef] : copyWork[p])
      copies.push_back({col, -coef});
    if (point.segment) {
      if (copies.empty() && chainsAt[point.node].empty())
        continue;
      int tau = continuous(0, INFINITY, timeCost);
      Expr work{{tau, 1}};
      for (auto [n, col] : chainsAt[point.node])
        add(work, col, -model.nodeTimeUs(n));
      problem.addRow(0, INFINITY, work);
      copies.push_back({tau, 1});
      problem.addRow(0, INFINITY, copies);
      continue;
    }
    // A node's window: only the copy work beyond its own time costs.
    if (copies.empty())
      continue;
    int stretch = continuous(0, INFINITY, timeCost);
    copies.push_back({stretch, 1});
    problem.addRow(-model.nodeTimeUs(point.node), INFINITY, copies);
  }
}

// M: bytes at every program point within the budget (or the peak).
void ExactMilp::buildMemory() {
  const TrainingGraph &graph = model.getGraph();
  const ActivationAnalysis &analysis = model.getAnalysis();
  const NodeId f = model.firstBackward();
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::ArrayRef<ExactModel::Point> points = model.points();
  if (goal == Goal::MinPeak)
    peakCol = continuous(0, INFINITY, 1.0);
  std::vector<std::vector<std::pair<NodeId, int>>> chainsAt(model.numNodes());
  for (auto [key, col] : chainCol)
    chainsAt[key.second].push_back({key.first, col});
  auto mayRestoreFrom = [&](int act, Kind kind, NodeId node, bool segment) {
    if (restoreCol[kind][act].empty())
      return false;
    NodeId last = acts[act].restorePoints.back();
    return segment ? last >= node : last > node;
  };

  for (auto [p, point] : llvm::enumerate(points)) {
    if (point.segment && !point.chainsPossible)
      continue; // dominated by the node that follows
    Expr expr;
    const NodeId i = point.node;
    const bool seg = point.segment;
    for (auto [a, act] : llvm::enumerate(acts)) {
      const double mib = static_cast<double>(act.bytes) / kMiB;
      if (mib == 0)
        continue;
      add(expr, inFlightAt(a, static_cast<int>(p)), mib);
      if (i < f) {
        if (act.lastForwardUse < i)
          add(expr, retainCol[a], mib);
        continue;
      }
      if (i <= act.lastUse) {
        add(expr, retainCol[a], mib);
        add(expr, restoredBy(a, Recompute, i), mib);
        add(expr, issuedBy(a, i - 1), mib);
        continue;
      }
      // M2: past its last use, kept for chains still to be restored that
      // read it.
      int e = -1;
      for (Kind kind : {Recompute, Offload})
        for (int r : kind == Recompute ? act.recomputeReaders
                                       : act.rederiveReaders) {
          if (!mayRestoreFrom(r, kind, i, seg))
            continue;
          if (e < 0)
            e = continuous(0, 1);
          Expr need{{e, 1}};
          addRestoredFrom(need, r, kind, i, seg, -1);
          problem.addRow(0, INFINITY, need);
        }
      add(expr, e, mib);
    }
    // M3: a segment holds everything its chains create at once; the
    // activations restored there are counted above.
    if (seg)
      for (auto [n, col] : chainsAt[i])
        for (ValueId r : graph.getNode(n).results) {
          int32_t s = analysis.storageIndex(r);
          if (s < 0 || analysis.getStorages()[s].storage != r)
            continue;
          double mib = static_cast<double>(analysis.getStorages()[s].bytes) /
                       kMiB;
          add(expr, col, mib);
          if (int x = analysis.getStorages()[s].activation; x >= 0)
            addRestoredAt(expr, x, Recompute, i, -mib);
        }
    // M1: fixed + decided bytes <= budget (or the peak).
    double fixed = static_cast<double>(point.fixedBytes) / kMiB;
    if (goal == Goal::MinPeak) {
      expr.push_back({peakCol, -1});
      problem.addRow(-INFINITY, -fixed, expr);
    } else {
      problem.addRow(-INFINITY, budgetMiB - fixed, expr);
    }
  }
}

std::vector<double>
ExactMilp::encode(llvm::ArrayRef<ActivationDecision> decisions,
                  const ExactModel::Evaluation &eval) const {
  std::vector<double> values(problem.numColumns(), 0.0);
  auto set = [&](int col) {
    if (col >= 0)
      values[col] = 1.0;
  };
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  for (size_t a = 0; a < acts.size(); ++a) {
    const ActivationDecision &d = decisions[a];
    switch (d.decision) {
    case Decision::Retain:
      set(retainCol[a]);
      continue;
    case Decision::Recompute:
      set(recomputeCol[a]);
      break;
    case Decision::Offload:
      set(offloadCol[a]);
      for (size_t k = 0; k < issueCol[a].size(); ++k)
        if (model.earliestPrefetchAfter() + static_cast<NodeId>(k) >=
            d.prefetchAfter)
          set(issueCol[a][k]);
      for (size_t k = 0; k < inFlight[a].size(); ++k)
        if (inFlightFirst[a] + static_cast<int>(k) <=
            model.nodePoint(eval.releaseAfter[a]))
          set(inFlight[a][k]);
      break;
    }
    Kind kind = d.decision == Decision::Recompute ? Recompute : Offload;
    for (size_t k = 0; k < restoreCol[kind][a].size(); ++k)
      if (acts[a].restorePoints[k] >= eval.restore[a])
        set(restoreCol[kind][a][k]);
  }
  return values;
}

void ExactMilp::decode(const std::vector<double> &values,
                       std::vector<Decision> &choice,
                       std::vector<NodeId> &prefetchAfter) const {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  choice.assign(acts.size(), Decision::Retain);
  prefetchAfter.assign(acts.size(), -1);
  auto value = [&](int col) { return col < 0 ? 0.0 : values[col]; };
  for (size_t a = 0; a < acts.size(); ++a) {
    double r = value(retainCol[a]), c = value(recomputeCol[a]),
           o = value(offloadCol[a]);
    if (c > r && c >= o)
      choice[a] = Decision::Recompute;
    else if (o > r && o > c)
      choice[a] = Decision::Offload;
    if (choice[a] != Decision::Offload)
      continue;
    for (NodeId j = model.earliestPrefetchAfter();
         j < acts[a].firstBackwardUse; ++j)
      if (value(issuedBy(a, j)) > 0.5) {
        prefetchAfter[a] = j;
        break;
      }
  }
}

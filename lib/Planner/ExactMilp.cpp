//===- ExactMilp.cpp - The exact model as a MILP --------------------------===//
//
// Variables and constraints follow docs/ExactSolver.md §3; the comments
// name the constraint families used there (D, R, P, T, M).
//
//===----------------------------------------------------------------------===//

#include "ExactMilp.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>

using namespace lethe;

static constexpr double kMiB = 1024.0 * 1024.0;
/// Tie-breaks, far below any time difference that matters: prefer retain
/// over recompute/offload, and a later prefetch over an earlier one.
static constexpr double kDecisionTieBreakUs = 1e-4;
static constexpr double kIssueTieBreakUs = 1e-6;

ExactMilp::ExactMilp(const ExactModel &model, Goal goal, int64_t budgetBytes)
    : model(model), goal(goal),
      budgetMiB(static_cast<double>(budgetBytes) / kMiB) {
  buildDecisions();
  buildRecompute();
  buildPrefetchPlacement();
  buildTimeline();
  buildMemory();
}

int ExactMilp::numIntegerColumns() const {
  return static_cast<int>(llvm::count(problem.isInteger, true));
}

int ExactMilp::binary(double cost, double upper) {
  return problem.addColumn(0.0, upper, cost, true);
}

int ExactMilp::continuous(double lower, double upper, double cost) {
  return problem.addColumn(lower, upper, cost, false);
}

int ExactMilp::doneBy(NodeId node, NodeId point) const {
  llvm::ArrayRef<NodeId> points = model.rerunPoints(node);
  auto it = std::upper_bound(points.begin(), points.end(), point);
  if (it == points.begin())
    return -1;
  return rerunCol[node][it - points.begin() - 1];
}

int ExactMilp::lastRerun(NodeId node) const {
  return rerunCol[node].empty() ? -1 : rerunCol[node].back();
}

void ExactMilp::addCreated(Expr &expr, NodeId node, NodeId point,
                           double coef) const {
  llvm::ArrayRef<NodeId> points = model.rerunPoints(node);
  auto it = llvm::lower_bound(points, point);
  if (it == points.end() || *it != point)
    return;
  add(expr, rerunCol[node][it - points.begin()], coef);
  add(expr, doneBy(node, point - 1), -coef);
}

void ExactMilp::addNeed(Expr &expr, NodeId node, NodeId at, bool segment,
                        double coef) const {
  add(expr, lastRerun(node), coef);
  add(expr, doneBy(node, segment ? at - 1 : at), -coef);
}

bool ExactMilp::mayNeed(NodeId node, NodeId at, bool segment) const {
  llvm::ArrayRef<NodeId> points = model.rerunPoints(node);
  return !points.empty() && (segment ? points.back() >= at : points.back() > at);
}

int ExactMilp::issuedBy(int act, NodeId after) const {
  const ExactModel::Activation &a = model.activations()[act];
  if (offloadCol[act] < 0 || after < model.earliestPrefetchAfter())
    return -1;
  if (after >= a.firstBackwardUse - 1)
    return offloadCol[act];
  return issueCol[act][after - model.earliestPrefetchAfter()];
}

// D: one decision per activation; the host budget.
void ExactMilp::buildDecisions() {
  double tieBreak = goal == Goal::MinTime ? kDecisionTieBreakUs : 0.0;
  Expr host;
  for (const ExactModel::Activation &act : model.activations()) {
    retainCol.push_back(binary());
    recomputeCol.push_back(act.canRecompute ? binary(tieBreak) : -1);
    offloadCol.push_back(act.canOffload ? binary(tieBreak) : -1);
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

// R: where each forward node re-runs.
void ExactMilp::buildRecompute() {
  const TrainingGraph &graph = model.getGraph();
  const NodeId f = model.firstBackward();
  rerunCol.assign(model.numNodes(), {});
  for (NodeId n = 0; n < f; ++n) {
    for (size_t k = 0; k < model.rerunPoints(n).size(); ++k) {
      rerunCol[n].push_back(binary());
      if (k > 0) // R1: once re-run, it stays re-run.
        problem.addRow(-INFINITY, 0,
                       {{rerunCol[n][k - 1], 1}, {rerunCol[n][k], -1}});
    }
  }
  // R2: a recomputed activation is re-created before each backward read;
  // R3: a re-run node re-creates only recomputed activations.
  for (auto [a, act] : llvm::enumerate(model.activations())) {
    for (auto [producer, reader] : act.backwardReads) {
      Expr expr;
      add(expr, doneBy(producer, reader), 1);
      add(expr, recomputeCol[a], -1);
      problem.addRow(0, INFINITY, expr);
    }
  }
  for (NodeId n = 0; n < f; ++n) {
    if (rerunCol[n].empty())
      continue;
    for (ValueId r : graph.getNode(n).results) {
      int a = model.activationOf(graph.getValue(r).storage);
      if (a < 0)
        continue;
      Expr expr;
      add(expr, lastRerun(n), 1);
      add(expr, recomputeCol[a], -1);
      problem.addRow(-INFINITY, 0, expr);
    }
  }
  // R4: a re-run node's inputs are available: forward temporaries (and
  // views of recomputed storages) re-created by then, activations kept.
  for (NodeId n = 0; n < f; ++n) {
    if (rerunCol[n].empty())
      continue;
    llvm::ArrayRef<NodeId> points = model.rerunPoints(n);
    std::vector<ValueId> operands = graph.getNode(n).operands;
    llvm::sort(operands);
    operands.erase(std::unique(operands.begin(), operands.end()),
                   operands.end());
    for (ValueId x : operands) {
      NodeId m = graph.getValue(x).producer;
      ValueId s = graph.getValue(x).storage;
      if (m < 0 || graph.getValue(s).isInput())
        continue;
      int a = model.activationOf(s);
      for (size_t k = 0; k < points.size(); ++k) {
        Expr expr;
        add(expr, doneBy(m, points[k]), 1);
        if (a >= 0) {
          add(expr, retainCol[a], 1);
          add(expr, offloadCol[a], 1);
        }
        add(expr, rerunCol[n][k], -1);
        problem.addRow(0, INFINITY, expr);
      }
    }
  }
  // R5: a node re-runs only where something needs it (the earliest such
  // point): a re-run consumer of one of its results, or a backward read of
  // a recomputed value it produces.
  for (NodeId n = 0; n < f; ++n) {
    llvm::ArrayRef<NodeId> points = model.rerunPoints(n);
    if (points.empty())
      continue;
    std::vector<NodeId> consumers;
    for (ValueId r : graph.getNode(n).results)
      for (NodeId user : graph.getValue(r).users)
        if (user < f && !rerunCol[user].empty())
          consumers.push_back(user);
    llvm::sort(consumers);
    consumers.erase(std::unique(consumers.begin(), consumers.end()),
                    consumers.end());
    for (NodeId point : points) {
      Expr expr;
      addCreated(expr, n, point, 1);
      for (NodeId c : consumers)
        addCreated(expr, c, point, -1);
      for (ValueId r : graph.getNode(n).results) {
        int a = model.activationOf(graph.getValue(r).storage);
        if (a < 0)
          continue;
        for (auto [producer, reader] : model.activations()[a].backwardReads)
          if (producer == n && reader == point)
            add(expr, recomputeCol[a], -1);
      }
      problem.addRow(-INFINITY, 0, expr);
    }
  }
}

// P: where each prefetch is issued, in first-backward-use order.
void ExactMilp::buildPrefetchPlacement() {
  const NodeId first = model.earliestPrefetchAfter();
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  double tieBreak = goal == Goal::MinTime ? kIssueTieBreakUs : 0.0;
  issueCol.assign(acts.size(), {});
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    for (NodeId j = first; j < act.firstBackwardUse - 1; ++j)
      issueCol[a].push_back(binary(tieBreak));
    // P1: issued by j implies issued by j+1; issued at all iff offloaded.
    for (size_t k = 0; k < issueCol[a].size(); ++k) {
      int next = k + 1 < issueCol[a].size() ? issueCol[a][k + 1]
                                            : offloadCol[a];
      problem.addRow(-INFINITY, 0, {{issueCol[a][k], 1}, {next, -1}});
    }
  }
  // P2: prefetches are issued in h2dOrder. Y[t][j] >= max over later
  // positions of "issued by j"; an offloaded activation at position t must
  // be issued by j if any later one is.
  llvm::ArrayRef<int> order = model.h2dOrder();
  std::vector<std::vector<int>> later(order.size());
  for (size_t t = order.size(); t-- > 1;) {
    NodeId limit = acts[order[t - 1]].firstBackwardUse - 1;
    for (NodeId j = first; j < limit; ++j) {
      int y = continuous(0, 1);
      later[t].push_back(y);
      problem.addRow(0, INFINITY, {{y, 1}, {issuedBy(order[t], j), -1}});
      if (t + 1 < order.size())
        problem.addRow(0, INFINITY, {{y, 1}, {later[t + 1][j - first], -1}});
    }
  }
  for (size_t t = 0; t + 1 < order.size(); ++t) {
    int a = order[t];
    for (NodeId j = first; j < acts[a].firstBackwardUse - 1; ++j)
      problem.addRow(-1, INFINITY,
                     {{issuedBy(a, j), 1},
                      {later[t + 1][j - first], -1},
                      {offloadCol[a], -1}});
  }
  // P3: a re-run consumer of an offloaded storage needs it prefetched.
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    for (NodeId c : act.rerunConsumers)
      for (NodeId point : model.rerunPoints(c)) {
        if (point >= act.firstBackwardUse)
          break;
        Expr expr;
        add(expr, issuedBy(a, point - 1), 1);
        add(expr, offloadCol[a], -1);
        addCreated(expr, c, point, -1);
        problem.addRow(-1, INFINITY, expr);
      }
  }
}

// T: the timeline of the copy channels and the backward compute stream.
void ExactMilp::buildTimeline() {
  const TrainingGraph &graph = model.getGraph();
  const NodeId f = model.firstBackward();
  const NodeId numNodes = static_cast<NodeId>(model.numNodes());
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  bigTime = 1.0;
  for (NodeId i = 0; i < numNodes; ++i)
    bigTime += model.nodeTimeUs(i) * (i < f ? 2 : 1);
  for (const ExactModel::Activation &act : acts)
    bigTime += act.d2hUs + act.h2dUs;

  // T1: D2H, first in first out in production order.
  d2hDoneCol.assign(acts.size(), -1);
  d2hLatest.assign(acts.size(), 0.0);
  double latest = 0.0;
  int prev = -1;
  for (int a : model.d2hOrder()) {
    const ExactModel::Activation &act = acts[a];
    double produced = model.nominalStartUs(act.producer) +
                      model.nodeTimeUs(act.producer);
    double prevLatest = latest;
    latest = std::max(latest, produced) + act.d2hUs;
    d2hLatest[a] = latest;
    int q = d2hDoneCol[a] = continuous(0, latest);
    problem.addRow(0, INFINITY, {{q, 1}, {offloadCol[a], -(produced + act.d2hUs)}});
    if (prev >= 0) {
      int qp = d2hDoneCol[prev];
      double big = prevLatest + act.d2hUs;
      problem.addRow(0, INFINITY, {{q, 1}, {qp, -1}});
      problem.addRow(act.d2hUs - big, INFINITY,
                     {{q, 1}, {qp, -1}, {offloadCol[a], -big}});
    }
    prev = a;
  }

  // T2: backward compute stream: recompute segments, then nodes.
  nodeStartCol.assign(numNodes, -1);
  segmentStartCol.assign(numNodes, -1);
  std::vector<std::vector<NodeId>> rerunAt(numNodes);
  for (NodeId n = 0; n < f; ++n)
    for (NodeId point : model.rerunPoints(n))
      rerunAt[point].push_back(n);
  for (NodeId i = f; i < numNodes; ++i) {
    Expr prevEnd; // start - prevEnd >= constant
    double constant = 0.0;
    if (i == f)
      constant = model.forwardEndUs();
    else {
      add(prevEnd, nodeStartCol[i - 1], -1);
      constant = model.nodeTimeUs(i - 1);
    }
    int start = -1;
    if (model.segmentPoint(i) >= 0) {
      int seg = segmentStartCol[i] = continuous(0, bigTime);
      Expr expr = prevEnd;
      add(expr, seg, 1);
      problem.addRow(constant, INFINITY, expr);
      start = nodeStartCol[i] = continuous(0, bigTime);
      Expr work{{start, 1}, {seg, -1}};
      for (NodeId n : rerunAt[i])
        addCreated(work, n, i, -model.nodeTimeUs(n));
      problem.addRow(0, INFINITY, work);
    } else {
      start = nodeStartCol[i] = continuous(0, bigTime);
      Expr expr = prevEnd;
      add(expr, start, 1);
      problem.addRow(constant, INFINITY, expr);
    }
  }
  problem.objective[nodeStartCol[numNodes - 1]] =
      goal == Goal::MinTime ? 1.0 : 0.0;

  // T3: H2D, first in first out in h2dOrder, after the D2H copy and the
  // issuing node; T4: the reading segment or node waits for it.
  h2dDoneCol.assign(acts.size(), -1);
  prev = -1;
  const NodeId first = model.earliestPrefetchAfter();
  for (int a : model.h2dOrder()) {
    const ExactModel::Activation &act = acts[a];
    int p = h2dDoneCol[a] = continuous(0, bigTime);
    int o = offloadCol[a];
    if (prev >= 0) {
      problem.addRow(0, INFINITY, {{p, 1}, {h2dDoneCol[prev], -1}});
      problem.addRow(act.h2dUs - bigTime, INFINITY,
                     {{p, 1}, {h2dDoneCol[prev], -1}, {o, -bigTime}});
    }
    problem.addRow(act.h2dUs - bigTime, INFINITY,
                   {{p, 1}, {d2hDoneCol[a], -1}, {o, -bigTime}});
    // Issued after node j (not before): done >= end of j + copy time.
    for (NodeId j = first; j < act.firstBackwardUse; ++j) {
      Expr expr{{p, 1}, {o, -bigTime}};
      double rhs = act.h2dUs - bigTime;
      if (j < f)
        rhs += model.forwardEndUs();
      else {
        add(expr, nodeStartCol[j], -1);
        rhs += model.nodeTimeUs(j);
      }
      add(expr, issuedBy(a, j - 1), bigTime);
      problem.addRow(rhs, INFINITY, expr);
    }
    problem.addRow(-bigTime, INFINITY,
                   {{nodeStartCol[act.firstBackwardUse], 1}, {p, -1},
                    {o, -bigTime}});
    for (NodeId c : act.rerunConsumers)
      for (NodeId point : model.rerunPoints(c)) {
        if (point > act.firstBackwardUse)
          break;
        Expr expr{{segmentStartCol[point], 1}, {p, -1}, {o, -bigTime}};
        addCreated(expr, c, point, -bigTime);
        problem.addRow(-2 * bigTime, INFINITY, expr);
      }
    prev = a;
  }
  (void)graph;
}

// M: bytes at every program point within the budget (or the peak).
void ExactMilp::buildMemory() {
  const TrainingGraph &graph = model.getGraph();
  const NodeId f = model.firstBackward();
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::ArrayRef<ExactModel::Point> points = model.points();
  if (goal == Goal::MinPeak)
    peakCol = continuous(0, INFINITY, 1.0);

  // In-flight D2H copies: h[a][p - hFirst[a]] is 1 while activation a's
  // device buffer waits for its copy at point p.
  std::vector<int> hFirst(acts.size(), 0);
  std::vector<std::vector<int>> h(acts.size());
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    hFirst[a] = model.nodePoint(act.lastForwardUse) + 1;
    for (size_t p = hFirst[a]; p < points.size(); ++p) {
      double slack = d2hLatest[a] - points[p].nominalStartUs;
      if (slack <= 0)
        break;
      int col = binary();
      // M1: the copy is done by the point's start unless h says otherwise.
      problem.addRow(-INFINITY, d2hLatest[a],
                     {{d2hDoneCol[a], 1}, {col, -slack}, {offloadCol[a], slack}});
      problem.addRow(-INFINITY, 0, {{col, 1}, {offloadCol[a], -1}});
      if (!h[a].empty())
        problem.addRow(-INFINITY, 0, {{col, 1}, {h[a].back(), -1}});
      h[a].push_back(col);
    }
  }

  // Forward temporaries that re-runs re-create, by producing node.
  std::vector<std::pair<NodeId, ValueId>> temps;
  for (NodeId n = 0; n < f; ++n) {
    if (rerunCol[n].empty())
      continue;
    for (ValueId r : graph.getNode(n).results)
      if (graph.getValue(r).storage == r && graph.getValue(r).bytes > 0 &&
          model.activationOf(r) < 0)
        temps.push_back({n, r});
  }

  for (auto [p, point] : llvm::enumerate(points)) {
    Expr expr;
    const NodeId i = point.node;
    const bool seg = point.segment;
    for (auto [a, act] : llvm::enumerate(acts)) {
      const double mib = static_cast<double>(act.bytes) / kMiB;
      if (mib == 0)
        continue;
      if (!h[a].empty() && p >= static_cast<size_t>(hFirst[a]) &&
          p - hFirst[a] < h[a].size())
        add(expr, h[a][p - hFirst[a]], mib);
      if (i < f) {
        if (act.lastForwardUse < i)
          add(expr, retainCol[a], mib);
        continue;
      }
      if (i <= act.lastUse) {
        add(expr, retainCol[a], mib);
        if (recomputeCol[a] >= 0)
          add(expr, doneBy(act.producer, i), mib);
        add(expr, issuedBy(a, i - 1), mib);
        continue;
      }
      // M2: past its last use, kept for re-run consumers still to come.
      int e = -1;
      for (NodeId c : act.rerunConsumers) {
        if (!mayNeed(c, i, seg))
          continue;
        if (e < 0)
          e = continuous(0, 1);
        Expr need{{e, 1}};
        addNeed(need, c, i, seg, -1);
        problem.addRow(0, INFINITY, need);
      }
      add(expr, e, mib);
    }
    if (i >= f) {
      // M3: re-created temporaries, from their re-run to their last
      // re-run consumer.
      for (auto [n, t] : temps) {
        Expr created;
        if (seg)
          addCreated(created, n, i, -1);
        int done = doneBy(n, i);
        int u = -1;
        auto column = [&]() {
          if (u < 0)
            u = continuous(0, 1);
          return u;
        };
        if (!created.empty()) {
          created.push_back({column(), 1});
          problem.addRow(0, INFINITY, created);
        }
        if (done >= 0)
          for (NodeId c : model.rerunConsumersOfTemp(t)) {
            if (!mayNeed(c, i, seg))
              continue;
            Expr need{{column(), 1}, {done, -1}};
            addNeed(need, c, i, seg, -1);
            problem.addRow(-1, INFINITY, need);
          }
        add(expr, u, static_cast<double>(graph.getValue(t).bytes) / kMiB);
      }
    }
    double fixed = static_cast<double>(point.fixedBytes) / kMiB;
    if (goal == Goal::MinPeak) {
      expr.push_back({peakCol, -1});
      problem.addRow(-INFINITY, -fixed, expr);
    } else {
      problem.addRow(-INFINITY, budgetMiB - fixed, expr);
    }
  }
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

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

ExactMilp::ExactMilp(const ExactModel &model, Goal goal, int64_t budgetBytes)
    : model(model), goal(goal),
      budgetMiB(static_cast<double>(budgetBytes) / kMiB) {
  buildDecisions();
  buildRecompute();
  buildPrefetchPlacement();
  buildD2H();
  buildWindows();
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

// P: where each prefetch is issued.
void ExactMilp::buildPrefetchPlacement() {
  const NodeId first = model.earliestPrefetchAfter();
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  issueCol.assign(acts.size(), {});
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    for (NodeId j = first; j < act.firstBackwardUse - 1; ++j)
      issueCol[a].push_back(binary());
    // P1: issued by j implies issued by j+1; issued at all iff offloaded.
    for (size_t k = 0; k < issueCol[a].size(); ++k) {
      int next = k + 1 < issueCol[a].size() ? issueCol[a][k + 1]
                                            : offloadCol[a];
      problem.addRow(-INFINITY, 0, {{issueCol[a][k], 1}, {next, -1}});
    }
    // P2: a re-run consumer of an offloaded storage needs it prefetched
    // before its segment.
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

// D: the D2H channel, first in first out in production order, and which
// device buffers still wait for their copy at each point.
void ExactMilp::buildD2H() {
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::ArrayRef<ExactModel::Point> points = model.points();
  d2hDoneCol.assign(acts.size(), -1);
  d2hLatest.assign(acts.size(), 0.0);
  // D1: done >= max(produced, previous done) + copy time when offloaded,
  // done >= previous done otherwise (no big-M needed: with o = 1 the two
  // lower bounds are the FIFO recurrence). The bounds are the completion
  // times with every candidate offloaded.
  double latest = 0.0;
  int prev = -1;
  for (int a : model.d2hOrder()) {
    const ExactModel::Activation &act = acts[a];
    double produced = model.nominalStartUs(act.producer) +
                      model.nodeTimeUs(act.producer);
    latest = std::max(latest, produced) + act.d2hUs;
    d2hLatest[a] = latest;
    int q = d2hDoneCol[a] = continuous(0, latest);
    problem.addRow(0, INFINITY,
                   {{q, 1}, {offloadCol[a], -(produced + act.d2hUs)}});
    if (prev >= 0)
      problem.addRow(0, INFINITY,
                     {{q, 1}, {d2hDoneCol[prev], -1}, {offloadCol[a], -act.d2hUs}});
    prev = a;
  }
  // D2: inFlight[a][p - inFlightFirst[a]] is 1 while activation a's device
  // buffer waits for its copy at point p (from its last forward use on,
  // while the copy may still run).
  inFlightFirst.assign(acts.size(), 0);
  inFlight.assign(acts.size(), {});
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    inFlightFirst[a] = model.nodePoint(act.lastForwardUse) + 1;
    for (size_t p = inFlightFirst[a]; p < points.size(); ++p) {
      double slack = d2hLatest[a] - points[p].nominalStartUs;
      if (slack <= 0)
        break;
      int col = binary();
      problem.addRow(-INFINITY, d2hLatest[a],
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
  for (double t : d2hLatest)
    horizon = std::max(horizon, t);
  int backlog = -1;
  double prevStart = 0.0;
  size_t arrived = 0;
  llvm::ArrayRef<int> order = model.d2hOrder();
  auto producedAt = [&](int a) {
    return model.nominalStartUs(acts[a].producer) +
           model.nodeTimeUs(acts[a].producer);
  };
  for (size_t p = 0; p < points.size(); ++p) {
    double start = points[p].nominalStartUs;
    if (start >= horizon)
      break;
    Expr next;
    int b = continuous(0, INFINITY);
    next.push_back({b, 1});
    add(next, backlog, -1);
    for (; arrived < order.size() && producedAt(order[arrived]) <= start;
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

int ExactMilp::inFlightAt(int act, int point) const {
  int k = point - inFlightFirst[act];
  if (inFlight[act].empty() || k < 0 ||
      k >= static_cast<int>(inFlight[act].size()))
    return -1;
  return inFlight[act][k];
}

// W: the backward part as windows, one per backward point. A window lasts
// at least its compute (the node, or the segment's re-runs) and at least
// the H2D copy work placed in it; each prefetch is spread over the windows
// between its issue and its first need, once its D2H copy is done.
void ExactMilp::buildWindows() {
  const NodeId f = model.firstBackward();
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::ArrayRef<ExactModel::Point> points = model.points();
  const double timeCost = goal == Goal::MinTime ? 1.0 : 0.0;
  const int firstWindow = model.segmentPoint(f);
  if (goal == Goal::MinTime) {
    offset = model.forwardEndUs();
    for (NodeId i = f; i < static_cast<NodeId>(model.numNodes()); ++i)
      offset += model.nodeTimeUs(i);
  }
  std::vector<Expr> copyWork(points.size());
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (offloadCol[a] < 0)
      continue;
    // done[p]: copy work of this prefetch done by the end of window p
    // (cumulative, which keeps the relaxation tight).
    const double dh = act.h2dUs;
    int prevDone = -1;
    for (int p = firstWindow; p < model.nodePoint(act.firstBackwardUse); ++p) {
      const NodeId i = points[p].node;
      int done = continuous(0, dh);
      copyWork[p].push_back({done, 1});
      if (prevDone >= 0) {
        copyWork[p].push_back({prevDone, -1});
        problem.addRow(0, INFINITY, {{done, 1}, {prevDone, -1}});
      }
      // W1: nothing before the issue; W2: nothing before the D2H copy is
      // done.
      Expr issued{{done, 1}};
      add(issued, issuedBy(a, i - 1), -dh);
      problem.addRow(-INFINITY, 0, issued);
      if (int h = inFlightAt(a, p); h >= 0)
        problem.addRow(-INFINITY, 0,
                       {{done, 1}, {offloadCol[a], -dh}, {h, dh}});
      // W3: all done before a re-run consumer's segment needs it.
      if (prevDone >= 0)
        for (NodeId c : act.rerunConsumers) {
          int rerun = doneBy(c, i);
          if (rerun >= 0)
            problem.addRow(-dh, INFINITY,
                           {{prevDone, 1}, {offloadCol[a], -dh}, {rerun, -dh}});
        }
      prevDone = done;
    }
    // W4: the whole copy, when offloaded.
    if (prevDone >= 0)
      problem.addRow(0, 0, {{prevDone, 1}, {offloadCol[a], -dh}});
    else
      problem.addRow(0, 0, {{offloadCol[a], 1}});
  }
  for (int p = firstWindow, e = static_cast<int>(points.size()); p < e; ++p) {
    const ExactModel::Point &point = points[p];
    if (point.segment) {
      int tau = continuous(0, INFINITY, timeCost);
      Expr work{{tau, 1}};
      for (NodeId n = 0; n < f; ++n)
        addCreated(work, n, point.node, -model.nodeTimeUs(n));
      problem.addRow(0, INFINITY, work);
      Expr copies = copyWork[p];
      for (auto &term : copies)
        term.second = -term.second;
      copies.push_back({tau, 1});
      problem.addRow(0, INFINITY, copies);
      continue;
    }
    // A node's window: only the copy work beyond its own time costs.
    if (copyWork[p].empty())
      continue;
    int stretch = continuous(0, INFINITY, timeCost);
    Expr copies = copyWork[p];
    for (auto &term : copies)
      term.second = -term.second;
    copies.push_back({stretch, 1});
    problem.addRow(-model.nodeTimeUs(point.node), INFINITY, copies);
  }
}

// M: bytes at every program point within the budget (or the peak).
void ExactMilp::buildMemory() {
  const TrainingGraph &graph = model.getGraph();
  const NodeId f = model.firstBackward();
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  llvm::ArrayRef<ExactModel::Point> points = model.points();
  if (goal == Goal::MinPeak)
    peakCol = continuous(0, INFINITY, 1.0);

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
    if (point.segment && !point.rerunsPossible)
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
    // M1: fixed bytes + decision-dependent bytes <= budget (or peak).
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

//===- ExactModel.cpp - The cost model of the exact `auto` solver ---------===//
//
// docs/ExactSolver.md states the model; this file computes it: the analysis
// shared with the MILP (activations, what may be re-run where, program
// points and the bytes every plan keeps there) and the evaluation of one
// plan.
//
//===----------------------------------------------------------------------===//

#include "lethe/Planner/ExactModel.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <functional>
#include <limits>

using namespace lethe;

static constexpr uint32_t kNeverRerun =
    NodeFlagRandom | NodeFlagCollective | NodeFlagMutates;

ExactModel::ExactModel(const TrainingGraph &graph, const DeviceProfile &device,
                       const PlanOptions &options)
    : graph(graph), options(options) {
  analyse(device);
}

static std::string nodeLabel(const TrainingGraph &graph, NodeId node) {
  const GraphNode &n = graph.getNode(node);
  std::string label = "node " + std::to_string(node) + " (" + n.kind;
  if (!n.name.empty())
    label += " '" + n.name + "'";
  return label + ")";
}

void ExactModel::analyse(const DeviceProfile &device) {
  const int numNodes = static_cast<int>(graph.numNodes());
  const int numValues = static_cast<int>(graph.numValues());
  firstBwd = graph.firstBackwardNode();
  const NodeId f = firstBwd;

  nodeTime.resize(numNodes);
  nominalStart.resize(numNodes);
  double clock = 0.0;
  for (NodeId i = 0; i < numNodes; ++i) {
    nominalStart[i] = clock;
    nodeTime[i] = std::max(0.0, graph.getNode(i).timeUs);
    clock += nodeTime[i];
    if (i + 1 == f)
      forwardEnd = clock;
  }
  if (f == 0)
    forwardEnd = 0.0;
  if (f >= numNodes)
    forwardEnd = clock;

  // Liveness of every storage owner, and its forward/backward uses.
  liveStart.assign(numValues, -1);
  liveEnd.assign(numValues, -1);
  std::vector<NodeId> lastFwd(numValues, -1), firstBwdUse(numValues, -1);
  for (ValueId v = 0; v < numValues; ++v) {
    const GraphValue &value = graph.getValue(v);
    ValueId owner = value.storage;
    if (graph.getValue(owner).isInput())
      continue;
    NodeId producer = graph.getValue(owner).producer;
    if (liveStart[owner] < 0) {
      liveStart[owner] = liveEnd[owner] = producer;
      lastFwd[owner] = producer;
    }
    for (NodeId user : value.users) {
      liveEnd[owner] = std::max(liveEnd[owner], user);
      if (user < f)
        lastFwd[owner] = std::max(lastFwd[owner], user);
      else if (firstBwdUse[owner] < 0 || user < firstBwdUse[owner])
        firstBwdUse[owner] = user;
    }
    if (value.isOutput)
      liveEnd[owner] = numNodes - 1;
  }

  // Storages a forward node writes in place: neither recomputed nor
  // offloaded (the copy or the re-run would see the wrong contents).
  std::vector<bool> mutated(numValues, false);
  for (NodeId n = 0; n < f; ++n) {
    const GraphNode &node = graph.getNode(n);
    if (!node.hasFlag(NodeFlagMutates))
      continue;
    for (ValueId r : node.results)
      if (graph.isAlias(r))
        mutated[graph.getValue(r).storage] = true;
    if (!node.operands.empty())
      mutated[graph.getValue(node.operands.front()).storage] = true;
  }

  // Activations, by value id.
  actOfValue.assign(numValues, -1);
  const double d2hBw = device.d2hBytesPerSec, h2dBw = device.h2dBytesPerSec;
  for (ValueId v = 0; v < numValues; ++v) {
    const GraphValue &value = graph.getValue(v);
    if (value.isInput() || value.storage != v || value.producer >= f ||
        firstBwdUse[v] < 0)
      continue;
    Activation act;
    act.value = v;
    act.bytes = value.bytes;
    act.producer = value.producer;
    act.lastForwardUse = lastFwd[v];
    act.firstBackwardUse = firstBwdUse[v];
    act.lastUse = liveEnd[v];
    act.canOffload = act.bytes > 0 && act.bytes >= options.minOffloadBytes &&
                     d2hBw > 0 && h2dBw > 0 && !mutated[v];
    if (act.canOffload) {
      act.d2hUs = static_cast<double>(act.bytes) / d2hBw * 1e6;
      act.h2dUs = static_cast<double>(act.bytes) / h2dBw * 1e6;
    }
    actOfValue[v] = static_cast<int>(acts.size());
    acts.push_back(std::move(act));
  }
  // Backward reads of forward-produced values, per storage.
  for (ValueId v = 0; v < numValues; ++v) {
    const GraphValue &value = graph.getValue(v);
    int a = actOfValue[value.storage];
    if (a < 0 || value.producer < 0 || value.producer >= f)
      continue;
    for (NodeId user : value.users)
      if (user >= f) {
        acts[a].backwardReads.push_back({value.producer, user});
        break;
      }
  }

  // Which forward nodes may be re-run, and which activations recomputed: a
  // fixpoint, since each depends on the other. An operand is available to
  // a re-run when its storage is a graph input or an activation (it can be
  // kept); a forward temporary must be re-created, so its producer must
  // re-run. A re-run node re-creates every activation among its results
  // (owned or aliased), so all of them must be recomputable. Recomputing a
  // storage re-runs its producer and the view nodes that re-create the
  // aliases backward nodes read.
  auto isTemp = [&](ValueId v) {
    ValueId owner = graph.getValue(v).storage;
    return !graph.getValue(owner).isInput() && actOfValue[owner] < 0;
  };
  rerunnable.assign(numNodes, false);
  for (NodeId n = 0; n < f; ++n) {
    const GraphNode &node = graph.getNode(n);
    // A node whose results all alias graph inputs never needs re-running.
    rerunnable[n] = !(node.flags & kNeverRerun) &&
                    llvm::any_of(node.results, [&](ValueId r) {
                      return !graph.getValue(graph.getValue(r).storage)
                                  .isInput();
                    });
  }
  for (Activation &act : acts)
    act.canRecompute = !mutated[act.value];
  std::function<bool(NodeId, ValueId)> chainOk = [&](NodeId n, ValueId s) {
    if (!rerunnable[n])
      return false;
    for (ValueId x : graph.getNode(n).operands)
      if (graph.getValue(x).storage == s && x != s &&
          !chainOk(graph.getValue(x).producer, s))
        return false;
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (NodeId n = 0; n < f; ++n) {
      if (!rerunnable[n])
        continue;
      const GraphNode &node = graph.getNode(n);
      bool ok = llvm::all_of(node.operands, [&](ValueId x) {
        return !isTemp(x) || rerunnable[graph.getValue(x).producer];
      });
      ok = ok && llvm::all_of(node.results, [&](ValueId r) {
             int a = actOfValue[graph.getValue(r).storage];
             return a < 0 || acts[a].canRecompute;
           });
      if (!ok) {
        rerunnable[n] = false;
        changed = true;
      }
    }
    for (Activation &act : acts) {
      if (!act.canRecompute)
        continue;
      bool ok = rerunnable[act.producer];
      for (auto [producer, reader] : act.backwardReads)
        ok = ok && chainOk(producer, act.value);
      if (!ok) {
        act.canRecompute = false;
        changed = true;
      }
    }
  }

  // Re-run consumers of every forward temporary.
  tempConsumers.assign(numValues, {});
  for (NodeId n = 0; n < f; ++n) {
    if (!rerunnable[n])
      continue;
    for (ValueId x : graph.getNode(n).operands) {
      if (!isTemp(x))
        continue;
      std::vector<NodeId> &list = tempConsumers[graph.getValue(x).storage];
      if (list.empty() || list.back() != n)
        list.push_back(n);
    }
  }

  // Re-run consumers of every storage.
  for (NodeId n = 0; n < f; ++n) {
    if (!rerunnable[n])
      continue;
    for (ValueId x : graph.getNode(n).operands) {
      int a = actOfValue[graph.getValue(x).storage];
      if (a >= 0 && (acts[a].rerunConsumers.empty() ||
                     acts[a].rerunConsumers.back() != n))
        acts[a].rerunConsumers.push_back(n);
    }
  }

  // Where each node may be re-run: before the first backward read of a
  // recomputable value it produces, or wherever a re-run consumer of one
  // of its results may run.
  rerunPointsOf.assign(numNodes, {});
  for (NodeId n = f - 1; n >= 0; --n) {
    if (!rerunnable[n])
      continue;
    std::vector<NodeId> pts;
    for (ValueId r : graph.getNode(n).results) {
      int a = actOfValue[graph.getValue(r).storage];
      if (a >= 0)
        for (auto [producer, reader] : acts[a].backwardReads)
          if (producer == n)
            pts.push_back(reader);
      for (NodeId user : graph.getValue(r).users)
        if (user < f && rerunnable[user])
          llvm::append_range(pts, rerunPointsOf[user]);
    }
    llvm::sort(pts);
    pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
    rerunPointsOf[n] = std::move(pts);
  }
  std::vector<bool> isPoint(numNodes, false);
  for (NodeId n = 0; n < f; ++n)
    for (NodeId p : rerunPointsOf[n])
      isPoint[p] = true;

  // Program points and the bytes every plan keeps at each.
  nodePointOf.assign(numNodes, -1);
  segmentPointOf.assign(numNodes, -1);
  for (NodeId i = 0; i < numNodes; ++i) {
    if (i >= f) {
      segmentPointOf[i] = static_cast<int>(pointList.size());
      pointList.push_back({true, i, nominalStart[i], 0, isPoint[i]});
    }
    nodePointOf[i] = static_cast<int>(pointList.size());
    pointList.push_back({false, i, nominalStart[i], 0, false});
  }
  // Difference arrays over nodes: live at node i, and live across the
  // boundary between node i-1 and node i.
  std::vector<int64_t> atNode(numNodes + 1, 0), across(numNodes + 1, 0);
  for (ValueId v = 0; v < numValues; ++v) {
    if (liveStart[v] < 0 || graph.getValue(v).storage != v)
      continue;
    int64_t bytes = graph.getValue(v).bytes;
    NodeId end = actOfValue[v] >= 0 ? lastFwd[v] : liveEnd[v];
    atNode[liveStart[v]] += bytes;
    atNode[end + 1] -= bytes;
    if (end > liveStart[v]) {
      across[liveStart[v] + 1] += bytes;
      across[end + 1] -= bytes;
    }
  }
  int64_t nodeBytes = 0, acrossBytes = 0;
  for (NodeId i = 0; i < numNodes; ++i) {
    nodeBytes += atNode[i];
    acrossBytes += across[i];
    pointList[nodePointOf[i]].fixedBytes = nodeBytes;
    if (segmentPointOf[i] >= 0)
      pointList[segmentPointOf[i]].fixedBytes = acrossBytes;
  }

  for (int a = 0, e = static_cast<int>(acts.size()); a < e; ++a)
    if (acts[a].canOffload) {
      d2hOrderList.push_back(a);
      h2dOrderList.push_back(a);
    }
  // Activations are in value order, so ties keep value order.
  llvm::sort(d2hOrderList, [&](int x, int y) {
    return std::make_pair(acts[x].producer, x) <
           std::make_pair(acts[y].producer, y);
  });
  llvm::sort(h2dOrderList, [&](int x, int y) {
    return std::make_pair(acts[x].firstBackwardUse, x) <
           std::make_pair(acts[y].firstBackwardUse, y);
  });
}

std::vector<ActivationDecision> ExactModel::retainAll() const {
  std::vector<Decision> choice(acts.size(), Decision::Retain);
  std::vector<NodeId> after(acts.size(), -1);
  return makeDecisions(choice, after);
}

/// Per forward node, the backward node before which it re-runs (-1: not
/// re-run), derived from the decisions by the rule of the model: a node
/// re-runs once, before the earliest backward node that needs it. Returns
/// an error message when the decisions need a node that cannot re-run.
static std::string
computeReruns(const ExactModel &model, llvm::ArrayRef<Decision> decision,
              std::vector<NodeId> &rerunBefore) {
  const TrainingGraph &graph = model.getGraph();
  const NodeId f = model.firstBackward();
  rerunBefore.assign(graph.numNodes(), -1);
  auto storageDecision = [&](ValueId v) -> std::optional<Decision> {
    int a = model.activationOf(graph.getValue(v).storage);
    if (a < 0)
      return std::nullopt;
    return decision[a];
  };
  for (NodeId n = f - 1; n >= 0; --n) {
    NodeId when = std::numeric_limits<NodeId>::max();
    for (ValueId r : graph.getNode(n).results) {
      const GraphValue &value = graph.getValue(r);
      if (graph.getValue(value.storage).isInput())
        continue;
      std::optional<Decision> d = storageDecision(r);
      bool recreated = !d || *d == Decision::Recompute;
      if (d && *d == Decision::Recompute)
        for (NodeId user : value.users)
          if (user >= f) {
            when = std::min(when, user);
            break;
          }
      if (!recreated)
        continue;
      for (NodeId user : value.users)
        if (user < f && rerunBefore[user] >= 0)
          when = std::min(when, rerunBefore[user]);
    }
    if (when == std::numeric_limits<NodeId>::max())
      continue;
    if (!model.canRerun(n))
      return "the decisions need " + nodeLabel(graph, n) +
             " re-run, but it cannot be (RNG, collective, in-place, or an "
             "input it needs cannot be re-created)";
    for (ValueId r : graph.getNode(n).results) {
      std::optional<Decision> d = storageDecision(r);
      if (d && *d != Decision::Recompute)
        return "re-running " + nodeLabel(graph, n) +
               " re-creates activation value " +
               std::to_string(graph.getValue(r).storage) +
               ", which is not recomputed";
    }
    rerunBefore[n] = when;
  }
  return {};
}

std::vector<ActivationDecision>
ExactModel::makeDecisions(llvm::ArrayRef<Decision> choice,
                          llvm::ArrayRef<NodeId> prefetchAfter) const {
  std::vector<ActivationDecision> out(acts.size());
  std::vector<NodeId> rerunBefore;
  std::string error = computeReruns(*this, choice, rerunBefore);
  for (auto [a, act] : llvm::enumerate(acts)) {
    ActivationDecision &d = out[a];
    d.value = act.value;
    d.decision = choice[a];
    d.firstBackwardUse = act.firstBackwardUse;
    if (d.decision == Decision::Offload)
      d.prefetchAfter = prefetchAfter[a];
    if (d.decision != Decision::Recompute || !error.empty())
      continue;
    // The nodes re-run to re-create this storage: its producer and views,
    // and transitively the producers of every re-created input they read.
    std::vector<bool> inChain(numNodes(), false);
    std::vector<NodeId> work;
    for (auto [producer, reader] : act.backwardReads)
      work.push_back(producer);
    work.push_back(act.producer);
    while (!work.empty()) {
      NodeId n = work.back();
      work.pop_back();
      if (n < 0 || inChain[n] || rerunBefore[n] < 0)
        continue;
      inChain[n] = true;
      for (ValueId x : graph.getNode(n).operands) {
        NodeId producer = graph.getValue(x).producer;
        if (producer >= 0 && rerunBefore[producer] >= 0)
          work.push_back(producer);
      }
    }
    for (NodeId n = 0; n < firstBwd; ++n)
      if (inChain[n])
        d.recomputeNodes.push_back(n);
  }
  return out;
}

ExactModel::Evaluation
ExactModel::evaluate(llvm::ArrayRef<ActivationDecision> decisions) const {
  Evaluation eval;
  if (decisions.size() != acts.size()) {
    eval.error = "expected " + std::to_string(acts.size()) +
                 " decisions, got " + std::to_string(decisions.size());
    return eval;
  }
  std::vector<Decision> choice;
  for (auto [a, d] : llvm::enumerate(decisions)) {
    const Activation &act = acts[a];
    choice.push_back(d.decision);
    std::string what = "activation value " + std::to_string(act.value);
    if (d.value != act.value) {
      eval.error = "decision " + std::to_string(a) + " is about value " +
                   std::to_string(d.value) + ", expected " + what;
      return eval;
    }
    if (d.decision == Decision::Recompute && !act.canRecompute) {
      eval.error = what + " cannot be recomputed";
      return eval;
    }
    if (d.decision == Decision::Offload && !act.canOffload) {
      eval.error = what + " cannot be offloaded";
      return eval;
    }
  }
  eval.error = computeReruns(*this, choice, eval.rerunBefore);
  if (!eval.error.empty())
    return eval;
  const std::vector<NodeId> &rerun = eval.rerunBefore;
  const int numN = static_cast<int>(numNodes());

  // D2H channel: first in, first out, in production order.
  std::vector<double> d2hDone(acts.size(), 0.0);
  double channel = 0.0;
  for (int a : d2hOrderList) {
    if (choice[a] != Decision::Offload)
      continue;
    const Activation &act = acts[a];
    double produced = nominalStart[act.producer] + nodeTime[act.producer];
    channel = std::max(channel, produced) + act.d2hUs;
    d2hDone[a] = channel;
  }

  // Each prefetch may copy in the backward windows from its issue (and
  // its D2H copy's end) to its first need on the device: its first
  // backward read, or a re-run consumer's segment.
  const int numPoints = static_cast<int>(pointList.size());
  const int firstWindow =
      firstBwd < numN ? segmentPointOf[firstBwd] : numPoints;
  std::vector<int> release(acts.size(), 0), deadline(acts.size(), 0);
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (choice[a] != Decision::Offload)
      continue;
    std::string what = "activation value " + std::to_string(act.value);
    deadline[a] = nodePointOf[act.firstBackwardUse];
    for (NodeId c : act.rerunConsumers)
      if (rerun[c] >= 0)
        deadline[a] = std::min(deadline[a], segmentPointOf[rerun[c]]);
    NodeId after = decisions[a].prefetchAfter;
    if (after < firstBwd - 1 || after >= act.firstBackwardUse) {
      eval.error = "the prefetch of " + what + " is issued after node " +
                   std::to_string(after) + ", not between the end of the "
                   "forward part and its first need";
      return eval;
    }
    int p = nodePointOf[after] + 1;
    while (p < deadline[a] && pointList[p].nominalStartUs < d2hDone[a])
      ++p;
    if (p >= deadline[a]) {
      eval.error = "the prefetch of " + what + " has no time to copy: its "
                   "issue or the end of its D2H copy comes after its first "
                   "need (retaining it would need no more memory)";
      return eval;
    }
    release[a] = p;
  }
  eval.valid = true;

  // Window capacities: each backward point's compute. The copy work that
  // the windows' compute cannot hide (a maximum flow, found greedily,
  // earliest deadline first) stretches them.
  std::vector<double> capacity(numPoints, 0.0);
  for (int p = firstWindow; p < numPoints; ++p)
    if (!pointList[p].segment)
      capacity[p] = nodeTime[pointList[p].node];
  for (NodeId n = 0; n < firstBwd; ++n)
    if (rerun[n] >= 0)
      capacity[segmentPointOf[rerun[n]]] += nodeTime[n];
  std::vector<double> remaining(acts.size(), 0.0);
  std::vector<int> jobs;
  for (auto [a, act] : llvm::enumerate(acts))
    if (choice[a] == Decision::Offload) {
      remaining[a] = act.h2dUs;
      jobs.push_back(static_cast<int>(a));
    }
  llvm::sort(jobs, [&](int x, int y) {
    return std::make_pair(deadline[x], x) < std::make_pair(deadline[y], y);
  });
  double step = forwardEnd;
  for (int p = firstWindow; p < numPoints; ++p) {
    double free = capacity[p];
    step += free;
    for (int a : jobs) {
      if (free <= 0)
        break;
      if (release[a] > p || deadline[a] <= p || remaining[a] <= 0)
        continue;
      double moved = std::min(free, remaining[a]);
      remaining[a] -= moved;
      free -= moved;
    }
  }
  for (int a : jobs)
    step += remaining[a];
  eval.stepUs = step;

  // Bytes at each point.
  std::vector<int64_t> delta(pointList.size() + 1, 0);
  auto addRange = [&](int from, int to, int64_t bytes) {
    if (from < 0 || to < from)
      return;
    delta[from] += bytes;
    delta[to + 1] -= bytes;
  };
  auto lastNeed = [&](NodeId lastUse, llvm::ArrayRef<NodeId> consumers) {
    int last = nodePointOf[lastUse];
    for (NodeId c : consumers)
      if (rerun[c] >= 0)
        last = std::max(last, segmentPointOf[rerun[c]]);
    return last;
  };
  for (auto [a, act] : llvm::enumerate(acts)) {
    int last = lastNeed(act.lastUse, act.rerunConsumers);
    int afterForward = nodePointOf[act.lastForwardUse] + 1;
    switch (choice[a]) {
    case Decision::Retain:
      addRange(afterForward, last, act.bytes);
      break;
    case Decision::Recompute:
      addRange(segmentPointOf[rerun[act.producer]], last, act.bytes);
      break;
    case Decision::Offload: {
      int p = afterForward;
      while (p < static_cast<int>(pointList.size()) &&
             pointList[p].nominalStartUs < d2hDone[a])
        ++p;
      addRange(afterForward, p - 1, act.bytes);
      addRange(nodePointOf[decisions[a].prefetchAfter] + 1, last, act.bytes);
      eval.hostBytes += act.bytes;
      break;
    }
    }
  }
  // Forward temporaries re-created by re-runs.
  for (NodeId n = 0; n < firstBwd; ++n) {
    if (rerun[n] < 0)
      continue;
    int created = segmentPointOf[rerun[n]];
    for (ValueId r : graph.getNode(n).results) {
      const GraphValue &value = graph.getValue(r);
      if (value.storage != r || value.bytes == 0 || actOfValue[r] >= 0)
        continue;
      int last = created;
      for (NodeId user : tempConsumers[r])
        if (rerun[user] >= 0)
          last = std::max(last, segmentPointOf[rerun[user]]);
      addRange(created, last, value.bytes);
    }
  }
  eval.bytesAt.resize(pointList.size());
  int64_t running = 0;
  for (size_t p = 0; p < pointList.size(); ++p) {
    running += delta[p];
    eval.bytesAt[p] = pointList[p].fixedBytes + running;
    if (eval.bytesAt[p] > eval.peakBytes || eval.peakPoint < 0) {
      eval.peakBytes = eval.bytesAt[p];
      eval.peakPoint = static_cast<int>(p);
    }
  }
  eval.fitsBudget = eval.peakBytes <= options.budgetBytes &&
                    eval.hostBytes <= options.hostBudgetBytes;
  return eval;
}

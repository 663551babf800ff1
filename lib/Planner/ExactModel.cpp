//===- ExactModel.cpp - The cost model of the exact `auto` solver ---------===//
//
// docs/ExactSolver.md states the model; this file computes it: the analysis
// shared with the MILP (restore points, program points and the bytes every
// plan keeps there) and the evaluation of one plan.
//
//===----------------------------------------------------------------------===//

#include "lethe/Planner/ExactModel.h"
#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>

using namespace lethe;

ExactModel::ExactModel(const TrainingGraph &graph, const DeviceProfile &device,
                       const PlanOptions &options)
    : graph(graph), options(options), analysis(graph, options) {
  analyse(device);
}

void ExactModel::analyse(const DeviceProfile &device) {
  const NodeId numNodes = static_cast<NodeId>(graph.numNodes());
  firstBwd = graph.firstBackwardNode();
  const NodeId f = firstBwd;

  // The compute stream's unplanned timeline (collectives run on the comm
  // stream).
  nodeTime.resize(numNodes);
  nominalStart.resize(numNodes);
  double clock = 0.0;
  for (NodeId i = 0; i < numNodes; ++i) {
    const GraphNode &node = graph.getNode(i);
    nominalStart[i] = clock;
    nodeTime[i] =
        node.hasFlag(NodeFlagCollective) ? 0.0 : std::max(0.0, node.timeUs);
    clock += nodeTime[i];
  }
  forwardEnd = f < numNodes ? nominalStart[f] : clock;

  // Activations, with copy times and chain dependencies.
  // Copy times as the placement (and the simulator) charge them.
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  llvm::ArrayRef<ActivationInfo> infos = analysis.getActivations();
  for (const ActivationInfo &info : infos) {
    Activation &act = acts.emplace_back();
    act.value = info.storage;
    act.bytes = info.bytes;
    act.producer = info.producer;
    act.lastForwardUse = info.lastForwardUse;
    act.firstBackwardUse = info.firstBackwardUse;
    act.lastUse = std::min(info.lastUse, numNodes - 1);
    // A checkpoint's own uses end in the forward; the chains that read it
    // are its backward uses. Its decision governs its bytes up to the node
    // before its restore deadline; from the chain segment there on, M2
    // keeps it for the chains still to run that read it.
    if (info.checkpoint)
      act.lastUse = std::max(info.lastForwardUse,
                             std::min(info.firstBackwardUse - 1, numNodes - 1));
    act.contentReadyAfter = info.contentReadyAfter;
    act.checkpoint = info.checkpoint;
    act.canRecompute = info.recomputable;
    act.canOffload = info.offloadable && copy.canCopy();
    if (act.canOffload) {
      act.d2hUs = copy.d2hUs(act.bytes);
      act.h2dUs = copy.h2dUs(act.bytes);
    }
    act.recomputeNodes = info.recomputeNodes;
    act.rederiveNodes = info.rederiveNodes;
    for (ValueId v : info.recomputeInputs)
      if (int x = analysis.activationIndex(v); x >= 0)
        act.recomputeInputs.push_back(x);
    for (ValueId v : info.rederiveInputs)
      if (int x = analysis.activationIndex(v); x >= 0)
        act.rederiveInputs.push_back(x);
  }
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (act.canRecompute)
      for (int x : act.recomputeInputs)
        acts[x].recomputeReaders.push_back(static_cast<int>(a));
    if (act.canOffload)
      for (int x : act.rederiveInputs)
        acts[x].rederiveReaders.push_back(static_cast<int>(a));
  }
  // Restore points: the first backward use, or earlier where a chain that
  // reads the activation may be restored. Readers are produced later, so
  // their points are known first.
  for (int a = static_cast<int>(acts.size()) - 1; a >= 0; --a) {
    Activation &act = acts[a];
    if (!act.canRecompute && !act.canOffload)
      continue;
    std::vector<NodeId> pts{act.firstBackwardUse};
    for (llvm::ArrayRef<int> readers :
         {llvm::ArrayRef<int>(act.recomputeReaders),
          llvm::ArrayRef<int>(act.rederiveReaders)})
      for (int r : readers)
        for (NodeId p : acts[r].restorePoints)
          if (p < act.firstBackwardUse && p > act.lastForwardUse)
            pts.push_back(p);
    llvm::sort(pts);
    pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
    act.restorePoints = std::move(pts);
  }

  // Program points and the bytes every plan keeps at each.
  std::vector<bool> chainPoint(numNodes, false);
  for (const Activation &act : acts)
    if (act.canRecompute)
      for (NodeId p : act.restorePoints)
        chainPoint[p] = true;
  nodePointOf.assign(numNodes, -1);
  segmentPointOf.assign(numNodes, -1);
  for (NodeId i = 0; i < numNodes; ++i) {
    if (i >= f) {
      segmentPointOf[i] = static_cast<int>(pointList.size());
      pointList.push_back({true, i, nominalStart[i], 0, chainPoint[i]});
    }
    nodePointOf[i] = static_cast<int>(pointList.size());
    pointList.push_back({false, i, nominalStart[i], 0, false});
  }
  // Difference arrays over nodes: live at node i, and live across the
  // boundary between node i-1 and node i.
  std::vector<int64_t> atNode(numNodes + 1, 0), across(numNodes + 1, 0);
  for (const StorageInfo &info : analysis.getStorages()) {
    NodeId end = info.activation >= 0 ? infos[info.activation].lastForwardUse
                 : info.isOutput      ? numNodes - 1
                                      : info.lastUse;
    atNode[info.producer] += info.bytes;
    atNode[end + 1] -= info.bytes;
    if (end > info.producer) {
      across[info.producer + 1] += info.bytes;
      across[end + 1] -= info.bytes;
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

  // D2H order, and completions with every candidate offloaded.
  for (int a = 0, e = static_cast<int>(acts.size()); a < e; ++a)
    if (acts[a].canOffload)
      d2hOrderList.push_back(a);
  llvm::sort(d2hOrderList, [&](int x, int y) {
    return std::make_pair(acts[x].contentReadyAfter, x) <
           std::make_pair(acts[y].contentReadyAfter, y);
  });
  d2hLatest.assign(acts.size(), 0.0);
  double channel = 0.0;
  for (int a : d2hOrderList) {
    NodeId ready = acts[a].contentReadyAfter;
    channel =
        std::max(channel, nominalStart[ready] + nodeTime[ready]) + acts[a].d2hUs;
    d2hLatest[a] = channel;
  }
}

std::vector<ActivationDecision> ExactModel::retainAll() const {
  std::vector<Decision> choice(acts.size(), Decision::Retain);
  std::vector<NodeId> after(acts.size(), -1);
  return makeDecisions(choice, after);
}

std::string ExactModel::restorePoints(llvm::ArrayRef<Decision> choice,
                                      std::vector<NodeId> &restore) const {
  // The planner's rule (Placement.cpp): restore before the first backward
  // use; walking points in order, a chain restored at a point pulls the
  // activations it reads that would be restored later to that point.
  restore.assign(acts.size(), -1);
  std::vector<std::vector<int>> at(numNodes());
  for (size_t a = 0; a < acts.size(); ++a)
    if (choice[a] != Decision::Retain) {
      restore[a] = acts[a].firstBackwardUse;
      at[restore[a]].push_back(static_cast<int>(a));
    }
  for (NodeId point = 0; point < static_cast<NodeId>(numNodes()); ++point) {
    std::vector<int> &targets = at[point];
    for (size_t t = 0; t < targets.size(); ++t) {
      int a = targets[t];
      if (restore[a] != point)
        continue;
      for (int x : choice[a] == Decision::Recompute ? acts[a].recomputeInputs
                                                    : acts[a].rederiveInputs) {
        if (choice[x] == Decision::Retain || restore[x] <= point)
          continue;
        if (point <= acts[x].lastForwardUse)
          return "activation value " + std::to_string(acts[x].value) +
                 " would be restored inside its forward life";
        restore[x] = point;
        targets.push_back(x);
      }
    }
  }
  return {};
}

std::vector<double>
ExactModel::d2hEnds(llvm::ArrayRef<Decision> choice) const {
  std::vector<double> end(acts.size(), 0.0);
  double channel = 0.0;
  for (int a : d2hOrderList) {
    if (choice[a] != Decision::Offload)
      continue;
    NodeId ready = acts[a].contentReadyAfter;
    channel =
        std::max(channel, nominalStart[ready] + nodeTime[ready]) + acts[a].d2hUs;
    end[a] = channel;
  }
  return end;
}

NodeId ExactModel::releaseNode(int act, double d2hEnd) const {
  for (size_t p = nodePointOf[acts[act].lastForwardUse] + 1;
       p < pointList.size(); ++p)
    if (pointList[p].nominalStartUs >= d2hEnd)
      return pointList[p].node - 1;
  return static_cast<NodeId>(numNodes());
}

std::vector<ActivationDecision>
ExactModel::makeDecisions(llvm::ArrayRef<Decision> requested,
                          llvm::ArrayRef<NodeId> prefetchAfter) const {
  // As the plan runs them (Placement.h): a checkpoint no chain reads stays.
  const std::vector<Decision> choice =
      effectiveDecisions(getAnalysis(), requested);
  std::vector<NodeId> restore;
  std::string error = restorePoints(choice, restore);
  std::vector<double> d2hEnd = d2hEnds(choice);
  std::vector<ActivationDecision> out(acts.size());
  for (auto [a, act] : llvm::enumerate(acts)) {
    ActivationDecision &d = out[a];
    d.value = act.value;
    d.decision = choice[a];
    if (d.decision == Decision::Retain || !error.empty())
      continue;
    d.firstBackwardUse = restore[a];
    if (d.decision == Decision::Recompute) {
      d.recomputeNodes = act.recomputeNodes;
      continue;
    }
    d.recomputeNodes = act.rederiveNodes;
    d.releaseAfter = releaseNode(static_cast<int>(a), d2hEnd[a]);
    d.prefetchAfter = prefetchAfter[a];
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
    std::string what = "activation " + describeValue(graph, act.value);
    if (d.value != act.value) {
      eval.error = "decision " + std::to_string(a) + " is about value %" +
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
  eval.error = restorePoints(choice, eval.restore);
  if (!eval.error.empty())
    return eval;
  const std::vector<NodeId> &restore = eval.restore;
  std::vector<double> d2hEnd = d2hEnds(choice);
  eval.releaseAfter.assign(acts.size(), -1);
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (choice[a] != Decision::Offload)
      continue;
    std::string what = "activation " + describeValue(graph, act.value);
    NodeId release = releaseNode(static_cast<int>(a), d2hEnd[a]);
    if (release >= restore[a]) {
      eval.error = "the D2H copy of " + what +
                   " ends after it is restored (retaining it needs no more "
                   "memory)";
      return eval;
    }
    eval.releaseAfter[a] = release;
    NodeId after = decisions[a].prefetchAfter;
    if (after < std::max(firstBwd - 1, release) || after >= restore[a]) {
      eval.error = "the prefetch of " + what + " is issued after " +
                   describeNode(graph, after) + ", outside [" +
                   describeNode(graph, std::max(firstBwd - 1, release), false) +
                   ", " + describeNode(graph, restore[a] - 1, false) + "]";
      return eval;
    }
  }
  eval.valid = true;

  // The chains run at each restore point: the union of their targets'
  // recompute (or view re-derive) nodes.
  const int numPoints = static_cast<int>(pointList.size());
  std::vector<std::vector<NodeId>> chainAt(numNodes());
  std::vector<bool> restoredHere(acts.size(), false);
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (choice[a] == Decision::Retain)
      continue;
    llvm::append_range(chainAt[restore[a]], choice[a] == Decision::Recompute
                                                ? act.recomputeNodes
                                                : act.rederiveNodes);
  }
  for (std::vector<NodeId> &chain : chainAt) {
    llvm::sort(chain);
    chain.erase(std::unique(chain.begin(), chain.end()), chain.end());
  }

  // Windows: each backward point lasts its compute; the prefetch copy work
  // the windows cannot hide (a maximum flow, found greedily, earliest
  // deadline first) stretches them.
  const int firstWindow =
      firstBwd < static_cast<NodeId>(numNodes()) ? segmentPointOf[firstBwd]
                                                 : numPoints;
  std::vector<double> capacity(numPoints, 0.0);
  for (int p = firstWindow; p < numPoints; ++p) {
    const Point &point = pointList[p];
    if (!point.segment)
      capacity[p] = nodeTime[point.node];
    else
      for (NodeId n : chainAt[point.node])
        capacity[p] += nodeTime[n];
  }
  struct Job {
    int release, deadline, act;
    double remaining;
  };
  std::vector<Job> jobs;
  for (auto [a, act] : llvm::enumerate(acts))
    if (choice[a] == Decision::Offload)
      jobs.push_back({nodePointOf[decisions[a].prefetchAfter] + 1,
                      segmentPointOf[restore[a]], static_cast<int>(a),
                      act.h2dUs});
  llvm::sort(jobs, [](const Job &x, const Job &y) {
    return std::make_pair(x.deadline, x.act) <
           std::make_pair(y.deadline, y.act);
  });
  double step = forwardEnd;
  for (int p = firstWindow; p < numPoints; ++p) {
    double free = capacity[p];
    step += free;
    for (Job &job : jobs) {
      if (free <= 0)
        break;
      if (job.release > p || job.deadline < p || job.remaining <= 0)
        continue;
      double moved = std::min(free, job.remaining);
      job.remaining -= moved;
      free -= moved;
    }
  }
  for (const Job &job : jobs)
    step += job.remaining;
  eval.stepUs = step;

  // Bytes at each point.
  std::vector<int64_t> delta(numPoints + 1, 0);
  auto addRange = [&](int from, int to, int64_t bytes) {
    if (from < 0 || to < from)
      return;
    delta[from] += bytes;
    delta[to + 1] -= bytes;
  };
  for (auto [a, act] : llvm::enumerate(acts)) {
    // Kept to its last use and to every chain restored later that reads it.
    int last = nodePointOf[act.lastUse];
    for (int r : act.recomputeReaders)
      if (choice[r] == Decision::Recompute)
        last = std::max(last, segmentPointOf[restore[r]]);
    for (int r : act.rederiveReaders)
      if (choice[r] == Decision::Offload)
        last = std::max(last, segmentPointOf[restore[r]]);
    int afterForward = nodePointOf[act.lastForwardUse] + 1;
    switch (choice[a]) {
    case Decision::Retain:
      addRange(afterForward, last, act.bytes);
      break;
    case Decision::Recompute:
      addRange(segmentPointOf[restore[a]], last, act.bytes);
      restoredHere[a] = true;
      break;
    case Decision::Offload:
      addRange(afterForward, nodePointOf[eval.releaseAfter[a]], act.bytes);
      addRange(nodePointOf[decisions[a].prefetchAfter] + 1, last, act.bytes);
      eval.hostBytes += act.bytes;
      break;
    }
  }
  // Everything else a chain creates lives in its segment only.
  for (NodeId point = firstBwd; point < static_cast<NodeId>(numNodes());
       ++point)
    for (NodeId n : chainAt[point])
      for (ValueId r : graph.getNode(n).results) {
        int32_t s = analysis.storageIndex(r);
        if (s < 0 || analysis.getStorages()[s].storage != r)
          continue;
        int x = analysis.getStorages()[s].activation;
        if (x >= 0 && restoredHere[x] && restore[x] == point)
          continue;
        addRange(segmentPointOf[point], segmentPointOf[point],
                 analysis.getStorages()[s].bytes);
      }
  eval.bytesAt.resize(numPoints);
  int64_t running = 0;
  for (int p = 0; p < numPoints; ++p) {
    running += delta[p];
    eval.bytesAt[p] = pointList[p].fixedBytes + running;
    if (eval.peakPoint < 0 || eval.bytesAt[p] > eval.peakBytes) {
      eval.peakBytes = eval.bytesAt[p];
      eval.peakPoint = p;
    }
  }
  eval.fitsBudget = eval.peakBytes <= options.budgetBytes &&
                    eval.hostBytes <= options.hostBudgetBytes;
  return eval;
}

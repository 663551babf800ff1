//===- Placement.cpp - From decisions to a placed plan --------------------===//

#include "lethe/Planner/Placement.h"
#include "lethe/Analysis/Lifetimes.h"

#include "lethe/Simulator/Simulator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <numeric>

using namespace lethe;

static llvm::Error placementError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

template <typename Node> static double nodeComputeUs(const Node &node) {
  // Collectives run on the comm stream and do not occupy the compute
  // stream.
  return node.hasFlag(NodeFlagCollective) ? 0.0 : std::max(0.0, node.timeUs);
}

std::vector<Decision>
lethe::effectiveDecisions(const ActivationAnalysis &analysis,
                          llvm::ArrayRef<Decision> decisions) {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  std::vector<Decision> result(decisions.begin(), decisions.end());
  // Only a restored checkpoint's decision can change: where there is none,
  // the walk below (which reads every restored activation's chain inputs,
  // on every evaluation) would change nothing.
  if (llvm::none_of(analysis.getCheckpoints(), [&](int32_t a) {
        return static_cast<size_t>(a) < decisions.size() &&
               decisions[a] != Decision::Retain;
      }))
    return result;
  // Checkpoints are restored only for the chains that read them: from the
  // activations restored anyway, follow the chains' inputs.
  std::vector<uint8_t> read(acts.size(), 0);
  std::vector<int32_t> worklist;
  for (size_t a = 0; a < acts.size() && a < decisions.size(); ++a)
    if (decisions[a] != Decision::Retain && !acts[a].checkpoint) {
      read[a] = 1;
      worklist.push_back(static_cast<int32_t>(a));
    }
  while (!worklist.empty()) {
    int32_t r = worklist.back();
    worklist.pop_back();
    for (ValueId input : decisions[r] == Decision::Recompute
                             ? acts[r].recomputeInputs
                             : acts[r].rederiveInputs) {
      int32_t x = analysis.activationIndex(input);
      if (x < 0 || read[x] || decisions[x] == Decision::Retain)
        continue;
      read[x] = 1;
      worklist.push_back(x);
    }
  }
  for (size_t a = 0; a < result.size() && a < acts.size(); ++a)
    if (acts[a].checkpoint && !read[a])
      result[a] = Decision::Retain;
  return result;
}

llvm::Expected<Placement>
lethe::placeDecisions(const ActivationAnalysis &analysis,
                      const DeviceProfile &device,
                      llvm::ArrayRef<Decision> requested,
                      llvm::ArrayRef<CopyHint> hints) {
  return placeDecisions(analysis, device, requested, hints, Placement());
}

llvm::Expected<Placement>
lethe::placeDecisions(const ActivationAnalysis &analysis,
                      const DeviceProfile &device,
                      llvm::ArrayRef<Decision> requested,
                      llvm::ArrayRef<CopyHint> hints, Placement &&storage) {
  const TrainingGraph &graph = analysis.getGraph();
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  const size_t numNodes = graph.numNodes();
  const size_t numActs = acts.size();
  if (requested.size() != numActs)
    return placementError(llvm::formatv(
        "expected one decision per activation ({0}), got {1}", numActs,
        requested.size()));
  if (!hints.empty() && hints.size() != numActs)
    return placementError(llvm::formatv(
        "expected one copy hint per activation ({0}), got {1}", numActs,
        hints.size()));
  const std::vector<Decision> decisions =
      effectiveDecisions(analysis, requested);
  bool anyOffload = false;
  for (auto [a, decision] : llvm::enumerate(requested)) {
    if (decision == Decision::Recompute && !acts[a].recomputable)
      return placementError(
          llvm::formatv("value {0} cannot be recomputed: {1}",
                        describeValue(analysis.getGraph(), acts[a].storage),
                        acts[a].notRecomputableReason));
    if (decision == Decision::Offload && !acts[a].offloadable)
      return placementError(
          llvm::formatv("value {0} cannot be offloaded: {1}",
                        describeValue(analysis.getGraph(), acts[a].storage),
                        acts[a].notOffloadableReason));
    anyOffload |= decisions[a] == Decision::Offload;
  }
  // Copies take what the simulator will charge them: the rank's share of
  // the host link and each copy's fixed cost.
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  if (anyOffload && !copy.canCopy())
    return placementError(llvm::formatv(
        "device profile '{0}' has no host copy bandwidth; cannot offload",
        device.name));

  // Restore points, moved earlier when a chain restored earlier reads them.
  // The activations restored at each point, as (point, activation) sorted,
  // and not one vector per node: most nodes restore nothing.
  std::vector<NodeId> restore(numActs, -1);
  std::vector<std::pair<NodeId, int32_t>> restoredAt;
  for (size_t a = 0; a < numActs; ++a) {
    if (decisions[a] == Decision::Retain)
      continue;
    restore[a] = acts[a].firstBackwardUse;
    restoredAt.push_back({restore[a], static_cast<int32_t>(a)});
  }
  llvm::sort(restoredAt);
  size_t restoredCursor = 0;
  // Every field is written below; the arrays keep their allocations.
  Placement result = std::move(storage);
  result.recomputeUs = 0.0;
  result.chainUs.assign(numNodes, 0.0);
  result.chainBegin.clear();
  result.chainNodes.clear();
  result.chainBegin.reserve(numNodes + 1);
  std::vector<uint8_t> inChain(numNodes, 0);
  std::vector<NodeId> chain;
  std::vector<int32_t> targets;
  // Only the points some activation is restored at can run a chain (a
  // chain's inputs move to its point): the points between them begin an
  // empty chain and are skipped.
  for (NodeId point = 0; point < static_cast<NodeId>(numNodes); ++point) {
    result.chainBegin.push_back(static_cast<int32_t>(result.chainNodes.size()));
    const NodeId next = restoredCursor < restoredAt.size()
                            ? restoredAt[restoredCursor].first
                            : static_cast<NodeId>(numNodes);
    if (next > point) {
      const NodeId end = std::min(next, static_cast<NodeId>(numNodes));
      result.chainBegin.resize(end, result.chainBegin.back());
      point = end - 1;
      continue;
    }
    targets.clear();
    for (; restoredCursor < restoredAt.size() &&
           restoredAt[restoredCursor].first == point;
         ++restoredCursor)
      targets.push_back(restoredAt[restoredCursor].second);
    for (size_t i = 0; i < targets.size(); ++i) {
      int32_t a = targets[i];
      if (restore[a] != point)
        continue;
      const ActivationInfo &act = acts[a];
      llvm::ArrayRef<ValueId> inputs = decisions[a] == Decision::Recompute
                                           ? act.recomputeInputs
                                           : act.rederiveInputs;
      for (ValueId input : inputs) {
        int32_t x = analysis.activationIndex(input);
        if (x < 0 || decisions[x] == Decision::Retain || restore[x] <= point)
          continue;
        if (point <= acts[x].lastForwardUse)
          return placementError(llvm::formatv(
              "value {0} is read by the chain restoring {1} before {2}, "
              "inside its own forward life",
              describeValue(analysis.getGraph(), acts[x].storage),
              describeValue(analysis.getGraph(), act.storage),
              describeNode(analysis.getGraph(), point)));
        restore[x] = point;
        targets.push_back(x);
      }
    }
    // The chain run before `point`: the union of its targets' nodes.
    chain.clear();
    for (int32_t a : targets) {
      if (restore[a] != point)
        continue;
      const ActivationInfo &act = acts[a];
      for (NodeId node : decisions[a] == Decision::Recompute
                             ? act.recomputeNodes
                             : act.rederiveNodes)
        if (!inChain[node]) {
          inChain[node] = 1;
          chain.push_back(node);
        }
    }
    for (NodeId node : chain) {
      inChain[node] = 0;
      result.chainUs[point] += nodeComputeUs(analysis.getNodeBrief(node));
    }
    // Where no chain runs, chainUs is +0.0, which adds nothing: the sum
    // of every point's was a chain of dependent adds a node long.
    if (!chain.empty()) {
      llvm::sort(chain);
      result.chainNodes.insert(result.chainNodes.end(), chain.begin(),
                               chain.end());
      result.recomputeUs += result.chainUs[point];
    }
  }
  result.chainBegin.push_back(static_cast<int32_t>(result.chainNodes.size()));

  // Compute-stream times.
  result.chainStartUs.resize(numNodes);
  result.nodeEndUs.resize(numNodes);
  double now = 0.0;
  for (size_t i = 0; i < numNodes; ++i) {
    result.chainStartUs[i] = now;
    now += result.chainUs[i] +
           nodeComputeUs(analysis.getNodeBrief(static_cast<NodeId>(i)));
    result.nodeEndUs[i] = now;
  }
  // Each decision made where its fields are written (a resize first was a
  // second pass over the 80-byte decisions), or a recycled one rewritten
  // whole (its chain keeping its allocation).
  if (result.decisions.size() != numActs)
    result.decisions.clear();
  const bool rewrite = !result.decisions.empty();
  result.decisions.reserve(numActs);
  result.d2hEndUs.assign(numActs, 0.0);
  result.h2dStartUs.assign(numActs, 0.0);
  std::vector<int32_t> offloaded;
  llvm::ArrayRef<ValueId> storageOf = analysis.getActivationStorages();
  for (size_t a = 0; a < numActs; ++a) {
    ActivationDecision &d =
        rewrite ? result.decisions[a] : result.decisions.emplace_back();
    if (rewrite) {
      d.releaseAfter = d.prefetchAfter = d.firstBackwardUse = -1;
      d.recomputeNodes.clear();
      d.reason.clear();
    }
    d.value = storageOf[a];
    d.decision = decisions[a];
    if (decisions[a] == Decision::Retain)
      continue;
    d.firstBackwardUse = restore[a];
    llvm::ArrayRef<NodeId> chain = decisions[a] == Decision::Recompute
                                       ? acts[a].recomputeNodes
                                       : acts[a].rederiveNodes;
    d.recomputeNodes.assign(chain.begin(), chain.end());
    if (decisions[a] == Decision::Offload)
      offloaded.push_back(static_cast<int32_t>(a));
  }

  std::vector<NodeId> releaseAfter(numActs, -1), prefetchAfter(numActs, -1);
  placeCopies(analysis, copy, result.nodeEndUs, result.chainStartUs, restore,
              hints, offloaded, releaseAfter, prefetchAfter, result.d2hEndUs,
              result.h2dStartUs);
  for (int32_t a : offloaded) {
    result.decisions[a].releaseAfter = releaseAfter[a];
    result.decisions[a].prefetchAfter = prefetchAfter[a];
  }
  return result;
}

NodeId lethe::firstNodeEndingAfter(llvm::ArrayRef<double> nodeEndUs, double t,
                                   NodeId lo, NodeId hi) {
  auto begin = nodeEndUs.begin();
  auto it = std::lower_bound(begin + lo, begin + hi + 1, t - 1e-9);
  return std::min(hi, static_cast<NodeId>(it - begin));
}

NodeId lethe::lastNodeEndingBy(llvm::ArrayRef<double> nodeEndUs, double t,
                               NodeId lo, NodeId hi) {
  auto begin = nodeEndUs.begin();
  auto it = std::upper_bound(begin + lo, begin + hi + 1, t + 1e-9);
  return std::max(lo, static_cast<NodeId>(it - begin) - 1);
}

void lethe::placeCopies(const ActivationAnalysis &analysis,
                        const PlannedCopyCosts &copy,
                        llvm::ArrayRef<double> nodeEndUs,
                        llvm::ArrayRef<double> chainStartUs,
                        llvm::ArrayRef<NodeId> restore,
                        llvm::ArrayRef<CopyHint> hints,
                        std::vector<int32_t> &offloaded,
                        llvm::MutableArrayRef<NodeId> releaseAfter,
                        llvm::MutableArrayRef<NodeId> prefetchAfter,
                        llvm::MutableArrayRef<double> d2hEndUs,
                        llvm::MutableArrayRef<double> h2dStartUs) {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  auto hintOf = [&](size_t a) { return hints.empty() ? CopyHint() : hints[a]; };

  // D2H: FIFO in order of issue; release once predicted done.
  llvm::sort(offloaded, [&](int32_t x, int32_t y) {
    return std::make_pair(acts[x].contentReadyAfter, acts[x].storage) <
           std::make_pair(acts[y].contentReadyAfter, acts[y].storage);
  });
  double d2hFree = 0.0;
  for (int32_t a : offloaded) {
    const ActivationInfo &act = acts[a];
    double start = std::max(nodeEndUs[act.contentReadyAfter], d2hFree);
    double end = start + copy.d2hUs(act.bytes);
    d2hFree = end;
    d2hEndUs[a] = end;
    NodeId release = firstNodeEndingAfter(nodeEndUs, end, act.lastForwardUse,
                                          restore[a] - 1);
    if (hintOf(a).releaseBy >= 0)
      release = std::max(act.lastForwardUse,
                         std::min(release, hintOf(a).releaseBy));
    if (hintOf(a).releaseNotBefore >= 0)
      release = std::min(restore[a] - 1,
                         std::max(release, hintOf(a).releaseNotBefore));
    releaseAfter[a] = release;
  }

  // H2D: as late as possible, walking deadlines backwards.
  llvm::sort(offloaded, [&](int32_t x, int32_t y) {
    return std::make_pair(restore[x], acts[x].storage) >
           std::make_pair(restore[y], acts[y].storage);
  });
  double nextStart = std::numeric_limits<double>::infinity();
  for (int32_t a : offloaded) {
    const ActivationInfo &act = acts[a];
    double deadline = chainStartUs[restore[a]];
    double end = std::min(deadline, nextStart);
    double start = end - copy.h2dUs(act.bytes);
    NodeId issue =
        lastNodeEndingBy(nodeEndUs, start, releaseAfter[a], restore[a] - 1);
    const CopyHint hint = hintOf(a);
    // Issued earlier than it must be, the copy starts once issued (the
    // copies before it are placed to end by then).
    if (hint.prefetchBy >= 0 && hint.prefetchBy < issue) {
      issue = std::max(releaseAfter[a], hint.prefetchBy);
      start = std::max(nodeEndUs[issue], d2hEndUs[a]);
    }
    if (hint.prefetchNotBefore >= 0)
      issue = std::min(restore[a] - 1, std::max(issue, hint.prefetchNotBefore));
    prefetchAfter[a] = issue;
    h2dStartUs[a] = std::max(start, nodeEndUs[issue]);
    nextStart = h2dStartUs[a];
  }
}

llvm::Error lethe::completePlacement(const ActivationAnalysis &analysis,
                                     const DeviceProfile &device, Plan &plan) {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  std::vector<Decision> decisions(acts.size(), Decision::Retain);
  std::vector<const ActivationDecision *> given(acts.size(), nullptr);
  for (const ActivationDecision &d : plan.decisions) {
    int32_t a = d.value >= 0 && static_cast<size_t>(d.value) <
                                    analysis.getGraph().numValues()
                    ? analysis.activationIndex(d.value)
                    : -1;
    if (a < 0 || acts[a].storage != d.value)
      return placementError(llvm::formatv(
          "plan has a decision for value %{0}, which is not an activation",
          d.value));
    decisions[a] = d.decision;
    given[a] = &d;
  }
  llvm::Expected<Placement> placed =
      placeDecisions(analysis, device, decisions);
  if (!placed)
    return placed.takeError();
  for (size_t a = 0; a < acts.size(); ++a) {
    ActivationDecision &d = placed->decisions[a];
    if (!given[a])
      continue;
    d.reason = given[a]->reason;
    if (d.decision != given[a]->decision)
      d.reason = "retained: a checkpoint no chain of this plan reads (freed "
                 "after its last forward use)";
    if (d.decision == Decision::Offload) {
      if (given[a]->releaseAfter >= 0)
        d.releaseAfter = given[a]->releaseAfter;
      if (given[a]->prefetchAfter >= 0)
        d.prefetchAfter = given[a]->prefetchAfter;
    }
  }
  plan.decisions = std::move(placed->decisions);
  return llvm::Error::success();
}

//===- Activations.cpp - What the planner may decide, and how -------------===//

#include "lethe/Planner/Activations.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace lethe;

static std::string formatSize(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20) && bytes % (int64_t(1) << 20) == 0)
    return llvm::formatv("{0} MiB", bytes >> 20).str();
  if (bytes >= 1024 && bytes % 1024 == 0)
    return llvm::formatv("{0} KiB", bytes >> 10).str();
  return llvm::formatv("{0} B", bytes).str();
}

ActivationAnalysis::ActivationAnalysis(const TrainingGraph &graph,
                                       const PlanOptions &options)
    : graph(graph), layers(findLayers(graph)), replayRng(options.replayRng) {
  const size_t numValues = graph.numValues();
  storageIndexOf.assign(numValues, -1);
  aliasesOf.resize(numValues);

  // Storages the step allocates: node results that own bytes.
  for (ValueId v = 0; v < static_cast<ValueId>(numValues); ++v) {
    const GraphValue &value = graph.getValue(v);
    if (value.isInput() || value.storage != v || value.bytes <= 0)
      continue;
    storageIndexOf[v] = static_cast<int32_t>(storages.size());
    StorageInfo &info = storages.emplace_back();
    info.storage = v;
    info.bytes = value.bytes;
    info.producer = value.producer;
  }
  storageIndexOfValue.resize(numValues);
  for (ValueId v = 0; v < static_cast<ValueId>(numValues); ++v)
    storageIndexOfValue[v] = storageIndexOf[graph.getValue(v).storage];
  operandBegin.reserve(graph.numNodes() + 1);
  resultBegin.reserve(graph.numNodes() + 1);
  briefs.reserve(graph.numNodes());
  for (const GraphNode &node : graph.getNodes()) {
    briefs.push_back({node.timeUs, node.flags});
    anyP2PGroup |= node.p2pGroup >= 0;
    operandBegin.push_back(static_cast<int32_t>(operandStorageList.size()));
    resultBegin.push_back(static_cast<int32_t>(resultStorageList.size()));
    for (ValueId operand : node.operands)
      if (storageIndexOfValue[operand] >= 0)
        operandStorageList.push_back(storageIndexOfValue[operand]);
    for (ValueId result : node.results)
      if (storageIndexOf[result] >= 0)
        resultStorageList.push_back(storageIndexOf[result]);
  }
  operandBegin.push_back(static_cast<int32_t>(operandStorageList.size()));
  resultBegin.push_back(static_cast<int32_t>(resultStorageList.size()));
  // Uses and outputs through every alias.
  for (ValueId v = 0; v < static_cast<ValueId>(numValues); ++v) {
    const GraphValue &value = graph.getValue(v);
    int32_t s = storageIndexOf[value.storage];
    if (s < 0)
      continue;
    StorageInfo &info = storages[s];
    llvm::append_range(info.uses, value.users);
    info.isOutput |= value.isOutput;
    if (v != value.storage)
      aliasesOf[value.storage].push_back(v);
  }
  std::vector<uint8_t> mutatedInForward(storages.size(), 0);
  std::vector<NodeId> lastInPlaceWrite(storages.size(), -1);
  for (auto [s, info] : llvm::enumerate(storages)) {
    llvm::sort(info.uses);
    info.uses.erase(std::unique(info.uses.begin(), info.uses.end()),
                    info.uses.end());
    info.lastUse = info.uses.empty() ? info.producer
                                     : std::max(info.producer, info.uses.back());
    for (NodeId use : info.uses) {
      const GraphNode &node = graph.getNode(use);
      if (node.phase == Phase::Fwd && node.hasFlag(NodeFlagMutates)) {
        mutatedInForward[s] = 1;
        lastInPlaceWrite[s] = std::max(lastInPlaceWrite[s], use);
      }
    }
  }

  // Activations: produced by a forward node, read after the gap.
  for (auto [s, info] : llvm::enumerate(storages)) {
    if (graph.getNode(info.producer).phase != Phase::Fwd)
      continue;
    auto firstLater = llvm::find_if(info.uses, [&](NodeId use) {
      return graph.getNode(use).phase != Phase::Fwd;
    });
    if (firstLater == info.uses.end())
      continue;
    ActivationInfo &act = addActivation(info);
    act.firstBackwardUse = *firstLater;
    act.lastForwardUse = info.producer;
    for (NodeId use : info.uses)
      if (use < act.firstBackwardUse)
        act.lastForwardUse = std::max(act.lastForwardUse, use);
    act.lastUse = info.isOutput ? static_cast<NodeId>(graph.numNodes())
                                : info.lastUse;
    act.contentReadyAfter = std::max(info.producer, lastInPlaceWrite[s]);
  }

  addCheckpoints(mutatedInForward);
  chainMarks.assign(graph.numNodes(), 0);
  for (ActivationInfo &act : activations)
    computeChains(act, options, mutatedInForward);
  chainMarks = std::vector<uint8_t>();
  keepReadCheckpoints();
  activationStorages.reserve(activations.size());
  for (auto [a, act] : llvm::enumerate(activations)) {
    activationStorages.push_back(act.storage);
    if (act.checkpoint)
      checkpoints.push_back(static_cast<int32_t>(a));
  }
  activationOfValue.resize(numValues);
  for (ValueId v = 0; v < static_cast<ValueId>(numValues); ++v) {
    int32_t s = storageIndexOfValue[v];
    activationOfValue[v] = s < 0 ? -1 : storages[s].activation;
  }
  storageBriefs.reserve(storages.size());
  for (const StorageInfo &info : storages)
    storageBriefs.push_back(
        {info.bytes, info.storage, info.activation, info.isOutput});
}

ActivationInfo &ActivationAnalysis::addActivation(StorageInfo &info) {
  info.activation = static_cast<int32_t>(activations.size());
  ActivationInfo &act = activations.emplace_back();
  act.storage = info.storage;
  act.bytes = info.bytes;
  act.producer = info.producer;
  return act;
}

void ActivationAnalysis::addCheckpoints(
    const std::vector<uint8_t> &mutatedInForward) {
  const NodeId numNodes = static_cast<NodeId>(graph.numNodes());
  for (auto [s, info] : llvm::enumerate(storages)) {
    if (info.activation >= 0 || info.isOutput || mutatedInForward[s] ||
        graph.getNode(info.producer).phase != Phase::Fwd)
      continue;
    int32_t own = layers.layerOf[info.producer];
    int32_t enters = -1;
    for (NodeId use : info.uses)
      if (graph.getNode(use).phase == Phase::Fwd && layers.layerOf[use] >= 0 &&
          layers.layerOf[use] != own) {
        enters = layers.layerOf[use];
        break;
      }
    if (enters < 0)
      continue;
    ActivationInfo &act = addActivation(info);
    act.lastForwardUse = act.lastUse = info.lastUse;
    // A placeholder until the chains that read it are known: no alias is
    // read after it, so it has nothing to re-derive.
    act.firstBackwardUse = numNodes;
    act.contentReadyAfter = info.producer;
    act.checkpoint = true;
    act.inputOfLayer = enters;
  }
}

void ActivationAnalysis::computeChains(
    ActivationInfo &act, const PlanOptions &options,
    const std::vector<uint8_t> &mutatedInForward) {
  const StorageInfo &info = storages[storageIndexOf[act.storage]];
  if (info.isOutput) {
    act.notRecomputableReason = "returned by the step";
    act.notOffloadableReason = "returned by the step";
    return;
  }
  if (mutatedInForward[storageIndexOf[act.storage]])
    act.notRecomputableReason = "written in place during the forward";
  else
    computeRecompute(act);
  offloadThresholdApplied |= act.bytes < options.minOffloadBytes;
  if (act.bytes < options.minOffloadBytes)
    act.notOffloadableReason =
        "smaller than the offload threshold (" +
        formatSize(options.minOffloadBytes) + ")";
  else
    computeRederive(act);
}

void ActivationAnalysis::keepReadCheckpoints() {
  // Readers of each checkpoint; drop those no chain reads (which may leave
  // checkpoints that only a dropped one's chain read unread in turn).
  const size_t numActs = activations.size();
  auto chainInputs = [&](const ActivationInfo &act) {
    std::vector<int32_t> result;
    auto add = [&](llvm::ArrayRef<ValueId> inputs) {
      for (ValueId v : inputs) {
        // Read from the storages: activationIndex's array is made last.
        int32_t s = storageIndex(v);
        int32_t x = s < 0 ? -1 : storages[s].activation;
        if (x >= 0 && activations[x].checkpoint &&
            !llvm::is_contained(result, x))
          result.push_back(x);
      }
    };
    if (act.recomputable)
      add(act.recomputeInputs);
    if (act.offloadable)
      add(act.rederiveInputs);
    return result;
  };
  std::vector<std::vector<int32_t>> inputsOf(numActs);
  std::vector<int32_t> numReaders(numActs, 0);
  for (size_t a = 0; a < numActs; ++a) {
    inputsOf[a] = chainInputs(activations[a]);
    for (int32_t x : inputsOf[a])
      ++numReaders[x];
  }
  std::vector<uint8_t> dropped(numActs, 0);
  std::vector<int32_t> worklist;
  for (size_t a = 0; a < numActs; ++a)
    if (activations[a].checkpoint && numReaders[a] == 0)
      worklist.push_back(static_cast<int32_t>(a));
  while (!worklist.empty()) {
    int32_t c = worklist.back();
    worklist.pop_back();
    dropped[c] = 1;
    for (int32_t x : inputsOf[c])
      if (--numReaders[x] == 0)
        worklist.push_back(x);
  }
  // Restore window of the kept ones: readers are produced later, so walk
  // backwards in program order.
  std::vector<int32_t> order;
  for (size_t a = 0; a < numActs; ++a)
    if (!dropped[a])
      order.push_back(static_cast<int32_t>(a));
  llvm::sort(order, [&](int32_t x, int32_t y) {
    return activations[x].producer > activations[y].producer;
  });
  for (int32_t r : order) {
    const ActivationInfo &reader = activations[r];
    // Restored by the earliest point a reader may need it. Its last use
    // stays its last forward use: the chains that read it keep it longer
    // only when they run (as for any activation a chain reads).
    for (int32_t x : inputsOf[r]) {
      ActivationInfo &c = activations[x];
      c.firstBackwardUse =
          c.chainReaders.empty()
              ? reader.firstBackwardUse
              : std::min(c.firstBackwardUse, reader.firstBackwardUse);
      c.chainReaders.push_back(reader.storage);
    }
  }
  std::vector<ActivationInfo> kept;
  kept.reserve(numActs);
  for (size_t a = 0; a < numActs; ++a) {
    ActivationInfo &act = activations[a];
    if (dropped[a]) {
      storages[storageIndexOf[act.storage]].activation = -1;
      continue;
    }
    if (act.checkpoint) {
      llvm::sort(act.chainReaders);
      // A chain that may run inside its forward life cannot restore it:
      // it can only be kept.
      if (act.firstBackwardUse <= act.lastForwardUse) {
        act.recomputable = act.offloadable = false;
        act.notRecomputableReason = act.notOffloadableReason =
            "a chain that reads it may run before its last forward use";
      }
    }
    kept.push_back(std::move(act));
  }
  llvm::sort(kept, [](const ActivationInfo &x, const ActivationInfo &y) {
    return x.storage < y.storage;
  });
  activations = std::move(kept);
  for (auto [a, act] : llvm::enumerate(activations))
    storages[storageIndexOf[act.storage]].activation = static_cast<int32_t>(a);
}

bool ActivationAnalysis::isRecomputableNode(NodeId node) const {
  const NodeBrief &n = briefs[node];
  if (n.hasFlag(NodeFlagCollective) || n.hasFlag(NodeFlagMutates))
    return false;
  return replayRng || !n.hasFlag(NodeFlagRandom);
}

static std::string whyNotRecomputable(const TrainingGraph &graph, NodeId id) {
  const GraphNode &node = graph.getNode(id);
  std::string what = node.hasFlag(NodeFlagCollective) ? "a collective"
                     : node.hasFlag(NodeFlagMutates)  ? "a mutating op"
                                                      : "an RNG op";
  return llvm::formatv("its chain needs {0} ({1})", what,
                       describeNode(graph, id))
      .str();
}

bool ActivationAnalysis::needValue(ValueId value, ValueId target,
                                   bool targetAvailable,
                                   std::vector<uint8_t> &inChain,
                                   std::vector<NodeId> &nodes,
                                   std::vector<ValueId> &inputs,
                                   std::string &reason) const {
  std::vector<ValueId> worklist = {value};
  while (!worklist.empty()) {
    ValueId w = worklist.back();
    worklist.pop_back();
    const GraphValue &gv = graph.getValue(w);
    if (gv.isInput())
      continue;
    ValueId storage = gv.storage;
    int32_t s = storageIndexOf[storage];
    // Views of resident graph inputs (or of zero-byte values) stay valid.
    if (s < 0)
      continue;
    const StorageInfo &info = storages[s];
    bool isTarget = storage == target;
    bool isOtherActivation = !isTarget && info.activation >= 0;
    if (w == storage) {
      if ((isTarget && targetAvailable) || isOtherActivation) {
        if (isOtherActivation)
          inputs.push_back(storage);
        continue;
      }
    } else {
      // An alias made by an in-place op is the (restored) storage itself.
      const GraphNode &producer = graph.getNode(gv.producer);
      if (producer.hasFlag(NodeFlagMutates) &&
          ((isTarget && targetAvailable) || isOtherActivation)) {
        if (isOtherActivation)
          inputs.push_back(storage);
        continue;
      }
    }
    // Re-run the producer of `w` (the storage's producer or a view node).
    NodeId node = gv.producer;
    if (inChain[node])
      continue;
    if (!isRecomputableNode(node)) {
      reason = whyNotRecomputable(graph, node);
      return false;
    }
    inChain[node] = 1;
    nodes.push_back(node);
    for (ValueId operand : graph.getNode(node).operands)
      worklist.push_back(operand);
  }
  return true;
}

/// Aliases of `storage` that nodes after the gap read.
static std::vector<ValueId>
backwardReadAliases(const TrainingGraph &graph,
                    llvm::ArrayRef<ValueId> aliases,
                    NodeId firstBackwardUse) {
  std::vector<ValueId> result;
  for (ValueId alias : aliases) {
    const GraphValue &value = graph.getValue(alias);
    if (value.producer >= firstBackwardUse)
      continue;
    if (llvm::any_of(value.users,
                     [&](NodeId use) { return use >= firstBackwardUse; }))
      result.push_back(alias);
  }
  return result;
}

void ActivationAnalysis::computeRecompute(ActivationInfo &act) {
  // The nodes marked are exactly `nodes`, unmarked once the chain is
  // found: the marks serve the next activation without a pass over every
  // node (one per activation made the analysis quadratic in the step).
  std::vector<uint8_t> &inChain = chainMarks;
  std::vector<NodeId> nodes;
  std::vector<ValueId> inputs;
  std::string reason;
  bool ok = needValue(act.storage, act.storage, /*targetAvailable=*/false,
                      inChain, nodes, inputs, reason);
  for (ValueId alias : backwardReadAliases(graph, aliasesOf[act.storage],
                                           act.firstBackwardUse)) {
    if (!ok)
      break;
    ok = needValue(alias, act.storage, false, inChain, nodes, inputs, reason);
  }
  // A chain must not read a storage written in place during the forward:
  // it would see the later contents.
  if (ok) {
    for (NodeId node : nodes) {
      for (ValueId operand : graph.getNode(node).operands) {
        int32_t s = storageIndex(operand);
        if (s < 0)
          continue;
        for (NodeId use : storages[s].uses) {
          const GraphNode &user = graph.getNode(use);
          if (user.phase == Phase::Fwd && user.hasFlag(NodeFlagMutates) &&
              !inChain[use]) {
            ok = false;
            reason = llvm::formatv("its chain reads a storage written in "
                                   "place ({0})",
                                   describeNode(graph, use))
                         .str();
            break;
          }
        }
        if (!ok)
          break;
      }
      if (!ok)
        break;
    }
  }
  for (NodeId node : nodes)
    inChain[node] = 0;
  if (!ok) {
    act.notRecomputableReason = reason;
    return;
  }
  llvm::sort(nodes);
  llvm::sort(inputs);
  inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
  act.recomputable = true;
  act.recomputeNodes = std::move(nodes);
  act.recomputeInputs = std::move(inputs);
  act.recomputeUs = 0.0;
  for (NodeId node : act.recomputeNodes)
    act.recomputeUs += graph.getNode(node).timeUs;
}

void ActivationAnalysis::computeRederive(ActivationInfo &act) {
  // Marked and unmarked as in computeRecompute.
  std::vector<uint8_t> &inChain = chainMarks;
  std::vector<NodeId> nodes;
  std::vector<ValueId> inputs;
  std::string reason;
  for (ValueId alias : backwardReadAliases(graph, aliasesOf[act.storage],
                                           act.firstBackwardUse)) {
    if (!needValue(alias, act.storage, /*targetAvailable=*/true, inChain,
                   nodes, inputs, reason)) {
      for (NodeId node : nodes)
        inChain[node] = 0;
      act.notOffloadableReason =
          "its backward-read views cannot be re-created: " + reason;
      return;
    }
  }
  for (NodeId node : nodes)
    inChain[node] = 0;
  llvm::sort(nodes);
  llvm::sort(inputs);
  inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
  act.offloadable = true;
  act.rederiveNodes = std::move(nodes);
  act.rederiveInputs = std::move(inputs);
}

double ActivationAnalysis::trafficBytes(NodeId node) const {
  double moved = 0.0;
  llvm::ArrayRef<int32_t> operands = operandStorages(node);
  for (auto [k, st] : llvm::enumerate(operands))
    if (!llvm::is_contained(operands.take_front(k), st))
      moved += static_cast<double>(storages[st].bytes);
  for (int32_t st : resultStorages(node))
    moved += static_cast<double>(storages[st].bytes);
  return moved;
}

//===- Activations.h - What the planner may decide, and how -----*- C++ -*-===//
//
// Static facts about a training graph that every policy and solver uses:
// the lifetime of every storage the step allocates, which storages are
// activations (produced in the forward part, read by a later part), where
// the gap between their forward and backward uses lies, whether they may be
// recomputed or offloaded and, for recompute, the producer chain to re-run.
//
// Rules (docs/Planner.md):
// - Uses count through every alias of a storage (views, in-place results).
// - The *gap* of an activation lies between its last forward use and its
//   first backward use: its first use by a non-forward node, and every use
//   after that, is a backward use.
// - Recompute re-creates the storage by re-running its producer, the view
//   nodes of its aliases that backward nodes read, and, for every operand
//   that is not itself available, the producers of that operand in turn. A
//   graph input and any activation are available (an activation is
//   retained, prefetched or recomputed before the chain needs it), so the
//   chain is a fixed set of forward nodes. It cannot contain an RNG node
//   (unless RNG state is replayed), a collective or a mutating node, and a
//   storage written in place during the forward cannot be recomputed.
// - Offload copies the storage to host after its producer or its last
//   in-place write, whichever is later; after the prefetch, the view nodes
//   of its backward-read aliases are re-run (aliases made by in-place ops
//   are the storage itself). Storages below the size threshold and storages
//   the step returns are never offloaded.
// - A *checkpoint* is a forward storage the backward does not read that a
//   layer (lethe/Planner/Layers.h) reads as its input: keeping it cuts the
//   recompute chains that would otherwise run back through earlier layers
//   (torch.utils.checkpoint keeps exactly these). It is decided like an
//   activation: its "backward uses" are the recompute and re-derive chains
//   that read it, so it is restored (or kept) until the last of them runs.
//   A candidate that no chain reads is not one.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_ACTIVATIONS_H
#define LETHE_PLANNER_ACTIVATIONS_H

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Planner/Layers.h"
#include "lethe/Planner/Plan.h"

#include <string>
#include <vector>

namespace lethe {

/// A storage the step allocates (owned by a node result).
struct StorageInfo {
  ValueId storage = -1;
  int64_t bytes = 0;
  NodeId producer = -1;
  /// Every node reading the storage through any alias, in program order.
  std::vector<NodeId> uses;
  /// Last node reading it (the producer when nothing reads it).
  NodeId lastUse = -1;
  /// Returned by the step (through any alias): lives to the end.
  bool isOutput = false;
  /// Index into ActivationAnalysis::getActivations(), or -1.
  int32_t activation = -1;
};

struct ActivationInfo {
  ValueId storage = -1;
  int64_t bytes = 0;
  NodeId producer = -1;
  /// Last use before the gap (the producer when only later parts read it).
  NodeId lastForwardUse = -1;
  /// First use after the gap; every use from here on is a backward use.
  NodeId firstBackwardUse = -1;
  NodeId lastUse = -1;
  /// The storage holds its final forward contents after this node (its
  /// producer or its last in-place write): the D2H copy starts after it.
  NodeId contentReadyAfter = -1;

  bool recomputable = false;
  bool offloadable = false;
  /// Why not, for remarks ("produced by an RNG op", "below 1 MiB").
  std::string notRecomputableReason;
  std::string notOffloadableReason;

  /// Forward nodes re-run to recompute the storage and its backward-read
  /// aliases, in program order.
  std::vector<NodeId> recomputeNodes;
  /// Activations the recompute chain reads (must be present when it runs),
  /// sorted by storage id.
  std::vector<ValueId> recomputeInputs;
  /// Sum of the chain's node times.
  double recomputeUs = 0.0;
  /// A checkpoint (not read by the backward itself): firstBackwardUse is the
  /// earliest first backward use of `chainReaders`; lastUse is its last
  /// forward use (chains that read it keep it longer when they run).
  bool checkpoint = false;
  /// Checkpoints only: the activations whose recompute or re-derive chain
  /// reads this storage (and would run through it were it not kept), by
  /// storage id.
  std::vector<ValueId> chainReaders;
  /// Checkpoints only: the layer it is the input of.
  int32_t inputOfLayer = -1;
  /// View nodes re-run on the prefetched storage to re-create its
  /// backward-read aliases, in program order.
  std::vector<NodeId> rederiveNodes;
  /// Activations those view nodes read besides the storage itself.
  std::vector<ValueId> rederiveInputs;
};

class ActivationAnalysis {
public:
  ActivationAnalysis(const TrainingGraph &graph, const PlanOptions &options);

  const TrainingGraph &getGraph() const { return graph; }
  /// The graph's repeated layers (findLayers), found once here for every
  /// policy and for the checkpoint candidates.
  const LayerInfo &getLayers() const { return layers; }
  /// Activations ordered by storage id.
  llvm::ArrayRef<ActivationInfo> getActivations() const { return activations; }
  /// Indices (getActivations()) of the checkpoints, ascending.
  llvm::ArrayRef<int32_t> getCheckpoints() const { return checkpoints; }
  /// Each activation's storage (ActivationInfo::storage), as a flat array
  /// for the loops over every activation (placement names each decision's).
  llvm::ArrayRef<ValueId> getActivationStorages() const {
    return activationStorages;
  }
  /// Storages the step allocates, ordered by storage id.
  llvm::ArrayRef<StorageInfo> getStorages() const { return storages; }
  /// Index of the storage of `value` in getStorages(), or -1 for graph
  /// inputs and values that own no bytes.
  int32_t storageIndex(ValueId value) const {
    return storageIndexOfValue[value];
  }
  /// The activation index of the storage of `value`, or -1 (a flat array
  /// by value: placement asks it for every chain input of every restored
  /// activation, and the StorageInfo it was read from was a cache miss
  /// each).
  int32_t activationIndex(ValueId value) const {
    return activationOfValue[value];
  }
  /// Whether `node` may be re-run (not RNG unless replayed, not a
  /// collective, not mutating).
  bool isRecomputableNode(NodeId node) const;

  /// Storage indices (getStorages()) of the operands of `node` that have a
  /// storage, and of the results of `node` that own one: flat copies of the
  /// graph's lists for the hot loops of placement and schedule building.
  llvm::ArrayRef<int32_t> operandStorages(NodeId node) const {
    return llvm::ArrayRef<int32_t>(operandStorageList)
        .slice(operandBegin[node], operandBegin[node + 1] - operandBegin[node]);
  }
  llvm::ArrayRef<int32_t> resultStorages(NodeId node) const {
    return llvm::ArrayRef<int32_t>(resultStorageList)
        .slice(resultBegin[node], resultBegin[node + 1] - resultBegin[node]);
  }
  /// The bytes `node`'s op reads (each storage once) and allocates in every
  /// schedule, whichever copy of a storage is current: its memory traffic,
  /// which decides how much host copies slow it (lethe::memoryShare).
  double trafficBytes(NodeId node) const;
  /// A node's time and flags (GraphNode's), 16 bytes a node: what schedule
  /// building reads of every node, without touching the whole GraphNode.
  struct NodeBrief {
    double timeUs = 0.0;
    uint32_t flags = NodeFlagNone;
    bool hasFlag(NodeFlags flag) const { return (flags & flag) != 0; }
  };
  const NodeBrief &getNodeBrief(NodeId node) const { return briefs[node]; }
  /// A storage's value, bytes, activation and whether the step returns it
  /// (StorageInfo's), 24 bytes a storage: what schedule building reads of
  /// every result it allocates, without StorageInfo's 64-byte entry (a
  /// cache miss per result on a 10k-op step: a tenth of building).
  struct StorageBrief {
    int64_t bytes = 0;
    ValueId storage = -1;
    int32_t activation = -1;
    bool isOutput = false;
  };
  const StorageBrief &getStorageBrief(int32_t s) const {
    return storageBriefs[s];
  }
  /// Whether some node is in a point-to-point group (GraphNode::p2pGroup).
  bool hasP2PGroups() const { return anyP2PGroup; }
  /// Whether PlanOptions::minOffloadBytes left some activation unoffloadable
  /// (the only option besides replayRng the analysis reads): where not, it
  /// is the analysis under a minOffloadBytes of 0 too.
  bool isOffloadThresholdApplied() const { return offloadThresholdApplied; }

private:
  /// A new activation of `info`'s storage (which records its index).
  ActivationInfo &addActivation(StorageInfo &info);
  /// Adds the checkpoint candidates to the activations and keeps those some
  /// chain reads.
  void addCheckpoints(const std::vector<uint8_t> &mutatedInForward);
  void keepReadCheckpoints();
  void computeChains(ActivationInfo &act, const PlanOptions &options,
                     const std::vector<uint8_t> &mutatedInForward);
  void computeRecompute(ActivationInfo &info);
  void computeRederive(ActivationInfo &info);
  /// Adds the nodes needed to re-create `value` to `nodes` (marking them in
  /// `inChain`); `target` is the storage being restored. Returns false with
  /// `reason` when a node may not be re-run.
  bool needValue(ValueId value, ValueId target, bool targetAvailable,
                 std::vector<uint8_t> &inChain, std::vector<NodeId> &nodes,
                 std::vector<ValueId> &inputs, std::string &reason) const;

  const TrainingGraph &graph;
  LayerInfo layers;
  bool replayRng;
  std::vector<StorageInfo> storages;
  std::vector<int32_t> storageIndexOf;
  /// storageIndexOf of each value's storage, by value: the hot lookup.
  std::vector<int32_t> storageIndexOfValue;
  std::vector<int32_t> operandBegin, operandStorageList;
  std::vector<int32_t> resultBegin, resultStorageList;
  std::vector<NodeBrief> briefs;
  /// Made last, once the activations are final.
  std::vector<StorageBrief> storageBriefs;
  std::vector<int32_t> checkpoints;
  std::vector<int32_t> activationOfValue;
  std::vector<ValueId> activationStorages;
  bool anyP2PGroup = false;
  bool offloadThresholdApplied = false;
  /// Per node, whether the chain being found holds it: all clear between
  /// two chains, and freed once every chain is found.
  std::vector<uint8_t> chainMarks;
  std::vector<ActivationInfo> activations;
  /// Alias values of each storage (storage owner excluded), by value id.
  std::vector<std::vector<ValueId>> aliasesOf;
};

} // namespace lethe

#endif // LETHE_PLANNER_ACTIVATIONS_H

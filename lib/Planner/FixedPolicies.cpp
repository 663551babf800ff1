//===- FixedPolicies.cpp - Fixed checkpointing / offloading policies ------===//

#include "lethe/Planner/Policies.h"

#include "PlannerUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace lethe;
using planner::humanBytes;
using planner::humanUs;

std::optional<Policy> lethe::parsePolicy(llvm::StringRef name) {
  std::optional<Policy> policy = symbolizePolicy(name);
  if (policy == Policy::Given)
    return std::nullopt;
  return policy;
}

std::string lethe::policyNames() {
  return "none, full, every-n, selective-op, offload-all, auto";
}

std::vector<std::string> lethe::defaultKeptOpKinds() {
  // Matmul-like ops (ATen mm/addmm/bmm/matmul/linear, StableHLO dot_general,
  // linalg matmul), convolutions and attention.
  return {"mm", "matmul", "linear", "dot_general", "conv", "attention"};
}

bool lethe::isKeptOpKind(llvm::StringRef kind,
                         llvm::ArrayRef<std::string> keep) {
  std::vector<std::string> defaults;
  if (keep.empty()) {
    defaults = defaultKeptOpKinds();
    keep = defaults;
  }
  return llvm::any_of(keep, [&](const std::string &k) {
    return !k.empty() && kind.contains(k);
  });
}

namespace {
struct PolicyRules {
  const ActivationAnalysis &analysis;
  const LayerInfo &layers;
  Policy policy;
  const PlanOptions &options;
  /// Whether to say why: `reason` is left as it is otherwise.
  bool explain = true;

  std::string name() const { return stringifyPolicy(policy).str(); }

  /// The layer of the activation's producer when every forward read stays
  /// in that layer; -1 otherwise (with `why`).
  int32_t innerLayer(const ActivationInfo &act, std::string &why) const {
    int32_t layer = layers.layerOf[act.producer];
    if (layer < 0) {
      why = "outside the repeated layers";
      return -1;
    }
    const StorageInfo &info =
        analysis.getStorages()[analysis.storageIndex(act.storage)];
    for (NodeId use : info.uses) {
      if (use >= act.firstBackwardUse)
        break;
      if (layers.layerOf[use] != layer) {
        why = "read by the next layer (a layer boundary)";
        return -1;
      }
    }
    return layer;
  }

  void recomputeOrRetain(const ActivationInfo &act, Decision &decision,
                         std::string &reason) const {
    if (act.recomputable) {
      decision = Decision::Recompute;
      if (!explain)
        return;
      reason = llvm::formatv("recomputed (policy {0}): frees {1} for {2} of "
                             "re-run",
                             name(), humanBytes(act.bytes),
                             humanUs(act.recomputeUs))
                   .str();
      return;
    }
    decision = Decision::Retain;
    if (!explain)
      return;
    reason = llvm::formatv("retained (policy {0}): cannot be recomputed: {1}",
                           name(), act.notRecomputableReason)
                 .str();
  }

  void decide(const ActivationInfo &act, Decision &decision,
              std::string &reason) const {
    decision = Decision::Retain;
    std::string why;
    // Every policy keeps the layer inputs the backward does not read, as
    // the checkpoint wrappers (torch.utils.checkpoint, torchtitan's SAC)
    // do: recompute chains stop there (explainCheckpoints says which).
    if (act.checkpoint) {
      if (explain)
        reason = llvm::formatv("kept as a checkpoint (policy {0})", name());
      return;
    }
    switch (policy) {
    case Policy::None:
    case Policy::Auto:
    case Policy::Given:
      reason = "retained (policy none)";
      return;
    case Policy::OffloadAll:
      if (act.offloadable) {
        decision = Decision::Offload;
        if (explain)
          reason = llvm::formatv("offloaded (policy offload-all): frees {0}",
                                 humanBytes(act.bytes))
                       .str();
      } else if (explain) {
        reason = "retained (policy offload-all): cannot be offloaded: " +
                 act.notOffloadableReason;
      }
      return;
    case Policy::Full:
    case Policy::EveryN: {
      int32_t layer = innerLayer(act, why);
      if (layer < 0) {
        if (explain)
          reason = llvm::formatv("retained (policy {0}): {1}", name(), why);
        return;
      }
      int n = std::max(1, options.everyN);
      if (policy == Policy::EveryN && layer % n != 0) {
        if (!explain)
          return;
        reason = llvm::formatv("retained (policy every-n): layer {0} is not "
                               "checkpointed (n = {1})",
                               layers.names[layer], n);
        return;
      }
      recomputeOrRetain(act, decision, reason);
      return;
    }
    case Policy::SelectiveOp: {
      bool haveLayers = layers.numLayers() > 0;
      if (haveLayers && innerLayer(act, why) < 0) {
        if (explain)
          reason = llvm::formatv("retained (policy selective-op): {0}", why);
        return;
      }
      const GraphNode &producer =
          analysis.getGraph().getNode(act.producer);
      if (isKeptOpKind(producer.kind, options.keepOpKinds)) {
        if (options.offloadKept && act.offloadable) {
          decision = Decision::Offload;
          if (!explain)
            return;
          reason = llvm::formatv("offloaded (policy selective-op, "
                                 "offload-kept): output of kept op {0}",
                                 producer.kind);
          return;
        }
        if (explain)
          reason = llvm::formatv("retained (policy selective-op): output of "
                                 "kept op {0}",
                                 producer.kind);
        return;
      }
      recomputeOrRetain(act, decision, reason);
      return;
    }
    }
  }
};
} // namespace

PolicyDecisions lethe::fixedPolicyDecisions(const ActivationAnalysis &analysis,
                                            const LayerInfo &layers,
                                            Policy policy,
                                            const PlanOptions &options,
                                            bool reasons) {
  PolicyRules rules{analysis, layers, policy, options, reasons};
  PolicyDecisions result;
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  result.decisions.resize(acts.size());
  result.reasons.resize(reasons ? acts.size() : 0);
  std::string unused;
  for (auto [a, act] : llvm::enumerate(acts))
    rules.decide(act, result.decisions[a],
                 reasons ? result.reasons[a] : unused);
  return result;
}

void lethe::explainCheckpoints(const ActivationAnalysis &analysis,
                               llvm::ArrayRef<Decision> decisions,
                               std::vector<std::string> &reasons) {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  const TrainingGraph &graph = analysis.getGraph();
  const LayerInfo &layers = analysis.getLayers();
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (!act.checkpoint || decisions[a] != Decision::Retain ||
        a >= reasons.size())
      continue;
    std::string layer =
        act.inputOfLayer >= 0 &&
                static_cast<size_t>(act.inputOfLayer) < layers.numLayers()
            ? layers.names[act.inputOfLayer]
            : std::string("?");
    // The chains that read it in this plan: those of its readers that are
    // restored by a chain (recomputed, or offloaded with views to re-run).
    std::vector<ValueId> cut;
    for (ValueId reader : act.chainReaders) {
      int32_t r = analysis.activationIndex(reader);
      if (r < 0)
        continue;
      bool reads =
          (decisions[r] == Decision::Recompute &&
           llvm::is_contained(acts[r].recomputeInputs, act.storage)) ||
          (decisions[r] == Decision::Offload &&
           llvm::is_contained(acts[r].rederiveInputs, act.storage));
      if (reads)
        cut.push_back(reader);
    }
    if (cut.empty()) {
      reasons[a] = llvm::formatv("retained: input of layer {0}, a checkpoint "
                                 "candidate no recompute chain reads in this "
                                 "plan (freed after its last forward use)",
                                 layer)
                       .str();
      continue;
    }
    // Readers named by their producing node, as the other remarks name
    // nodes.
    std::string names;
    for (size_t k = 0; k < cut.size() && k < 4; ++k) {
      NodeId producer = graph.getValue(cut[k]).producer;
      names += (k ? ", " : "") + describeNode(graph, producer);
    }
    if (cut.size() > 4)
      names += ", ...";
    std::string through;
    if (act.recomputable && !act.recomputeNodes.empty()) {
      through =
          llvm::formatv("through it they would re-run {0} more nodes "
                        "({1}) back to {2}",
                        act.recomputeNodes.size(), humanUs(act.recomputeUs),
                        describeNode(graph, act.recomputeNodes.front()))
              .str();
    } else {
      through = "they could not run through it: " + act.notRecomputableReason;
    }
    reasons[a] = llvm::formatv("kept as a checkpoint ({0}): input of layer "
                               "{1}; cuts the recompute chains of {2} "
                               "activation(s) (of {3}); {4}",
                               humanBytes(act.bytes), layer, cut.size(), names,
                               through)
                     .str();
  }
}

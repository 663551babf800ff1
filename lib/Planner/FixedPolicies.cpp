//===- FixedPolicies.cpp - Fixed checkpointing / offloading policies ------===//

#include "lethe/Planner/Policies.h"

#include "PlannerUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace lethe;
using planner::humanBytes;
using planner::humanUs;

llvm::StringRef lethe::stringifyPolicy(Policy policy) {
  switch (policy) {
  case Policy::None:
    return "none";
  case Policy::Full:
    return "full";
  case Policy::EveryN:
    return "every-n";
  case Policy::SelectiveOp:
    return "selective-op";
  case Policy::OffloadAll:
    return "offload-all";
  case Policy::Auto:
    return "auto";
  case Policy::Given:
    return "given";
  }
  return "unknown";
}

std::optional<Policy> lethe::parsePolicy(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Policy>>(name)
      .Case("none", Policy::None)
      .Case("full", Policy::Full)
      .Case("every-n", Policy::EveryN)
      .Case("selective-op", Policy::SelectiveOp)
      .Case("offload-all", Policy::OffloadAll)
      .Case("auto", Policy::Auto)
      .Default(std::nullopt);
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
      reason = llvm::formatv("recomputed (policy {0}): frees {1} for {2} of "
                             "re-run",
                             name(), humanBytes(act.bytes),
                             humanUs(act.recomputeUs))
                   .str();
      return;
    }
    decision = Decision::Retain;
    reason = llvm::formatv("retained (policy {0}): cannot be recomputed: {1}",
                           name(), act.notRecomputableReason)
                 .str();
  }

  void decide(const ActivationInfo &act, Decision &decision,
              std::string &reason) const {
    decision = Decision::Retain;
    std::string why;
    switch (policy) {
    case Policy::None:
    case Policy::Auto:
    case Policy::Given:
      reason = "retained (policy none)";
      return;
    case Policy::OffloadAll:
      if (act.offloadable) {
        decision = Decision::Offload;
        reason = llvm::formatv("offloaded (policy offload-all): frees {0}",
                               humanBytes(act.bytes))
                     .str();
      } else {
        reason = "retained (policy offload-all): cannot be offloaded: " +
                 act.notOffloadableReason;
      }
      return;
    case Policy::Full:
    case Policy::EveryN: {
      int32_t layer = innerLayer(act, why);
      if (layer < 0) {
        reason = llvm::formatv("retained (policy {0}): {1}", name(), why);
        return;
      }
      int n = std::max(1, options.everyN);
      if (policy == Policy::EveryN && layer % n != 0) {
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
        reason = llvm::formatv("retained (policy selective-op): {0}", why);
        return;
      }
      const GraphNode &producer =
          analysis.getGraph().getNode(act.producer);
      if (isKeptOpKind(producer.kind, options.keepOpKinds)) {
        if (options.offloadKept && act.offloadable) {
          decision = Decision::Offload;
          reason = llvm::formatv("offloaded (policy selective-op, "
                                 "offload-kept): output of kept op {0}",
                                 producer.kind);
          return;
        }
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
                                            const PlanOptions &options) {
  PolicyRules rules{analysis, layers, policy, options};
  PolicyDecisions result;
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  result.decisions.resize(acts.size());
  result.reasons.resize(acts.size());
  for (auto [a, act] : llvm::enumerate(acts))
    rules.decide(act, result.decisions[a], result.reasons[a]);
  return result;
}

//===- Policies.h - Fixed checkpointing / offloading policies ---*- C++ -*-===//
//
// The rule-based policies users know from the frameworks, evaluated on
// Lethe's cost and memory model (docs/Planner.md):
// - none: retain everything;
// - full: in every layer, recompute every activation that stays inside the
//   layer and keep the ones a later layer reads (the layer's output, i.e.
//   the next layer's input); activations outside layers are retained; with
//   the layer inputs kept as checkpoints (every policy keeps them), each
//   layer is recomputed once from its input, as torch.utils.checkpoint does;
// - every-n: `full` on layers 0, n, 2n, ... only (torchtune);
// - selective-op: in every layer, keep the outputs of the listed op kinds
//   (default: matmul-like ops and attention), recompute the rest (PyTorch
//   SAC / torchtitan); with `offloadKept`, kept outputs go to host instead
//   (InternEvo's selective_checkpoint_offload);
// - offload-all: offload every eligible activation (TransformerEngine).
// An activation the rules would recompute but cannot be (RNG, collective,
// in-place) is retained; one they would offload but cannot be is retained.
// The policies ignore the budget: a plan is feasible when its simulated
// peak fits.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_POLICIES_H
#define LETHE_PLANNER_POLICIES_H

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Layers.h"
#include "lethe/Planner/Plan.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace lethe {

/// A policy an option may name: any but `given`.
std::optional<Policy> parsePolicy(llvm::StringRef name);
/// "none, full, every-n, selective-op, offload-all, auto".
std::string policyNames();

/// The op kinds `selective-op` keeps by default.
std::vector<std::string> defaultKeptOpKinds();
/// Whether `kind` contains one of `keep` (or of the defaults if empty).
bool isKeptOpKind(llvm::StringRef kind, llvm::ArrayRef<std::string> keep);

struct PolicyDecisions {
  std::vector<Decision> decisions;
  /// Why, per activation, for remarks.
  std::vector<std::string> reasons;
};

/// Decisions of a fixed policy (anything but Auto); without `reasons`, the
/// reasons are left empty (formatting them is most of the work).
PolicyDecisions fixedPolicyDecisions(const ActivationAnalysis &analysis,
                                     const LayerInfo &layers, Policy policy,
                                     const PlanOptions &options,
                                     bool reasons = true);

/// Rewrites the reasons of the retained checkpoints (ActivationInfo::
/// checkpoint) of any plan: which recompute chains keeping each one cut,
/// and what they would re-run through it otherwise.
void explainCheckpoints(const ActivationAnalysis &analysis,
                        llvm::ArrayRef<Decision> decisions,
                        std::vector<std::string> &reasons);

} // namespace lethe

#endif // LETHE_PLANNER_POLICIES_H

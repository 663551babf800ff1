//===- Plan.cpp - Decide retain / recompute / offload under a budget ------===//
//
// The pass is a thin layer over lethe/Planner/Planner.h: it parses the
// options, plans every function and writes the plan back as attributes and
// optimization remarks.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Import/PlanImporter.h"
#include "lethe/Planner/PlanOptionsParser.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Support/Bytes.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Remarks.h"

#include <cmath>
#include <limits>
#include <map>

namespace lethe {
#define GEN_PASS_DEF_PLANACTIVATIONS
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

struct PlanActivationsPass
    : public lethe::impl::PlanActivationsBase<PlanActivationsPass> {
  using PlanActivationsBase::PlanActivationsBase;

  void runOnOperation() override;

private:
  LogicalResult loadDevice(DeviceProfile &profile);
  PlanOptionText optionText() const;
  LogicalResult planFunction(func::FuncOp func, const DeviceProfile &profile);
  void writeBack(func::FuncOp func, const TrainingGraph &graph,
                 const Plan &plan);
};

} // namespace

LogicalResult PlanActivationsPass::loadDevice(DeviceProfile &profile) {
  llvm::Expected<DeviceProfile> loaded = DeviceProfile::load(device);
  if (!loaded)
    return getOperation()->emitError()
           << "lethe-plan: cannot load device profile: "
           << llvm::toString(loaded.takeError());
  profile = std::move(*loaded);
  return success();
}

PlanOptionText PlanActivationsPass::optionText() const {
  PlanOptionText text;
  text.budget = budget;
  text.policy = policy;
  text.everyN = everyN;
  text.keepOps.assign(keepOps.begin(), keepOps.end());
  text.offloadKept = offloadKept;
  text.minOffloadBytes = minOffloadBytes;
  text.hostBudget = hostBudget;
  text.solver = solver;
  text.replayRng = replayRng;
  text.bound = bound;
  text.alignment = alignment;
  text.planFile = planFile;
  return text;
}

void PlanActivationsPass::runOnOperation() {
  DeviceProfile profile;
  if (failed(loadDevice(profile)))
    return signalPassFailure();
  // Bad options fail before any function is looked at.
  llvm::Expected<PlanOptions> checked =
      parsePlanOptions(optionText(), 0, profile);
  if (!checked) {
    getOperation()->emitError()
        << "lethe-plan: " << llvm::toString(checked.takeError());
    return signalPassFailure();
  }
  for (func::FuncOp func : getOperation().getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    if (failed(planFunction(func, profile)))
      return signalPassFailure();
  }
}

LogicalResult PlanActivationsPass::planFunction(func::FuncOp func,
                                                const DeviceProfile &device) {
  // Ranks of one host share its copy bandwidth (the parallel passes say how
  // many).
  const DeviceProfile profile = deviceForFunction(device, func);
  FailureOr<TrainingGraph> graph = TrainingGraph::fromFunction(func);
  if (failed(graph))
    return failure();
  llvm::Expected<PlanOptions> options =
      preparePlanning(*graph, optionText(), profile);
  if (!options)
    return func.emitError() << "lethe-plan: "
                            << llvm::toString(options.takeError());
  if (failed(loadGivenPlan(optionText(), *graph, *options, &getContext())))
    return failure();
  llvm::Expected<Plan> plan = planTrainingStep(*graph, profile, *options);
  if (!plan)
    return func.emitError() << "lethe-plan: "
                            << llvm::toString(plan.takeError());
  if (!plan->feasible)
    return func.emitError() << "lethe-plan: " << infeasibleMessage(*plan);
  writeBack(func, *graph, *plan);
  if (!budget.empty())
    getOperation()->setAttr(
        attrs::kBudgetBytes,
        Builder(&getContext()).getI64IntegerAttr(options->budgetBytes));
  return success();
}

void PlanActivationsPass::writeBack(func::FuncOp func,
                                    const TrainingGraph &graph,
                                    const Plan &plan) {
  MLIRContext *context = &getContext();
  Builder builder(context);
  auto nodeArray = [&](llvm::ArrayRef<NodeId> nodes) {
    llvm::SmallVector<int64_t> ids(nodes.begin(), nodes.end());
    return builder.getDenseI64ArrayAttr(ids);
  };
  // Entries per producing node, in program order.
  struct Entries {
    llvm::SmallVector<Attribute> decisions, placements;
  };
  std::map<NodeId, Entries> byNode;
  for (const ActivationDecision &d : plan.decisions) {
    const GraphValue &value = graph.getValue(d.value);
    const GraphNode &node = graph.getNode(value.producer);
    Entries &entries = byNode[value.producer];
    if (entries.decisions.empty()) {
      entries.decisions.assign(node.results.size(), builder.getUnitAttr());
      entries.placements.assign(node.results.size(), builder.getUnitAttr());
    }
    entries.decisions[value.resultIndex] =
        DecisionAttr::get(context, d.decision);
    if (d.decision != Decision::Retain) {
      llvm::SmallVector<NamedAttribute> fields;
      fields.push_back(builder.getNamedAttr(
          "restore_before", builder.getI64IntegerAttr(d.firstBackwardUse)));
      if (d.decision == Decision::Offload) {
        fields.push_back(builder.getNamedAttr(
            "release_after", builder.getI64IntegerAttr(d.releaseAfter)));
        fields.push_back(builder.getNamedAttr(
            "prefetch_after", builder.getI64IntegerAttr(d.prefetchAfter)));
      }
      fields.push_back(
          builder.getNamedAttr("nodes", nodeArray(d.recomputeNodes)));
      entries.placements[value.resultIndex] =
          builder.getDictionaryAttr(fields);
    }
    switch (d.decision) {
    case Decision::Retain:
      ++numRetained;
      break;
    case Decision::Recompute:
      ++numRecomputed;
      break;
    case Decision::Offload:
      ++numOffloaded;
      break;
    }
    ++numActivations;
    remark::passed(node.irOp->getLoc(),
                   remark::RemarkOpts::name("decision")
                       .category("lethe-plan")
                       .subCategory(stringifyDecision(d.decision))
                       .function(func.getSymName()))
        << ("result " + std::to_string(value.resultIndex) + ": " + d.reason);
  }
  for (auto &[id, entries] : byNode) {
    Operation *op = graph.getNode(id).irOp;
    op->setAttr("lethe.decisions", builder.getArrayAttr(entries.decisions));
    if (llvm::any_of(entries.placements,
                     [](Attribute a) { return !isa<UnitAttr>(a); }))
      op->setAttr("lethe.placement", builder.getArrayAttr(entries.placements));
  }

  auto roundUs = [](double us) { return std::round(us * 1000.0) / 1000.0; };
  double overhead =
      plan.baselineStepUs > 0 ? plan.stepUs / plan.baselineStepUs - 1.0 : 0.0;
  llvm::SmallVector<NamedAttribute> summary({
          builder.getNamedAttr("policy", builder.getStringAttr(
                                             stringifyPolicy(plan.policy))),
          builder.getNamedAttr("budget_bytes",
                               builder.getI64IntegerAttr(plan.budgetBytes)),
          builder.getNamedAttr("feasible", builder.getBoolAttr(plan.feasible)),
          builder.getNamedAttr("peak_bytes",
                               builder.getI64IntegerAttr(plan.peakBytes)),
          builder.getNamedAttr(
              "baseline_peak_bytes",
              builder.getI64IntegerAttr(plan.baselinePeakBytes)),
          builder.getNamedAttr("step_us",
                               builder.getF64FloatAttr(roundUs(plan.stepUs))),
          builder.getNamedAttr(
              "baseline_step_us",
              builder.getF64FloatAttr(roundUs(plan.baselineStepUs))),
          builder.getNamedAttr(
              "overhead",
              builder.getF64FloatAttr(std::round(overhead * 1e6) / 1e6)),
  });
  // With bound=true: no plan's overhead at this budget is lower (rounded
  // down, so the attribute stays a bound).
  const std::optional<OverheadBound> &bound = plan.lowerBound;
  if (bound && bound->feasible) {
    summary.push_back(builder.getNamedAttr(
        "lower_bound_overhead",
        builder.getF64FloatAttr(std::floor(bound->overhead * 1e6) / 1e6)));
    lowerBoundOverheadPpm = std::max<uint64_t>(
        lowerBoundOverheadPpm,
        static_cast<uint64_t>(std::max(0.0, std::floor(bound->overhead * 1e6))));
  }
  func->setAttr("lethe.plan", builder.getDictionaryAttr(summary));
  peakBytes = std::max<uint64_t>(peakBytes, plan.peakBytes);
  baselinePeakBytes =
      std::max<uint64_t>(baselinePeakBytes, plan.baselinePeakBytes);
  stepUs += static_cast<uint64_t>(std::llround(plan.stepUs));
  baselineStepUs += static_cast<uint64_t>(std::llround(plan.baselineStepUs));
  remark::analysis(func.getLoc(), remark::RemarkOpts::name("summary")
                                      .category("lethe-plan")
                                      .subCategory("summary")
                                      .function(func.getSymName()))
      << llvm::formatv("policy {0}: peak {1} B, {2} (unplanned {3} B); step "
                       "{4:F1} us (+{5:F2}%)",
                       stringifyPolicy(plan.policy), plan.peakBytes,
                       plan.budgetBytes == std::numeric_limits<int64_t>::max()
                           ? std::string("no budget")
                           : "budget " + std::to_string(plan.budgetBytes) +
                                 " B",
                       plan.baselinePeakBytes, plan.stepUs, overhead * 100.0)
             .str();
  if (bound)
    remark::analysis(func.getLoc(), remark::RemarkOpts::name("bound")
                                        .category("lethe-plan")
                                        .subCategory("bound")
                                        .function(func.getSymName()))
        << (bound->feasible
                ? llvm::formatv("no plan at this budget is faster than {0:F1} "
                                "us (+{1:F2}%): this plan is within {2:F2} "
                                "points{3}",
                                bound->stepUs, bound->overhead * 100.0,
                                (overhead - bound->overhead) * 100.0,
                                bound->converged ? "" : " (not converged)")
                      .str()
                : std::string("no plan fits this budget (by the relaxation)"));
}

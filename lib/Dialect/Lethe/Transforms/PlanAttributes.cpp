//===- PlanAttributes.cpp - A plan on the IR, and back --------------------===//

#include "lethe/Dialect/Lethe/Transforms/PlanAttributes.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Planner/Placement.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace lethe;

void lethe::writePlanAttributes(const TrainingGraph &graph, const Plan &plan,
                                const IRMapping *ops) {
  auto opOf = [&](NodeId node) {
    Operation *op = graph.getNode(node).irOp;
    return ops ? ops->lookup(op) : op;
  };
  auto idOf = [&](NodeId node) {
    const std::optional<int64_t> &id = graph.getNode(node).sourceId;
    assert(id && "every node has its id before it is planned");
    return *id;
  };
  // Entries per producing node, in program order.
  struct Entries {
    SmallVector<Attribute> decisions, placements;
  };
  std::map<NodeId, Entries> byNode;
  for (const ActivationDecision &d : plan.decisions) {
    const GraphValue &value = graph.getValue(d.value);
    Operation *op = opOf(value.producer);
    MLIRContext *context = op->getContext();
    Builder builder(context);
    Entries &entries = byNode[value.producer];
    if (entries.decisions.empty()) {
      entries.decisions.assign(op->getNumResults(), builder.getUnitAttr());
      entries.placements.assign(op->getNumResults(), builder.getUnitAttr());
    }
    entries.decisions[value.resultIndex] =
        DecisionAttr::get(context, d.decision);
    if (d.decision == Decision::Retain)
      continue;
    bool offload = d.decision == Decision::Offload;
    SmallVector<int64_t> nodes;
    for (NodeId node : d.recomputeNodes)
      nodes.push_back(idOf(node));
    entries.placements[value.resultIndex] = PlacementAttr::get(
        context, idOf(d.firstBackwardUse),
        offload ? std::optional<int64_t>(idOf(d.releaseAfter)) : std::nullopt,
        offload ? std::optional<int64_t>(idOf(d.prefetchAfter)) : std::nullopt,
        nodes);
  }
  for (auto &[node, entries] : byNode) {
    Operation *op = opOf(node);
    Builder builder(op->getContext());
    LetheDialect::DecisionsAttrHelper(op->getContext())
        .setAttr(op, builder.getArrayAttr(entries.decisions));
    if (llvm::any_of(entries.placements,
                     [](Attribute a) { return !isa<UnitAttr>(a); }))
      LetheDialect::PlacementAttrHelper(op->getContext())
          .setAttr(op, builder.getArrayAttr(entries.placements));
  }
}

void lethe::writePlannedStep(func::FuncOp func, const PlannedStep &step,
                             bool budgetGiven, const IRMapping *ops) {
  writePlanAttributes(step.graph, step.plan, ops);
  writePlanSummary(func, step, budgetGiven);
}

void lethe::writePlanSummary(func::FuncOp func, const PlannedStep &step,
                             bool budgetGiven) {
  MLIRContext *context = func.getContext();
  const Plan &plan = step.plan;
  auto roundUs = [](double us) { return std::round(us * 1000.0) / 1000.0; };
  double overhead =
      plan.baselineStepUs > 0 ? plan.stepUs / plan.baselineStepUs - 1.0 : 0.0;
  // With bound=true: no plan's overhead at this budget is lower (rounded
  // down, so the attribute stays a bound).
  std::optional<double> lowerBound;
  if (const std::optional<OverheadBound> &bound = plan.lowerBound;
      bound && bound->feasible)
    lowerBound = std::floor(bound->overhead * 1e6) / 1e6;
  LetheDialect::PlanAttrHelper(context).setAttr(
      func, PlanAttr::get(context, plan.policy, plan.budgetBytes, plan.feasible,
                          plan.peakBytes, plan.baselinePeakBytes,
                          roundUs(plan.stepUs), roundUs(plan.baselineStepUs),
                          std::round(overhead * 1e6) / 1e6, lowerBound,
                          step.options.replayRng));
  if (budgetGiven)
    if (auto module = func->getParentOfType<ModuleOp>())
      LetheDialect::BudgetBytesAttrHelper(context).setAttr(
          module,
          Builder(context).getI64IntegerAttr(step.options.budgetBytes));
}

FailureOr<PlanOnIR>
lethe::readPlanAttributes(const TrainingGraph &graph,
                          const ActivationAnalysis &analysis) {
  ArrayRef<ActivationInfo> acts = analysis.getActivations();
  PlanOnIR read;
  read.decisions.resize(acts.size());
  for (auto [index, act] : llvm::enumerate(acts))
    read.decisions[index].value = act.storage;
  for (const GraphNode &node : graph.getNodes()) {
    Operation *op = node.irOp;
    auto decisionsAttr =
        LetheDialect::DecisionsAttrHelper(op->getContext()).getAttr(op);
    if (!decisionsAttr)
      continue;
    auto placementAttr =
        LetheDialect::PlacementAttrHelper(op->getContext()).getAttr(op);
    // The dialect verified both: one entry per result, each a decision (or
    // placement) or unit.
    for (auto [resultIndex, entry] : llvm::enumerate(decisionsAttr)) {
      auto decision = dyn_cast<DecisionAttr>(entry);
      if (!decision)
        continue;
      ValueId value = node.results[resultIndex];
      int32_t a = analysis.activationIndex(value);
      if (a < 0 || acts[a].storage != value)
        return op->emitOpError("result #")
               << resultIndex << " has a decision but is not an activation "
               << "(a storage produced in the forward part and read later)";
      ++read.numPlanned;
      ActivationDecision &d = read.decisions[a];
      d.decision = decision.getValue();
      if (d.decision == Decision::Retain)
        continue;
      auto placement = placementAttr
                           ? dyn_cast<PlacementAttr>(placementAttr[resultIndex])
                           : PlacementAttr();
      if (!placement) {
        read.complete = false;
        continue;
      }
      // Node ids back to this graph's node indices.
      auto nodeOf = [&, resultIndex = resultIndex](
                        int64_t id, StringRef field) -> FailureOr<NodeId> {
        if (std::optional<NodeId> found = graph.findNodeBySourceId(id))
          return *found;
        return op->emitOpError("placement of result #")
               << resultIndex << " names node " << id << " in '" << field
               << "', and no node of the function has that 'lethe.node_id'";
      };
      FailureOr<NodeId> restore =
          nodeOf(placement.getRestoreBefore(), "restore_before");
      if (failed(restore))
        return failure();
      d.firstBackwardUse = *restore;
      if (placement.getReleaseAfter()) {
        FailureOr<NodeId> release =
            nodeOf(*placement.getReleaseAfter(), "release_after");
        if (failed(release))
          return failure();
        FailureOr<NodeId> prefetch =
            nodeOf(*placement.getPrefetchAfter(), "prefetch_after");
        if (failed(prefetch))
          return failure();
        d.releaseAfter = *release;
        d.prefetchAfter = *prefetch;
      }
      for (int64_t id : placement.getNodes()) {
        FailureOr<NodeId> node = nodeOf(id, "nodes");
        if (failed(node))
          return failure();
        d.recomputeNodes.push_back(*node);
      }
      if (d.decision == Decision::Offload)
        read.complete &= d.releaseAfter >= 0 && d.prefetchAfter >= 0;
    }
  }
  return read;
}

PlanOptions lethe::planReadOptions(func::FuncOp func) {
  PlanAttr plan = LetheDialect::PlanAttrHelper(func.getContext()).getAttr(func);
  return planReadOptions(plan ? plan.getReplayRng() : true);
}

PlanOptions lethe::planReadOptions(bool replayRng) {
  PlanOptions options;
  options.replayRng = replayRng;
  options.minOffloadBytes = 0;
  return options;
}

FailureOr<ScheduledPlan> lethe::readScheduledPlan(
    func::FuncOp func, const TrainingGraph &graph,
    llvm::function_ref<const DeviceProfile *()> device,
    llvm::function_ref<void(const llvm::Twine &)> reportError) {
  ScheduledPlan result;
  result.analysis =
      std::make_unique<ActivationAnalysis>(graph, planReadOptions(func));
  FailureOr<PlanOnIR> read = readPlanAttributes(graph, *result.analysis);
  if (failed(read))
    return failure();
  result.numPlanned = read->numPlanned;
  result.decisions = std::move(read->decisions);
  if (!read->complete) {
    const DeviceProfile *profile = device();
    if (!profile)
      return failure();
    Plan plan;
    plan.decisions = std::move(result.decisions);
    if (llvm::Error err = completePlacement(*result.analysis, *profile, plan)) {
      reportError("cannot place the plan: " + toString(std::move(err)));
      return failure();
    }
    result.decisions = std::move(plan.decisions);
  }
  llvm::Expected<Schedule> schedule =
      buildSchedule(*result.analysis, result.decisions);
  if (!schedule) {
    reportError("the plan cannot be followed: " +
                toString(schedule.takeError()));
    return failure();
  }
  result.schedule = std::move(*schedule);
  return result;
}

//===- Planner.cpp - Plan a training step under a memory budget -----------===//

#include "lethe/Planner/Planner.h"
#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Bound.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/ExactSolver.h"
#include "lethe/Planner/Layers.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Planner/RepeatedLayers.h"

#include "PlannerUtils.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <limits>

using namespace lethe;

static llvm::Error planError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The fixed-policy plans `auto` starts from and must never lose to.
static std::vector<AutoSeed> autoSeeds(const ActivationAnalysis &analysis,
                                       const LayerInfo &layers,
                                       const PlanOptions &options) {
  std::vector<AutoSeed> seeds;
  auto add = [&](const std::string &name, Policy policy, PlanOptions opts) {
    // The reasons only for the seed a solution keeps: formatting them for
    // every activation of every seed was ~3% of a `lethe plan` at 100k ops.
    PolicyDecisions pd = fixedPolicyDecisions(analysis, layers, policy, opts,
                                              /*reasons=*/false);
    // Skip duplicates: the family only needs each plan once.
    for (const AutoSeed &seed : seeds)
      if (seed.decisions == pd.decisions)
        return;
    seeds.push_back(
        {name, std::move(pd.decisions), {}, [&analysis, &layers, policy, opts] {
           return fixedPolicyDecisions(analysis, layers, policy, opts).reasons;
         }});
  };
  PlanOptions opts = options;
  add("full", Policy::Full, opts);
  std::vector<int> ns = {options.everyN, 2, 3, 4};
  for (auto [i, n] : llvm::enumerate(ns)) {
    // The same n gives the same plan: not computed twice (the default n is
    // 2; each seed decides and explains every activation).
    if (n < 2 || llvm::is_contained(llvm::ArrayRef(ns).take_front(i), n))
      continue;
    opts.everyN = n;
    add(llvm::formatv("every-{0}", n).str(), Policy::EveryN, opts);
  }
  opts = options;
  opts.offloadKept = false;
  add("selective-op", Policy::SelectiveOp, opts);
  opts.offloadKept = true;
  add("selective-op (offload-kept)", Policy::SelectiveOp, opts);
  add("offload-all", Policy::OffloadAll, options);
  return seeds;
}

/// solver=exact: the MILP's plan (docs/ExactSolver.md), placed as the
/// solver placed it, with the simulator's predictions. The fast solver's
/// plan is its starting point.
static llvm::Expected<Plan>
planExact(const ActivationAnalysis &analysis, const TrainingGraph &graph,
          const DeviceProfile &device,
          const PlanOptions &options, Plan plan,
          std::chrono::steady_clock::time_point started,
          llvm::ArrayRef<ActivationDecision> start) {
  llvm::Expected<Plan> exact = solveExact(graph, device, options, start);
  if (!exact)
    return exact.takeError();
  llvm::Expected<SimResult> sim = simulatePlan(graph, device, options, *exact);
  if (!sim)
    return sim.takeError();
  plan.decisions = std::move(exact->decisions);
  if (plan.decisions.size() == analysis.getActivations().size()) {
    std::vector<Decision> decisions;
    std::vector<std::string> reasons;
    for (const ActivationDecision &d : plan.decisions) {
      decisions.push_back(d.decision);
      reasons.push_back(d.reason);
    }
    explainCheckpoints(analysis, decisions, reasons);
    for (auto [d, reason] : llvm::zip(plan.decisions, reasons))
      d.reason = std::move(reason);
  }
  plan.peakBytes = sim->peakBytes;
  plan.stepUs = sim->stepUs;
  plan.exactReport = exact->exactReport;
  bool hostFits = sim->hostPeakBytes <= options.hostBudgetBytes;
  plan.feasible = exact->feasible && sim->peakBytes <= options.budgetBytes &&
                  hostFits;
  // The least budget the exact solver meets is its model's least peak (the
  // model never undercounts the simulator's memory).
  if (!plan.feasible)
    plan.leastFeasibleBudget =
        exact->feasible ? sim->peakBytes : *exact->leastFeasibleBudget;
  plan.solveMs = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - started)
                     .count();
  return plan;
}

bool lethe::planCopiesYield(const TrainingGraph &graph,
                            const DeviceProfile &device,
                            const PlanOptions &options) {
  switch (options.copyModel) {
  case CollectiveCopyModel::Overlap:
    return false;
  case CollectiveCopyModel::Yield:
    return true;
  case CollectiveCopyModel::Auto:
    break;
  }
  if (!copiesContendWithCollectives(device))
    return false;
  for (const GraphNode &node : graph.getNodes())
    if (node.hasFlag(NodeFlagCollective))
      return true;
  return false;
}

static llvm::Expected<Plan>
planStep(const TrainingGraph &graph, const DeviceProfile &device,
         const PlanOptions &options, AutoFamily *family,
         std::shared_ptr<const ActivationAnalysis> *analysisOut);

llvm::Expected<Plan> lethe::planTrainingStep(
    const TrainingGraph &graph, const DeviceProfile &device,
    const PlanOptions &options, AutoFamily *family,
    std::shared_ptr<const ActivationAnalysis> *analysis) {
  llvm::Expected<Plan> plan =
      planStep(graph, device, options, family, analysis);
  if (!plan || !options.bound)
    return plan;
  llvm::Expected<OverheadBound> bound =
      boundStepTime(graph, device, options, plan->baselineStepUs,
                    plan->baselinePeakBytes);
  if (!bound)
    return bound.takeError();
  plan->lowerBound = *bound;
  return plan;
}

static llvm::Expected<Plan>
planStep(const TrainingGraph &graph, const DeviceProfile &device,
         const PlanOptions &options, AutoFamily *family,
         std::shared_ptr<const ActivationAnalysis> *analysisOut) {
  auto started = std::chrono::steady_clock::now();
  auto shared = std::make_shared<const ActivationAnalysis>(graph, options);
  if (analysisOut)
    *analysisOut = shared;
  const ActivationAnalysis &analysis = *shared;
  bool copiesYield = planCopiesYield(graph, device, options);
  Evaluator evaluator(analysis, device, copiesYield,
                      options.evaluationCacheBytes);
  std::vector<Decision> retainAll(analysis.getActivations().size(),
                                  Decision::Retain);
  llvm::Expected<Evaluation> baseline = evaluator.evaluate(retainAll);
  if (!baseline)
    return baseline.takeError();

  Plan plan;
  plan.policy = options.policy;
  plan.budgetBytes = options.budgetBytes;
  plan.baselinePeakBytes = baseline->peakBytes;
  plan.baselineStepUs = baseline->stepUs;

  const LayerInfo &layers = analysis.getLayers();
  bool perLayer = options.policy == Policy::Full ||
                  options.policy == Policy::EveryN ||
                  options.policy == Policy::SelectiveOp;
  // Without layers these policies would change nothing, and their least
  // budget would be the unplanned peak: say why instead.
  if (perLayer && layers.numLayers() == 0)
    return planError(
        llvm::formatv("policy {0} works per layer, and this graph has none: "
                      "no module scope numbers repeated blocks ('h.3', "
                      "'layers.3', 'encoder_layer_3', ...) and no op "
                      "sequence repeats along the forward; use policy auto, "
                      "none or offload-all",
                      stringifyPolicy(options.policy)));
  // A kept kind that no op has keeps nothing, so a misspelt one would
  // silently recompute what the user meant to keep (kinds match as
  // substrings of the op name, as isKeptOpKind reads them).
  if (options.policy == Policy::SelectiveOp) {
    const TrainingGraph &graph = analysis.getGraph();
    for (const std::string &kind : options.keepOpKinds) {
      if (kind.empty())
        continue;
      bool found = false;
      for (size_t n = 0, e = graph.numNodes(); n < e && !found; ++n)
        found = llvm::StringRef(graph.getNode(n).kind).contains(kind);
      if (!found)
        return planError(llvm::formatv(
            "keep-ops names '{0}', which is in no op of this graph: nothing "
            "would be kept for it (a kind matches as a part of the op name: "
            "'mm' keeps aten.mm.default and aten.addmm.default)",
            kind));
    }
  }
  std::vector<Decision> decisions;
  std::vector<std::string> reasons;
  std::optional<Evaluation> evaluation;
  std::optional<int64_t> least;
  if (options.policy == Policy::Given) {
    // A plan from elsewhere: evaluated (placed, scheduled, simulated) as
    // Lethe's own are; what it does not decide is retained.
    decisions.assign(analysis.getActivations().size(), Decision::Retain);
    reasons.assign(decisions.size(), "retained (not in the given plan)");
    // An offload's copy placement, where the plan gives one, as the hints
    // the solver placed it by: the placement a plan JSON records replays
    // to the same copies, so the same peak and step.
    std::vector<CopyHint> hints(decisions.size());
    bool anyHint = false;
    for (const ActivationDecision &given : options.givenDecisions) {
      int32_t a = analysis.activationIndex(given.value);
      if (a < 0 || analysis.getActivations()[a].storage != given.value)
        return planError(llvm::formatv(
            "the given plan decides value {0}, which is not an activation",
            given.value));
      const ActivationInfo &act = analysis.getActivations()[a];
      decisions[a] = given.decision;
      switch (given.decision) {
      case Decision::Retain:
        reasons[a] = "retained (given plan)";
        break;
      case Decision::Recompute:
        reasons[a] = llvm::formatv("recomputed (given plan): frees {0} for "
                                   "{1} of re-run",
                                   planner::humanBytes(act.bytes),
                                   planner::humanUs(act.recomputeUs))
                         .str();
        break;
      case Decision::Offload:
        reasons[a] = llvm::formatv("offloaded (given plan): frees {0}",
                                   planner::humanBytes(act.bytes))
                         .str();
        // Both bounds: `auto`'s quiet copies release later and prefetch
        // earlier than the placement would.
        hints[a].releaseBy = hints[a].releaseNotBefore = given.releaseAfter;
        hints[a].prefetchNotBefore = hints[a].prefetchBy = given.prefetchAfter;
        anyHint |= given.releaseAfter >= 0 || given.prefetchAfter >= 0;
        break;
      }
    }
    if (!anyHint)
      hints.clear();
    llvm::Expected<Evaluation> eval = evaluator.evaluate(decisions, hints);
    if (!eval)
      return eval.takeError();
    evaluation = std::move(*eval);
    least = evaluation->peakBytes;
  } else if (options.policy != Policy::Auto) {
    PolicyDecisions pd =
        fixedPolicyDecisions(analysis, layers, options.policy, options);
    decisions = std::move(pd.decisions);
    reasons = std::move(pd.reasons);
    llvm::Expected<Evaluation> eval = evaluator.evaluate(decisions);
    if (!eval)
      return eval.takeError();
    evaluation = std::move(*eval);
    least = evaluation->peakBytes;
  } else {
    std::vector<AutoSeed> seeds = autoSeeds(analysis, layers, options);
    // Copies pause during collectives: offload may lose where it won with
    // full copy windows, so auto also starts from (and never loses to) its
    // own recompute-only plan.
    if (copiesYield &&
        options.minOffloadBytes < std::numeric_limits<int64_t>::max()) {
      PlanOptions recomputeOnly = options;
      recomputeOnly.minOffloadBytes = std::numeric_limits<int64_t>::max();
      recomputeOnly.solver = SolverKind::Fast;
      recomputeOnly.bound = false;
      llvm::Expected<Plan> noOffload =
          planTrainingStep(graph, device, recomputeOnly);
      if (!noOffload)
        return noOffload.takeError();
      AutoSeed seed{"auto (no offload)", {}, {}, {}};
      for (const ActivationDecision &d : noOffload->decisions) {
        seed.decisions.push_back(d.decision);
        seed.reasons.push_back(d.reason);
      }
      if (seed.decisions.size() == analysis.getActivations().size())
        seeds.push_back(std::move(seed));
    }
    // A large step of repeated layers: the ladder decides each class of
    // identical layers' activations at once (docs/Planner.md).
    AutoSolverOptions solverOptions;
    RepeatedLayers repeated = findRepeatedLayers(analysis);
    if (shouldTieRepeatedLayers(analysis, repeated))
      solverOptions.tiedClasses = std::move(repeated.classes);
    solverOptions.family = family;
    llvm::Expected<AutoSolution> solution =
        solveAuto(evaluator, options, seeds, solverOptions);
    if (!solution)
      return solution.takeError();
    if (options.solver == SolverKind::Exact)
      return planExact(analysis, graph, device, options, std::move(plan), started,
                       solution->evaluation.placement->decisions);
    decisions = std::move(solution->decisions);
    reasons = std::move(solution->reasons);
    evaluation = std::move(solution->evaluation);
    least = solution->leastPeakBytes;
  }

  // The decisions as the plan runs them (effectiveDecisions).
  for (size_t a = 0; a < decisions.size(); ++a)
    decisions[a] = evaluation->placement->decisions[a].decision;
  explainCheckpoints(analysis, decisions, reasons);
  plan.decisions = evaluation->placement->decisions;
  for (size_t a = 0; a < plan.decisions.size() && a < reasons.size(); ++a)
    plan.decisions[a].reason = reasons[a];
  plan.peakBytes = evaluation->peakBytes;
  plan.stepUs = evaluation->stepUs;
  bool hostFits = evaluation->hostPeakBytes <= options.hostBudgetBytes;
  plan.feasible = plan.peakBytes <= options.budgetBytes && hostFits;
  if (!plan.feasible)
    plan.leastFeasibleBudget = least;
  plan.solveMs = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - started)
                     .count();
  return plan;
}

llvm::Expected<SimResult> lethe::simulatePlan(const TrainingGraph &graph,
                                              const DeviceProfile &device,
                                              const PlanOptions &options,
                                              const Plan &plan,
                                              Schedule *scheduleOut) {
  ActivationAnalysis analysis(graph, options);
  Plan placed = plan;
  bool needsPlacement = false;
  for (const ActivationDecision &d : plan.decisions)
    needsPlacement |= d.decision != Decision::Retain &&
                      (d.firstBackwardUse < 0 ||
                       (d.decision == Decision::Offload &&
                        (d.releaseAfter < 0 || d.prefetchAfter < 0)));
  if (needsPlacement || plan.decisions.size() != analysis.getActivations().size())
    if (llvm::Error err = completePlacement(analysis, device, placed))
      return std::move(err);
  llvm::Expected<Schedule> schedule = buildSchedule(analysis, placed.decisions);
  if (!schedule)
    return schedule.takeError();
  SimOptions simOptions;
  simOptions.copiesYieldToCollectives = planCopiesYield(graph, device, options);
  llvm::Expected<SimResult> result = simulate(*schedule, device, simOptions);
  if (result && scheduleOut)
    *scheduleOut = std::move(*schedule);
  return result;
}

std::string lethe::infeasibleMessage(const Plan &plan) {
  std::string policy = stringifyPolicy(plan.policy).str();
  if (!plan.leastFeasibleBudget)
    return llvm::formatv("budget {0} cannot be met by policy {1}",
                         planner::humanBytes(plan.budgetBytes), policy)
        .str();
  std::string message =
      llvm::formatv("budget {0} ({1} B) is below the least budget policy "
                    "{2} can meet on this graph: {3} ({4} B)",
                    planner::humanBytes(plan.budgetBytes), plan.budgetBytes,
                    policy, planner::humanBytes(*plan.leastFeasibleBudget),
                    *plan.leastFeasibleBudget)
          .str();
  if (plan.leastWithRngReplay)
    message +=
        llvm::formatv("; values whose recompute chain runs an RNG op (dropout) "
                      "are never recomputed without --replay-rng, with which "
                      "the least is {0} ({1} B)",
                      planner::humanBytes(*plan.leastWithRngReplay),
                      *plan.leastWithRngReplay)
            .str();
  return message;
}

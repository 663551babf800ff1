//===- PlanStep.cpp - The one planning entry point ------------------------===//

#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/NodeIds.h"
#include "lethe/Import/PlanImporter.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Support/Bytes.h"
#include "lethe/Support/Limits.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace lethe;

static llvm::Error optionError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::SmallVector<llvm::StringRef>
lethe::splitPassOptions(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> options;
  size_t start = 0;
  int depth = 0;
  char quote = 0;
  for (size_t i = 0, e = text.size(); i <= e; ++i) {
    char c = i < e ? text[i] : ' ';
    if (quote) {
      quote = c == quote ? 0 : quote;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}') {
      --depth;
    } else if (c == ' ' && depth == 0) {
      if (i > start)
        options.push_back(text.slice(start, i));
      start = i + 1;
    }
  }
  return options;
}

bool lethe::isLeastBudget(llvm::StringRef budget) {
  return budget.trim() == "least";
}

llvm::Expected<PlanOptions>
lethe::parsePlanOptions(const PlanActivationsOptions &given,
                        int64_t unplannedPeakBytes,
                        const DeviceProfile &device) {
  PlanOptions options;
  std::optional<Policy> policy = parsePolicy(given.policy);
  if (!policy)
    return optionError(llvm::formatv("unknown policy '{0}' (expected one of "
                                     "{1})",
                                     given.policy, policyNames()));
  // A given plan is evaluated as it is: no policy applies to it.
  if (!given.planFile.empty() && *policy != Policy::Auto)
    return optionError(llvm::formatv(
        "policy {0} and a given plan ('{1}') exclude each other: the plan is "
        "evaluated as it is",
        given.policy, given.planFile));
  options.policy = given.planFile.empty() ? *policy : Policy::Given;
  std::optional<SolverKind> solver =
      llvm::StringSwitch<std::optional<SolverKind>>(given.solver)
          .Case("auto", SolverKind::Auto)
          .Case("fast", SolverKind::Fast)
          .Case("exact", SolverKind::Exact)
          .Default(std::nullopt);
  if (!solver)
    return optionError(llvm::formatv(
        "unknown solver '{0}' (expected auto, fast or exact)", given.solver));
  options.solver = *solver;
  if (given.everyN < 1)
    return optionError(
        llvm::formatv("n must be at least 1, got {0}", given.everyN));
  options.everyN = given.everyN;
  if (!isValidAlignment(given.alignment))
    return optionError(
        llvm::formatv("alignment must be a power of two at most {0}, got {1}",
                      kMaxAlignment, given.alignment));
  options.keepOpKinds.assign(given.keepOps.begin(), given.keepOps.end());
  options.offloadKept = given.offloadKept;
  options.replayRng = given.replayRng;
  options.bound = given.bound;
  options.threads = given.threads;

  if (given.budget.empty()) {
    options.budgetBytes = std::numeric_limits<int64_t>::max();
  } else if (isLeastBudget(given.budget)) {
    // Planned at nothing first: the infeasible plan states the least
    // (planStepInPlace plans again there).
    options.budgetBytes = 0;
  } else {
    llvm::Expected<int64_t> budget =
        parseByteCount(given.budget, unplannedPeakBytes);
    if (!budget)
      return optionError(llvm::formatv("invalid budget '{0}': {1}",
                                       given.budget,
                                       llvm::toString(budget.takeError())));
    options.budgetBytes = *budget;
  }
  llvm::Expected<int64_t> minBytes = parseByteCount(given.minOffloadBytes);
  if (!minBytes)
    return optionError(llvm::formatv("invalid min-offload-bytes '{0}': {1}",
                                     given.minOffloadBytes,
                                     llvm::toString(minBytes.takeError())));
  options.minOffloadBytes = *minBytes;
  if (!given.hostBudget.empty()) {
    llvm::Expected<int64_t> host = parseByteCount(given.hostBudget);
    if (!host)
      return optionError(llvm::formatv("invalid host-budget '{0}': {1}",
                                       given.hostBudget,
                                       llvm::toString(host.takeError())));
    options.hostBudgetBytes = *host;
  } else if (device.hostMemoryBytes > 0) {
    options.hostBudgetBytes = static_cast<int64_t>(device.hostMemoryBytes);
  }
  return options;
}

const ActivationAnalysis *
lethe::PlannerAnalysis::of(const TrainingGraph &graph) const {
  return analysis && &analysis->getGraph() == &graph ? analysis.get()
                                                      : nullptr;
}

FailureOr<PlannedStep>
lethe::planStep(func::FuncOp func, const PlanActivationsOptions &options,
                const DeviceProfile &device,
                llvm::function_ref<void(const llvm::Twine &)> reportError,
                AutoFamilies *families) {
  PlannedStep step;
  if (failed(planStepInPlace(step, func, options, device, reportError,
                             families)))
    return failure();
  return step;
}

LogicalResult
lethe::planStepInPlace(PlannedStep &step, func::FuncOp func,
                       const PlanActivationsOptions &options,
                       const DeviceProfile &device,
                       llvm::function_ref<void(const llvm::Twine &)> reportError,
                       AutoFamilies *families) {
  // An analysis of what `step` held before is of another graph.
  step.planned.analysis.reset();
  // Options are checked before the graph is touched.
  if (llvm::Expected<PlanOptions> checked =
          parsePlanOptions(options, 0, device);
      !checked) {
    reportError(llvm::toString(checked.takeError()));
    return failure();
  }
  // The plan names nodes by id: every node gets one before it is planned.
  assignNodeIds(func);
  FailureOr<TrainingGraph> built = TrainingGraph::fromFunction(func);
  if (failed(built))
    return failure();
  // Planned where it stays: the planner's analysis refers to it.
  step.graph = std::move(*built);
  TrainingGraph *graph = &step.graph;
  // Plan the bytes the arena holds (lethe-assign-buffers aligns with the
  // same value), so that the planned peak is the packed arena's lower
  // bound on every route.
  if (options.alignment > 1 && !graph->alignStorageBytes(options.alignment)) {
    reportError(llvm::formatv(
        "with alignment {0} the graph's tensors total more than {1} bytes",
        options.alignment, kMaxGraphBytes));
    return failure();
  }
  int64_t unplannedPeak = MemoryProfile::compute(Lifetimes(*graph)).peakBytes;
  // Ranks of one host share its copy bandwidth (the parallel passes say how
  // many).
  DeviceProfile profile = deviceForFunction(device, func);
  llvm::Expected<PlanOptions> parsed =
      parsePlanOptions(options, unplannedPeak, profile);
  if (!parsed) {
    reportError(llvm::toString(parsed.takeError()));
    return failure();
  }
  if (failed(
          loadGivenPlan(options.planFile, *graph, *parsed, func.getContext())))
    return failure();
  AutoFamily *family = families ? &families->get(func.getSymName()) : nullptr;
  const bool least = isLeastBudget(options.budget);
  const bool bound = parsed->bound;
  // "least": the plan at nothing states the least budget (its lower bound
  // is not asked for), then the plan at it is made.
  parsed->bound = bound && !least;
  llvm::Expected<Plan> plan = planTrainingStep(*graph, profile, *parsed, family,
                                               &step.planned.analysis);
  if (plan && least && !plan->feasible && plan->leastFeasibleBudget) {
    parsed->budgetBytes = *plan->leastFeasibleBudget;
    parsed->bound = bound;
    plan = planTrainingStep(*graph, profile, *parsed, family,
                            &step.planned.analysis);
  }
  if (!plan) {
    reportError(llvm::toString(plan.takeError()));
    return failure();
  }
  step.device = std::move(profile);
  step.options = std::move(*parsed);
  step.plan = std::move(*plan);
  return success();
}

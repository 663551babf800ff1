//===- PlanOptionsParser.cpp - Planner options as people write them -------===//

#include "lethe/Planner/PlanOptionsParser.h"
#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Support/Bytes.h"
#include "lethe/Support/Limits.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace lethe;

static llvm::Error optionError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<PlanOptions>
lethe::parsePlanOptions(const PlanOptionText &text, int64_t unplannedPeakBytes,
                        const DeviceProfile &device) {
  PlanOptions options;
  std::optional<Policy> policy = parsePolicy(text.policy);
  if (!policy)
    return optionError(llvm::formatv("unknown policy '{0}' (expected one of "
                                     "{1})",
                                     text.policy, policyNames()));
  // A given plan is evaluated as it is: no policy applies to it.
  if (!text.planFile.empty() && *policy != Policy::Auto)
    return optionError(llvm::formatv(
        "policy {0} and a given plan ('{1}') exclude each other: the plan is "
        "evaluated as it is",
        text.policy, text.planFile));
  options.policy = text.planFile.empty() ? *policy : Policy::Given;
  std::optional<SolverKind> solver =
      llvm::StringSwitch<std::optional<SolverKind>>(text.solver)
          .Case("auto", SolverKind::Auto)
          .Case("fast", SolverKind::Fast)
          .Case("exact", SolverKind::Exact)
          .Default(std::nullopt);
  if (!solver)
    return optionError(llvm::formatv(
        "unknown solver '{0}' (expected auto, fast or exact)", text.solver));
  options.solver = *solver;
  if (text.everyN < 1)
    return optionError(
        llvm::formatv("n must be at least 1, got {0}", text.everyN));
  options.everyN = text.everyN;
  if (!isValidAlignment(text.alignment))
    return optionError(llvm::formatv(
        "alignment must be a power of two at most {0}, got {1}",
        kMaxAlignment, text.alignment));
  options.keepOpKinds = text.keepOps;
  options.offloadKept = text.offloadKept;
  options.replayRng = text.replayRng;
  options.bound = text.bound;

  if (text.budget.empty()) {
    options.budgetBytes = std::numeric_limits<int64_t>::max();
  } else {
    llvm::Expected<int64_t> budget =
        parseByteCount(text.budget, unplannedPeakBytes);
    if (!budget)
      return optionError(llvm::formatv("invalid budget '{0}': {1}",
                                       text.budget,
                                       llvm::toString(budget.takeError())));
    options.budgetBytes = *budget;
  }
  llvm::Expected<int64_t> minBytes = parseByteCount(text.minOffloadBytes);
  if (!minBytes)
    return optionError(llvm::formatv("invalid min-offload-bytes '{0}': {1}",
                                     text.minOffloadBytes,
                                     llvm::toString(minBytes.takeError())));
  options.minOffloadBytes = *minBytes;
  if (!text.hostBudget.empty()) {
    llvm::Expected<int64_t> host = parseByteCount(text.hostBudget);
    if (!host)
      return optionError(llvm::formatv("invalid host-budget '{0}': {1}",
                                       text.hostBudget,
                                       llvm::toString(host.takeError())));
    options.hostBudgetBytes = *host;
  } else if (device.hostMemoryBytes > 0) {
    options.hostBudgetBytes = static_cast<int64_t>(device.hostMemoryBytes);
  }
  return options;
}

llvm::Expected<PlanOptions>
lethe::preparePlanning(TrainingGraph &graph, const PlanOptionText &text,
                       const DeviceProfile &device) {
  // Options are checked before the graph is touched.
  if (llvm::Expected<PlanOptions> checked = parsePlanOptions(text, 0, device);
      !checked)
    return checked.takeError();
  if (text.alignment > 1 && !graph.alignStorageBytes(text.alignment))
    return optionError(llvm::formatv(
        "with alignment {0} the graph's tensors total more than {1} bytes",
        text.alignment, kMaxGraphBytes));
  int64_t unplannedPeak = MemoryProfile::compute(Lifetimes(graph)).peakBytes;
  return parsePlanOptions(text, unplannedPeak, device);
}

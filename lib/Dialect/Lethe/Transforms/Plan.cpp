//===- Plan.cpp - Decide retain / recompute / offload under a budget ------===//
//
// The pass is a thin layer over planStep (PlanStep.h), the planning every
// route shares: it plans every function and writes the plan back as
// attributes and optimization remarks.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/PlanAttributes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Support/Bytes.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Remarks.h"

#include <cmath>
#include <limits>

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

  /// The pass's options as the struct every route plans with.
  PlanActivationsOptions options() const;

  /// The subcommand the pass's options are registered in (its
  /// PassOptions): every option names it first, and it holds them all.
  llvm::cl::SubCommand &optionsSubCommand() const {
    assert(budget.Subs.size() == 1 && "options registered elsewhere too");
    return **budget.Subs.begin();
  }

  /// Shared by the clones of the pass (createPlanActivations below).
  std::shared_ptr<AutoFamilies> families;

private:
  LogicalResult loadDevice(DeviceProfile &profile);
  LogicalResult planFunction(func::FuncOp func, const DeviceProfile &profile);
  void writeBack(func::FuncOp func, const PlannedStep &step);
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

// The generated base copies the struct into the options; this is the way
// back (a field missing here is caught by PlanStepTest's round trip).
PlanActivationsOptions PlanActivationsPass::options() const {
  PlanActivationsOptions result;
  result.budget = budget;
  result.policy = policy;
  result.device = device;
  result.everyN = everyN;
  result.keepOps.assign(keepOps.begin(), keepOps.end());
  result.offloadKept = offloadKept;
  result.minOffloadBytes = minOffloadBytes;
  result.hostBudget = hostBudget;
  result.solver = solver;
  result.replayRng = replayRng;
  result.bound = bound;
  result.threads = threads;
  result.alignment = alignment;
  result.planFile = planFile;
  return result;
}

std::unique_ptr<Pass>
lethe::createPlanActivations(PlanActivationsOptions options,
                             std::shared_ptr<AutoFamilies> families) {
  auto pass = std::make_unique<PlanActivationsPass>(std::move(options));
  pass->families = std::move(families);
  return pass;
}

llvm::Expected<PlanActivationsOptions>
lethe::parsePlanActivationsOptions(llvm::StringRef text) {
  PlanActivationsPass pass;
  // One option at a time, so that an error names the option even when the
  // parser prints its reason instead of returning it (a value of the wrong
  // type).
  for (llvm::StringRef option : splitPassOptions(text)) {
    std::string error;
    if (failed(pass.initializeOptions(option, [&](const llvm::Twine &message) {
          error = message.str();
          return failure();
        })))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "invalid option '" + option + "'" +
              (llvm::StringRef(error).trim().empty()
                   ? ""
                   : ": " + llvm::StringRef(error).trim()));
  }
  return pass.options();
}

PlanOptionFlags::PlanOptionFlags() : pass(createPlanActivations()) {
  // From the pass's own subcommand, so that an option added to Passes.td
  // is here with no other change.
  for (const auto &entry :
       static_cast<PlanActivationsPass &>(*pass).optionsSubCommand().OptionsMap)
    options.push_back(entry.second);
  llvm::sort(options, [](const llvm::cl::Option *a, const llvm::cl::Option *b) {
    return a->ArgStr < b->ArgStr;
  });
}

PlanOptionFlags::~PlanOptionFlags() = default;

llvm::cl::Option *PlanOptionFlags::lookup(llvm::StringRef name) const {
  for (llvm::cl::Option *option : options)
    if (option->ArgStr == name)
      return option;
  return nullptr;
}

PlanActivationsOptions PlanOptionFlags::getValues() const {
  return static_cast<const PlanActivationsPass &>(*pass).options();
}

void PlanActivationsPass::runOnOperation() {
  DeviceProfile profile;
  if (failed(loadDevice(profile)))
    return signalPassFailure();
  // Bad options fail before any function is looked at.
  llvm::Expected<PlanOptions> checked = parsePlanOptions(options(), 0, profile);
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
  FailureOr<PlannedStep> step = planStep(
      func, options(), device,
      [&](const llvm::Twine &message) {
        func.emitError() << "lethe-plan: " << message;
      },
      families.get());
  if (failed(step))
    return failure();
  if (!step->plan.feasible)
    return func.emitError() << "lethe-plan: " << infeasibleMessage(step->plan);
  writeBack(func, *step);
  return success();
}

void PlanActivationsPass::writeBack(func::FuncOp func,
                                    const PlannedStep &step) {
  const TrainingGraph &graph = step.graph;
  const Plan &plan = step.plan;
  writePlannedStep(func, step, !budget.empty());
  for (const ActivationDecision &d : plan.decisions) {
    const GraphValue &value = graph.getValue(d.value);
    const GraphNode &node = graph.getNode(value.producer);
    switch (d.decision) {
    case Decision::Retain:
      ++numRetained;
      break;
    case Decision::Recompute:
      ++numRecomputed;
      recomputedBytes += graph.getValue(d.value).bytes;
      break;
    case Decision::Offload:
      ++numOffloaded;
      offloadedBytes += graph.getValue(d.value).bytes;
      break;
    }
    ++numActivations;
    remark::passed(node.irOp->getLoc(),
                   remark::RemarkOpts::name("decision")
                       .category(getArgument())
                       .subCategory(stringifyDecision(d.decision))
                       .function(func.getSymName()))
        << ("result " + std::to_string(value.resultIndex) + ": " + d.reason);
  }

  double overhead =
      plan.baselineStepUs > 0 ? plan.stepUs / plan.baselineStepUs - 1.0 : 0.0;
  const std::optional<OverheadBound> &bound = plan.lowerBound;
  if (bound && bound->feasible)
    lowerBoundOverheadPpm = std::max<uint64_t>(
        lowerBoundOverheadPpm,
        static_cast<uint64_t>(std::max(0.0, std::floor(bound->overhead * 1e6))));
  peakBytes = std::max<uint64_t>(peakBytes, plan.peakBytes);
  baselinePeakBytes =
      std::max<uint64_t>(baselinePeakBytes, plan.baselinePeakBytes);
  stepUs += static_cast<uint64_t>(std::llround(plan.stepUs));
  baselineStepUs += static_cast<uint64_t>(std::llround(plan.baselineStepUs));
  remark::analysis(func.getLoc(), remark::RemarkOpts::name("summary")
                                      .category(getArgument())
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
                                        .category(getArgument())
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

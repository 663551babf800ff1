//===- PlanStep.h - The one planning entry point ----------------*- C++ -*-===//
//
// Every route that plans a training step (the `lethe-plan` pass, hence
// `lethe compile` / `simulate` and the pipeline; `lethe plan`; the C API,
// hence Python) takes the planner's options as the `lethe-plan` pass
// declares them in Passes.td (PlanActivationsOptions, generated: names and
// defaults in one place) and plans through planStep, so that the same graph
// and options give the same plan on every route, alignment included.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DIALECT_LETHE_TRANSFORMS_PLANSTEP_H
#define LETHE_DIALECT_LETHE_TRANSFORMS_PLANSTEP_H

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Planner/Plan.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace lethe {

class ActivationAnalysis;
class AutoFamilies;

/// `text` split at the spaces that separate pass options (not those inside
/// braces or quotes, as MLIR's pass option parser reads them).
llvm::SmallVector<llvm::StringRef> splitPassOptions(llvm::StringRef text);

/// The options in `text` as `--lethe-plan='...'` takes them ("budget=60%
/// policy=every-n n=3 alignment=1"), parsed by the pass's own option parser
/// (Plan.cpp); options not named keep their Passes.td defaults. The C API
/// and Python pass options this way, so an option added to Passes.td
/// reaches them with no other change.
llvm::Expected<PlanActivationsOptions>
parsePlanActivationsOptions(llvm::StringRef text);

/// The `lethe-plan` pass's options as command-line options, for a tool that
/// takes them as its own flags (the `lethe` driver): their names, types,
/// help and defaults are the ones Passes.td declares, with no copy. The
/// options belong to a pass instance this object owns; the tool registers
/// them in its subcommands too (cl::Option::addArgument), parses its
/// command line and reads the values back with getValues.
class PlanOptionFlags {
public:
  PlanOptionFlags();
  ~PlanOptionFlags();
  PlanOptionFlags(const PlanOptionFlags &) = delete;
  PlanOptionFlags &operator=(const PlanOptionFlags &) = delete;

  /// Every option of the pass, ordered by name ("alignment", "bound",
  /// "budget", ...).
  llvm::ArrayRef<llvm::cl::Option *> getOptions() const { return options; }
  /// The option named `name`, or null.
  llvm::cl::Option *lookup(llvm::StringRef name) const;
  /// The values the options hold (their defaults where none was given).
  PlanActivationsOptions getValues() const;

private:
  std::unique_ptr<mlir::Pass> pass;
  llvm::SmallVector<llvm::cl::Option *> options;
};

/// Whether `budget` asks for the least budget the policy can meet
/// ("least"). planStep plans at the planner's least (its peak, for routes
/// that run the plan under another allocator: the C API's plans, the
/// lethe-plan pass); the pipeline's routes (`lethe plan`, `lethe compile`,
/// runLethePipeline) first resolve it to the least packed arena
/// (resolveLeastBudget, lethe/Pipelines/Pipelines.h).
bool isLeastBudget(llvm::StringRef budget);

/// Checks `options` and turns them into the planner's PlanOptions;
/// `unplannedPeakBytes` resolves a percentage budget. Errors name the
/// option. `options.device` is not read: `device` is that profile, loaded.
llvm::Expected<PlanOptions>
parsePlanOptions(const PlanActivationsOptions &options,
                 int64_t unplannedPeakBytes, const DeviceProfile &device);

/// The planner's ActivationAnalysis of a PlannedStep's graph, which refers
/// to that graph where it was planned: a copied or moved step holds none.
class PlannerAnalysis {
public:
  PlannerAnalysis() = default;
  PlannerAnalysis(const PlannerAnalysis &) {}
  PlannerAnalysis(PlannerAnalysis &&) {}
  PlannerAnalysis &operator=(const PlannerAnalysis &) {
    analysis.reset();
    return *this;
  }
  PlannerAnalysis &operator=(PlannerAnalysis &&) {
    analysis.reset();
    return *this;
  }
  /// The analysis, where it is of `graph` (the object, not a copy); else
  /// null.
  const ActivationAnalysis *of(const TrainingGraph &graph) const;
  /// Set by planTrainingStep.
  std::shared_ptr<const ActivationAnalysis> analysis;
};

/// A planned training function.
struct PlannedStep {
  /// The function's graph, its storages rounded up to the alignment.
  TrainingGraph graph;
  /// The profile as the function uses it (deviceForFunction).
  DeviceProfile device;
  PlanOptions options;
  Plan plan;
  /// What the plan was made on (under `options`), where the step was
  /// planned in place (planStepInPlace) and not copied or moved since: for
  /// materializePlannedStep, which would otherwise analyse `graph` again.
  PlannerAnalysis planned;
};

/// Plans `func` under `options` on `device` (the profile `options.device`
/// names, loaded once by the caller): builds its TrainingGraph, rounds the
/// storages up to `options.alignment` (a percentage budget is of the
/// aligned unplanned peak), reads `options.planFile` when given, and runs
/// the planner. An infeasible budget is not an error here (the plan says
/// so). Option and planner errors go to `reportError`; errors located in
/// the graph or the plan file go to the context's diagnostics.
///
/// `families`: where a caller plans the same function again at other budgets
/// (the pipeline's search for a plan that packs), `auto`'s ladders by
/// function name, reused across those calls (AutoSolverOptions::family).
mlir::FailureOr<PlannedStep>
planStep(mlir::func::FuncOp func, const PlanActivationsOptions &options,
         const DeviceProfile &device,
         llvm::function_ref<void(const llvm::Twine &)> reportError,
         AutoFamilies *families = nullptr);

/// planStep into `step`, which keeps the planner's analysis (`planned`)
/// while it stays where it is.
mlir::LogicalResult
planStepInPlace(PlannedStep &step, mlir::func::FuncOp func,
                const PlanActivationsOptions &options,
                const DeviceProfile &device,
                llvm::function_ref<void(const llvm::Twine &)> reportError,
                AutoFamilies *families = nullptr);

/// The `lethe-plan` pass planning through `families` (planStep): for a
/// caller that runs it on one module again and again at other budgets.
std::unique_ptr<mlir::Pass>
createPlanActivations(PlanActivationsOptions options,
                      std::shared_ptr<AutoFamilies> families);

} // namespace lethe

#endif // LETHE_DIALECT_LETHE_TRANSFORMS_PLANSTEP_H

//===- Pipelines.h - The Lethe compilation pipeline -------------*- C++ -*-===//
//
// From a timed (or untimed) training graph to an allocated, verified
// program: lethe-annotate-costs, lethe-plan, lethe-materialize,
// lethe-schedule, lethe-assign-buffers, lethe-verify (docs/Pipeline.md).
// lethe-opt runs it as `--lethe-pipeline='budget=... policy=...'`; the
// driver and the C API call runLethePipeline, which also re-plans when
// packing leaves the arena over the budget.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PIPELINES_PIPELINES_H
#define LETHE_PIPELINES_PIPELINES_H

#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lethe {

/// The pipeline's settings, as plain values.
struct LethePipelineConfig {
  /// The planner's options as given (budget: bytes, a size with a unit, or
  /// a percentage of the unplanned peak; empty for no limit). `plan.device`
  /// is the device of every phase.
  PlanActivationsOptions plan;
  /// lethe-schedule's, with its default.
  std::string contention = ScheduleProgramOptions().contention;
  /// Fill missing op times from the cost model first.
  bool annotateCosts = true;
};

/// The pipeline's own options (`lethe-pipeline{...}` takes these and every
/// lethe-plan option: parseLethePipelineOptions).
struct LethePipelineOptions
    : public mlir::PassPipelineOptions<LethePipelineOptions> {
  Option<std::string> contention{
      *this, "contention",
      llvm::cl::desc("how copies share time with collectives: auto, on "
                     "(separate), off (overlap), yield"),
      llvm::cl::init(LethePipelineConfig().contention)};
  Option<bool> annotateCosts{
      *this, "annotate-costs",
      llvm::cl::desc("fill missing op times from the cost model"),
      llvm::cl::init(LethePipelineConfig().annotateCosts)};
};

/// The configuration `text` gives, as `--lethe-pipeline='...'` takes it:
/// the pipeline's own options (LethePipelineOptions) and lethe-plan's, each
/// parsed by its own declaration; options not named keep their defaults.
llvm::Expected<LethePipelineConfig>
parseLethePipelineOptions(llvm::StringRef text);

/// Adds the whole pipeline, one pass per phase, to a module pass manager.
void buildLethePipeline(mlir::OpPassManager &pm,
                        const LethePipelineConfig &config);

/// The phases, for callers that run them in steps: up to lethe-plan, and
/// from lethe-materialize to lethe-assign-buffers (verification apart).
void buildPlanPhase(mlir::OpPassManager &pm, const LethePipelineConfig &config);
void buildProgramPhase(mlir::OpPassManager &pm,
                       const LethePipelineConfig &config);

/// Registers `lethe-pipeline`: runLethePipeline on the module (re-planning
/// for fragmentation), remarks kept.
void registerLethePipelines();

/// What runLethePipeline did.
struct PipelineOutcome {
  /// The budget the user asked for, in bytes (-1: none).
  int64_t budgetBytes = -1;
  /// The budget the kept plan was made for (lower after re-plans).
  int64_t planBudgetBytes = -1;
  /// Plans made: 1, plus one per re-plan for packing (and, on failure, the
  /// plans tried to find the least budget).
  int attempts = 0;
  /// On failure for the budget: the least budget the pipeline meets.
  std::optional<int64_t> leastBudgetBytes;
  /// The plan as lethe-plan recorded it, before materialization: per
  /// activation, its producer's name or kind, its id in the exported graph
  /// (`lethe.node_id`, -1 if unknown), result index, bytes and decision.
  struct Decision {
    std::string node;
    int64_t nodeId = -1;
    unsigned result = 0;
    int64_t bytes = 0;
    std::string decision;
  };
  std::vector<Decision> decisions;
};

/// Runs the pipeline on `module` in place and verifies the result. When the
/// packed device arena exceeds the budget, plans again for less than the
/// plan's peak, walking down the plans the planner makes under the budget
/// to the first whose packed arena fits (docs/Pipeline.md, "Feasibility":
/// success is monotone in the budget). A budget no plan packs into is an
/// error that states the least budget the pipeline meets. Remarks are
/// dropped unless `keepRemarks` (then each re-plan also gets one); errors
/// go to the context's handler. On failure `module` is left as it was.
mlir::LogicalResult runLethePipeline(mlir::ModuleOp module,
                                     const LethePipelineConfig &config,
                                     PipelineOutcome *outcome = nullptr,
                                     bool keepRemarks = false);

/// The least budget runLethePipeline meets with `config` (its budget
/// ignored): the least packed device arena of the plans the planner makes.
/// `lethe plan` and the C API report it for a budget that is too small.
/// `families`: `auto`'s ladders of plans already made of the same step with
/// the same costs (an infeasible plan builds the whole ladder, which the
/// search then replays instead of building it again); null: its own.
mlir::FailureOr<int64_t>
findLeastPipelineBudget(mlir::ModuleOp module,
                        const LethePipelineConfig &config,
                        std::shared_ptr<AutoFamilies> families = nullptr);

/// `config.plan.budget` "least" (isLeastBudget) replaced by the least
/// budget runLethePipeline meets on `module`, in bytes
/// (findLeastPipelineBudget); any other budget is left as it is. What a
/// user asking for the least gets on the pipeline's routes is a program:
/// the planner's own least may not pack into its arena.
mlir::LogicalResult
resolveLeastBudget(mlir::ModuleOp module, LethePipelineConfig &config,
                   std::shared_ptr<AutoFamilies> families = nullptr);

/// Where the step has RNG ops (dropout) and `config` does not replay their
/// state, so their chains are never recomputed: the least budget
/// findLeastPipelineBudget finds with replay on, if under 98% of `least`
/// (the one without); nullopt otherwise. `func`: that function of
/// `module` alone (findLeastFunctionBudget); null: the whole module. The
/// below-the-least errors state it: T5-base's least is 2.55x its largest
/// op working set without replay, 1.00x with it.
std::optional<int64_t> leastWithRngReplay(mlir::ModuleOp module,
                                          mlir::func::FuncOp func,
                                          const LethePipelineConfig &config,
                                          int64_t least);

/// findLeastPipelineBudget for `func` of `module` alone (the other
/// functions left out): the least budget `lethe plan` and the C API state
/// for an infeasible plan of `func`, the one compiling it meets.
mlir::FailureOr<int64_t>
findLeastFunctionBudget(mlir::ModuleOp module, mlir::func::FuncOp func,
                        const LethePipelineConfig &config,
                        std::shared_ptr<AutoFamilies> families = nullptr);

/// Makes `step`, planStep's plan of `func` for `config`'s budget, the one
/// compiling `func` keeps, so that a plan called feasible compiles: when its
/// packed arena is over the budget, the plan the pipeline walks down to
/// (planned again for its plan budget, stated for the budget asked for),
/// or, when no plan under the budget packs into it, infeasible with the
/// least budget the pipeline meets (as for an infeasible `step`). `lethe
/// plan` calls it. Fails only when re-planning does. `families`: the
/// ladders `auto` built making `step` (AutoSolverOptions::family), which
/// the re-plans extend instead of building again.
mlir::LogicalResult
agreeWithPipeline(mlir::ModuleOp module, mlir::func::FuncOp func,
                  const LethePipelineConfig &config,
                  const DeviceProfile &device, PlannedStep &step,
                  std::shared_ptr<AutoFamilies> families = nullptr);

} // namespace lethe

#endif // LETHE_PIPELINES_PIPELINES_H

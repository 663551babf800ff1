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
  std::string contention = "auto";
  /// Fill missing op times from the cost model first.
  bool annotateCosts = true;
};

/// The same settings as pass-pipeline options (`lethe-pipeline{...}`).
struct LethePipelineOptions
    : public mlir::PassPipelineOptions<LethePipelineOptions> {
  Option<std::string> budget{
      *this, "budget",
      llvm::cl::desc("device budget: bytes, a size with a unit (2GiB, 800MB) "
                     "or a percentage of the unplanned peak (60%)"),
      llvm::cl::init("")};
  Option<std::string> policy{
      *this, "policy",
      llvm::cl::desc("none, full, every-n, selective-op, offload-all, auto"),
      llvm::cl::init("auto")};
  Option<std::string> device{
      *this, "device", llvm::cl::desc("device profile name or JSON file path"),
      llvm::cl::init("h200")};
  Option<int> everyN{*this, "n", llvm::cl::desc("every-n: the n"),
                     llvm::cl::init(2)};
  Option<std::string> solver{*this, "solver",
                             llvm::cl::desc("auto policy: auto, fast, exact"),
                             llvm::cl::init("auto")};
  Option<std::string> minOffloadBytes{
      *this, "min-offload-bytes",
      llvm::cl::desc("never offload a storage smaller than this"),
      llvm::cl::init("1MiB")};
  ListOption<std::string> keepOps{
      *this, "keep-ops",
      llvm::cl::desc("selective-op: op kinds whose outputs are kept")};
  Option<bool> offloadKept{*this, "offload-kept",
                           llvm::cl::desc("selective-op: offload the kept "
                                          "outputs instead"),
                           llvm::cl::init(false)};
  Option<bool> replayRng{*this, "replay-rng",
                         llvm::cl::desc("allow recomputing RNG ops"),
                         llvm::cl::init(false)};
  Option<std::string> hostBudget{
      *this, "host-budget",
      llvm::cl::desc("pinned host bytes; empty: the device profile's"),
      llvm::cl::init("")};
  Option<std::string> contention{
      *this, "contention",
      llvm::cl::desc("how copies share time with collectives: auto, on "
                     "(separate), off (overlap), yield"),
      llvm::cl::init("auto")};
  Option<int64_t> alignment{*this, "alignment",
                            llvm::cl::desc("arena alignment, bytes"),
                            llvm::cl::init(256)};
  Option<std::string> planFile{
      *this, "plan-file",
      llvm::cl::desc("evaluate the decisions in this JSON file instead of "
                     "planning"),
      llvm::cl::init("")};
  Option<bool> annotateCosts{
      *this, "annotate-costs",
      llvm::cl::desc("fill missing op times from the cost model"),
      llvm::cl::init(true)};

  LethePipelineConfig toConfig() const;
};

/// Adds the whole pipeline, one pass per phase, to a module pass manager.
void buildLethePipeline(mlir::OpPassManager &pm,
                        const LethePipelineOptions &options);
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
mlir::FailureOr<int64_t>
findLeastPipelineBudget(mlir::ModuleOp module,
                        const LethePipelineConfig &config);

/// findLeastPipelineBudget for `func` of `module` alone (the other
/// functions left out): the least budget `lethe plan` and the C API state
/// for an infeasible plan of `func`, the one compiling it meets.
mlir::FailureOr<int64_t>
findLeastFunctionBudget(mlir::ModuleOp module, mlir::func::FuncOp func,
                        const LethePipelineConfig &config);

} // namespace lethe

#endif // LETHE_PIPELINES_PIPELINES_H

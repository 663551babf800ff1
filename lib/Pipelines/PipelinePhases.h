//===- PipelinePhases.h - The pipeline's phases, shared in the library ----===//
//
// Part of Lethe. What building the pipeline's phases (PipelinePhases.cpp)
// and the pipeline's search for a plan that packs (Pipelines.cpp) share:
// private to lib/Pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PIPELINES_PIPELINEPHASES_H
#define LETHE_LIB_PIPELINES_PIPELINEPHASES_H

#include "lethe/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"

#include <memory>

namespace lethe::pipeline {

/// The pipeline's name on the command line, and its remarks' category.
inline constexpr llvm::StringLiteral kPipelineArgument = "lethe-pipeline";

/// lethe-annotate-costs where the config asks for it.
void addCostPass(mlir::OpPassManager &pm, const LethePipelineConfig &config);

/// Runs the cost pass on `module` (a clone the search plans on).
mlir::LogicalResult runCostPass(mlir::ModuleOp module,
                                const LethePipelineConfig &config);

/// lethe-plan with the pipeline's options and `budget` for the budget.
/// `families`: `auto`'s ladders, kept across the plans of one search.
void addPlanPass(mlir::OpPassManager &pm, const LethePipelineConfig &config,
                 llvm::StringRef budget,
                 std::shared_ptr<AutoFamilies> families = nullptr);

/// The program phase up to its buffers: what the feasibility check, which
/// packs them itself, runs; from lethe-schedule on where the program is
/// materialized already (materializePlannedStep). `measured`: a program
/// only measured (its arena), never kept, whose ops need not carry the
/// streams they run on anyway (write-streams=false).
void buildProgramOrder(mlir::OpPassManager &pm,
                       const LethePipelineConfig &config,
                       bool materialized = false, bool measured = false);

/// The program phase, from lethe-schedule on where `materialized`.
void buildProgram(mlir::OpPassManager &pm, const LethePipelineConfig &config,
                  bool materialized);

} // namespace lethe::pipeline

#endif // LETHE_LIB_PIPELINES_PIPELINEPHASES_H

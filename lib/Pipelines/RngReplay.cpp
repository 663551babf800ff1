//===- RngReplay.cpp - The least budget with RNG replay -------------------===//
//
// Part of Lethe. An activation whose recompute chain runs an RNG op
// (dropout) may only be recomputed where the runtime replays the RNG state
// (`replay_rng`); without it such values are kept or offloaded, and they,
// not the largest op's working set, may set the least budget. The errors
// for a budget under the least say so, with the least replay would give.
//
//===----------------------------------------------------------------------===//

#include "lethe/Pipelines/Pipelines.h"

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace lethe;

/// A least this much lower is worth a word: below it, replay buys the user
/// no budget they would notice (the least's own search steps are finer).
static constexpr double kWorthSaying = 0.98;

std::optional<int64_t>
lethe::leastWithRngReplay(ModuleOp module, func::FuncOp func,
                          const LethePipelineConfig &config, int64_t least) {
  if (config.plan.replayRng)
    return std::nullopt;
  bool random = false;
  Operation *step = func ? func.getOperation() : module.getOperation();
  step->walk([&](NodeOp node) {
    random = TrainingGraph::classifyKind(node.getKind()) & NodeFlagRandom;
    return random ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (!random)
    return std::nullopt;
  LethePipelineConfig replay = config;
  replay.plan.replayRng = true;
  FailureOr<int64_t> replayed =
      func ? findLeastFunctionBudget(module, func, replay)
           : findLeastPipelineBudget(module, replay);
  if (failed(replayed) || *replayed <= 0 ||
      static_cast<double>(*replayed) >= kWorthSaying * least)
    return std::nullopt;
  return *replayed;
}

//===- Simulation.h - Simulate a compiled step, for people and tools -*- C++
//-*-===//
//
// `lethe simulate` and `lethe compile` compile a graph with the pipeline
// (lethe/Pipelines/Pipelines.h), run the simulator on the program as its IR
// stands (lethe/Simulator/ProgramSchedule.h) and on the unplanned program,
// and report: a summary, JSON, a Chrome trace and an SVG plot of memory
// over time.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DRIVER_SIMULATION_H
#define LETHE_DRIVER_SIMULATION_H

#include "lethe/Pipelines/Pipelines.h"
#include "lethe/Simulator/ProgramSchedule.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/DeviceProfile.h"
#include "lethe/Support/Svg.h"
#include "lethe/Support/Trace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

#include <optional>

namespace lethe {

/// A program and its simulated run.
struct ProgramSimulation {
  ProgramSchedule program;
  /// The step launched eagerly (as the planner predicts it).
  SimResult result;
  /// The step replayed as one CUDA graph (LaunchMode::Graph).
  double graphStepUs = 0.0;
};

/// Simulates `func` as its IR stands. Errors are emitted at the op.
mlir::FailureOr<ProgramSimulation> simulateProgram(mlir::func::FuncOp func,
                                                   const DeviceProfile &device);

/// Simulates the unplanned step of `func` (a canonical graph): every
/// activation retained, each storage released after its last use.
mlir::FailureOr<ProgramSimulation>
simulateUnplanned(mlir::func::FuncOp func, const DeviceProfile &device);

struct SimulationReport {
  std::string graphName;
  std::string device;
  std::string policy;
  int64_t budgetBytes = -1;
  ProgramSimulation planned;
  std::optional<ProgramSimulation> unplanned;
  int64_t arenaBytes = 0, maxLiveBytes = 0;
  int64_t hostArenaBytes = 0, hostMaxLiveBytes = 0;
  /// The planner's predictions for this plan (`lethe.plan`).
  std::optional<double> predictedStepUs;
  std::optional<int64_t> predictedPeakBytes;
  PipelineOutcome outcome;
};

/// Fills the report's figures from the compiled module.
void readCompiledFigures(mlir::ModuleOp module, mlir::func::FuncOp func,
                         SimulationReport &report);

void printSimulationReport(const SimulationReport &report,
                           llvm::raw_ostream &os);

/// At least: step_us, peak_bytes, arena_bytes, max_live_bytes,
/// exposed_copy_us, busy_us per stream; the unplanned figures and the
/// planner's predictions when known.
llvm::json::Value simulationToJson(const SimulationReport &report);

/// The decisions of a compiled plan (`values` of `lethe compile`'s
/// plan.json and of the C API's compile JSON): per activation, the exported
/// node (`node` name, `node_id`), its `output` (also `result`), `bytes` and
/// `decision`.
llvm::json::Array compiledDecisionsToJson(const PipelineOutcome &outcome);

/// The program's run: one track per stream, a slice per op with a duration
/// (named by node kind; category fwd / bwd / opt / recompute / offload /
/// prefetch), the device-memory counter and the budget.
Timeline buildProgramTimeline(const ProgramSimulation &simulation,
                              int64_t budgetBytes);

/// Memory over time, planned and unplanned, with the budget line.
LinePlot buildMemoryPlot(const SimulationReport &report);

} // namespace lethe

#endif // LETHE_DRIVER_SIMULATION_H

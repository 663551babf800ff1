//===- GraphFile.h - Training steps read from JSON graph files --*- C++ -*-===//
//
// The tests over the bundled corpus (graphs/) all start the same way: read
// the file, import it, build the TrainingGraph of its function.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_PLANNER_GRAPHFILE_H
#define LETHE_UNITTESTS_PLANNER_GRAPHFILE_H

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include "gtest/gtest.h"

#include <optional>

namespace lethe::testing {

/// The training step in the JSON graph file `path`, imported into
/// `context`; `module` keeps the IR the graph refers to.
llvm::Expected<TrainingGraph>
loadGraphFile(llvm::StringRef path, mlir::MLIRContext &context,
              mlir::OwningOpRef<mlir::ModuleOp> &module);

/// The budget at `fraction` of the unplanned step's peak (every activation
/// retained, under `evaluator`); nullopt, with the test failed, where that
/// step cannot be evaluated.
std::optional<int64_t> budgetAtFraction(Evaluator &evaluator,
                                        const ActivationAnalysis &analysis,
                                        double fraction);

/// The corpus graph `name` (graphs/) into `graph`, and the h200 profile into
/// `device`; a fatal test failure where either does not load.
void loadCorpusGraph(const char *name, mlir::MLIRContext &context,
                     mlir::OwningOpRef<mlir::ModuleOp> &module,
                     std::optional<TrainingGraph> &graph,
                     std::optional<DeviceProfile> &device);

/// The corpus graph `name` (graphs/) loaded as `lethe plan` loads it (the
/// driver's loadTrainingGraph, which prices the ops the file gives no time
/// by the device profile) into `graph`, and the h200 profile into `device`;
/// false, with the test failed saying which, where either does not load.
bool loadCorpusGraphAsPlanned(const char *name, mlir::MLIRContext &context,
                              mlir::OwningOpRef<mlir::ModuleOp> &module,
                              std::optional<TrainingGraph> &graph,
                              std::optional<DeviceProfile> &device);

/// Tests over corpus graphs, parameterized by a file name in graphs/: each
/// test starts with that graph (`graph`) and the h200 profile (`device`)
/// loaded, or fails in SetUp saying which could not be.
class CorpusGraphTest : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override;

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<TrainingGraph> graph;
  std::optional<DeviceProfile> device;
};

} // namespace lethe::testing

#endif // LETHE_UNITTESTS_PLANNER_GRAPHFILE_H

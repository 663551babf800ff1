//===- TestSimulateProgram.cpp - Simulate a scheduled program -------------===//
//
// `-test-lethe-simulate-program{device=...}` runs the simulator on each
// function as its IR stands and prints the figures; when lethe-plan left its
// predictions (`lethe.plan`), it prints them beside and their difference.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Simulator/ProgramSchedule.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace lethe;

namespace {
struct TestSimulateProgramPass
    : public PassWrapper<TestSimulateProgramPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestSimulateProgramPass)

  TestSimulateProgramPass() = default;
  TestSimulateProgramPass(const TestSimulateProgramPass &other)
      : PassWrapper(other) {}

  StringRef getArgument() const final { return "test-lethe-simulate-program"; }
  StringRef getDescription() const final {
    return "Simulate each function's program and print step time and peak";
  }

  Option<std::string> device{*this, "device", llvm::cl::desc("device profile"),
                             llvm::cl::init("h200")};
  Option<bool> graph{*this, "graph",
                     llvm::cl::desc("simulate a CUDA-graph replay (default: "
                                    "eager launch)"),
                     llvm::cl::init(false)};

  void runOnOperation() override {
    llvm::Expected<DeviceProfile> profile = DeviceProfile::load(device);
    if (!profile) {
      getOperation().emitError() << toString(profile.takeError());
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FailureOr<ProgramSchedule> program = buildProgramSchedule(func);
      if (failed(program))
        return signalPassFailure();
      SimOptions options;
      options.launch = graph ? LaunchMode::Graph : LaunchMode::Eager;
      llvm::Expected<SimResult> result = simulate(
          program->schedule, deviceForFunction(*profile, func), options);
      if (!result) {
        func.emitError() << toString(result.takeError());
        return signalPassFailure();
      }
      llvm::raw_ostream &os = llvm::outs();
      os << "func @" << func.getSymName() << ": "
         << program->schedule.ops.size() << " ops\n";
      os << llvm::format("  step_us %.3f\n", result->stepUs);
      os << "  peak_bytes " << result->peakBytes << "\n";
      os << "  host_peak_bytes " << result->hostPeakBytes << "\n";
      os << llvm::format("  exposed_copy_us %.3f\n", result->exposedCopyUs);
      for (unsigned s = 0; s < kNumStreams; ++s)
        os << llvm::format("  busy_us.%s %.3f\n",
                           stringifyStream(static_cast<Stream>(s)).data(),
                           result->busyUs[s]);
      auto plan =
          LetheDialect::PlanAttrHelper(func->getContext()).getAttr(func);
      if (!plan)
        continue;
      double plannedUs = plan.getStepUs().convertToDouble();
      os << llvm::format("  planned step_us %.3f (%+.4f%%)\n", plannedUs,
                         100.0 * (result->stepUs / plannedUs - 1.0));
      os << "  planned peak_bytes " << plan.getPeakBytes() << " ("
         << (result->peakBytes - plan.getPeakBytes()) << ")\n";
    }
    markAllAnalysesPreserved();
  }
};
} // namespace

namespace lethe::test {
void registerTestSimulateProgramPass() {
  PassRegistration<TestSimulateProgramPass>();
}
} // namespace lethe::test

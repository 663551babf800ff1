//===- Tools.h - Entry points of the runtime's command-line tools -*- C++
//-*-===//
//
// The runner and the benchmark live in the runtime library (the only code
// that links CUDA); tools/ mains just call these.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_RUNTIME_TOOLS_H
#define LETHE_RUNTIME_TOOLS_H

namespace lethe::rt {

/// lethe-run: loads a compiled program (a shared object exporting
/// letheProgram), runs it and prints a JSON report. See docs/Runtime.md.
int runnerMain(int argc, char **argv);

/// lethe-rt-bench: copy bandwidth, GEMM rate and replay accuracy, printed
/// as markdown tables.
int benchMain(int argc, char **argv);

/// lethe-rt-bench --collectives: collectives beside host copies, one
/// process per GPU, as JSON (lib/Runtime/CollectiveBench.cpp).
int collectiveBenchMain(int argc, char **argv);

/// lethe-calibrate: measures the GPUs it runs on and writes a device
/// profile (lib/Runtime/Calibrate.cpp, docs/CostModel.md).
int calibrateMain(int argc, char **argv);

} // namespace lethe::rt

#endif // LETHE_RUNTIME_TOOLS_H

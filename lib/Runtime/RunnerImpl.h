//===- RunnerImpl.h - What lethe-run's modes share --------------*- C++ -*-===//
//
// The options, the loaded program and the report helpers of lethe-run,
// shared by Runner.cpp (options, loading, dry-run and checksum modes) and
// RunnerTiming.cpp (timing mode).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_RUNTIME_RUNNERIMPL_H
#define LETHE_LIB_RUNTIME_RUNNERIMPL_H

#include "Json.h"
#include "lethe-c/Runtime.h"

#include <cstdint>
#include <string>

namespace lethe::rt::runner {

struct Options {
  std::string program, compareTo, jsonPath, tracePath, ncclIdFile;
  LetheRtMode mode = LETHE_MODE_TIMING;
  int steps = 20, warmup = 3, repeat = 2, device = -1, world = -1, rank = 0;
  int profileSteps = 1;
  bool graph = true, profile = true, replayGemms = false;
  bool expectMismatch = false;
  /// --hw-queues: 0 = the default for the program (see Runner.cpp), -1 =
  /// the driver's, N > 0 = N. Resolved by runnerMain into `hwQueuesUsed`
  /// ("driver" where left to the driver) and where it came from.
  int hwQueues = 0;
  std::string hwQueuesUsed, hwQueuesFrom;
};

struct Program {
  std::string path;
  const LetheRtProgram *p = nullptr;
};

/// The first error of a run, with the runtime's message when it has one.
struct RunError {
  LetheRtStatus status = LETHE_RT_OK;
  std::string message;
  explicit operator bool() const { return status != LETHE_RT_OK; }
};

/// The runtime's sticky error if it has one, else `returned` (from `what`)
/// if that is not ok.
RunError errorOf(LetheRt *rt, LetheRtStatus returned, const char *what);
/// Creates the runtime, joins the communicator and runs init.
RunError setUp(const Program &prog, const Options &o, LetheRtMode mode,
               LetheRt **rt);
/// letheRtStepBegin, the program's step, letheRtStepEnd.
LetheRtStatus enqueueStep(LetheRt *rt, const LetheRtProgram &p);
std::string hex64(uint64_t v);

// The report's parts.
void writeError(JsonWriter &json, const RunError &e);
/// Prints the report (and writes it to --json); returns `code`.
int finish(const Options &o, JsonWriter &json, int code);
void writeProgram(JsonWriter &json, const Program &prog);
/// The program, then the mode, world and rank of a run on one rank.
void writeRankRun(JsonWriter &json, const Options &o, const Program &prog,
                  const char *mode);
void writeDevice(JsonWriter &json, LetheRt *rt);
void writeCounts(JsonWriter &json, const LetheRtStats &s);
/// The step's sends and receives in issue order, so that the reports of
/// two pipeline stages can be checked to pair up.
void writeP2P(JsonWriter &json, LetheRt *rt);

/// Timing mode (RunnerTiming.cpp): warm-up, timed eager and CUDA-graph
/// steps, profiled steps, memory.
int runTiming(const Options &o, const Program &prog);

} // namespace lethe::rt::runner

#endif // LETHE_LIB_RUNTIME_RUNNERIMPL_H

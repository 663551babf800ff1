//===- fault-program.cpp - A program for the runtime's fault tests --------===//
//
// A small step, 2 ms of compute and (on two ranks) an all-reduce of 16 MiB,
// that scripts/gpu-fault-tests.sh runs under faults. Variables the tests set
// (read when lethe-run loads the program):
//
//   LETHE_FAULT_KILL_AT_STEP=N        this process kills itself (SIGKILL) in
//                                     its N-th step, after enqueueing the
//                                     compute and before the all-reduce:
//                                     a rank that dies mid-step
//   LETHE_FAULT_DEVICE_ARENA_BYTES=B  the device arena's size (e.g. larger
//                                     than the card)
//   LETHE_FAULT_HOST_ARENA_BYTES=B    a pinned host arena (e.g. larger than
//                                     the host's memory)
//
// Built as fault-two-ranks.so (worldSize 2) and fault-one-rank.so
// (LETHE_FAULT_ONE_RANK: no collective).
//
//===----------------------------------------------------------------------===//

#include "lethe-c/Runtime.h"

#include <csignal>
#include <cstdlib>

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr LetheRtBuf X = {0, 16 * MiB}, Y = {16 * MiB, 16 * MiB},
                     G = {32 * MiB, 16 * MiB};
constexpr uint64_t kDeviceArena = 48 * MiB;
constexpr double kComputeUs = 2000;
#ifdef LETHE_FAULT_ONE_RANK
constexpr int32_t kWorld = 0;
#else
constexpr int32_t kWorld = 2;
#endif

long killAtStep = 0;
long steps = 0;

uint64_t bytesFrom(const char *name, uint64_t fallback) {
  const char *text = std::getenv(name);
  return text ? std::strtoull(text, nullptr, 10) : fallback;
}

LetheRtStatus init(LetheRt *rt) {
  letheRtFill(rt, X, LETHE_DTYPE_F32, 1);
  letheRtFill(rt, G, LETHE_DTYPE_F32, 2);
  return letheRtGetStatus(rt);
}

LetheRtStatus step(LetheRt *rt) {
  letheRtReplay(rt, "compute", kComputeUs, {X}, {Y});
  if (++steps == killAtStep)
    std::raise(SIGKILL);
  if (kWorld > 0)
    letheRtAllReduce(rt, "gradient all-reduce", G, G, LETHE_DTYPE_F32);
  return letheRtGetStatus(rt);
}

} // namespace

extern "C" const LetheRtProgram *letheProgram(void) {
  static LetheRtProgram program = [] {
    killAtStep = (long)bytesFrom("LETHE_FAULT_KILL_AT_STEP", 0);
    uint64_t device = bytesFrom("LETHE_FAULT_DEVICE_ARENA_BYTES", kDeviceArena);
    LetheRtProgram p = {LETHE_RT_ABI_VERSION,
                        kWorld ? "fault-two-ranks" : "fault-one-rank",
                        device < kDeviceArena ? kDeviceArena : device,
                        bytesFrom("LETHE_FAULT_HOST_ARENA_BYTES", 0),
                        /*numEvents=*/0,
                        kWorld,
                        /*plannedStepUs=*/0,
                        /*plannedPeakBytes=*/0,
                        init,
                        step,
                        /*checksum=*/nullptr};
    return p;
  }();
  return &program;
}

//===- bad-program.cpp - Programs the runtime must reject
//------------------===//
//
// One mistake each, picked by a macro; the runtime must refuse the call
// with a message naming the API call, the op and what is wrong (checked in
// dry-run mode by test/Runtime/dry-run-errors.test).
//
//===----------------------------------------------------------------------===//

#include "lethe-c/Runtime.h"

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr LetheRtBuf X = {0, 4 * kMiB}, Y = {4 * kMiB, 4 * kMiB};
constexpr uint64_t kDeviceArena = 8 * kMiB, kHostArena = 4 * kMiB;

LetheRtStatus step(LetheRt *rt) {
#if defined(LETHE_BAD_OFFSET)
  // Y's slot runs 1 MiB past the arena.
  letheRtReplay(rt, "relu %y", 10.0, {X}, {{5 * kMiB, 4 * kMiB}});
#elif defined(LETHE_BAD_ALIGN)
  letheRtReplay(rt, "relu %y", 10.0, {{8, 16}}, {Y});
#elif defined(LETHE_BAD_WAIT)
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
  letheRtWait(rt, LETHE_STREAM_COMPUTE, 1); // never recorded
#elif defined(LETHE_BAD_GEMM)
  // 1024 x 2048 @ 2048 x 1024 bf16 needs a 4 MiB a, 4 MiB b, 2 MiB c; a
  // holds only 2 MiB.
  letheRtGemm(rt, "aten.mm %y", 20.0,
              {LETHE_DTYPE_BF16,
               0,
               0,
               1,
               1024,
               1024,
               2048,
               {0, 2 * kMiB},
               X,
               {0, 0},
               Y});
#elif defined(LETHE_BAD_COPY)
  letheRtCopyD2H(rt, X.offset, 1 * kMiB, 4 * kMiB); // host arena is 4 MiB
#endif
  letheRtReplay(rt, "never reached", 1.0, {X}, {Y});
  return letheRtGetStatus(rt);
}

} // namespace

extern "C" const LetheRtProgram *letheProgram(void) {
  static const LetheRtProgram program = {LETHE_RT_ABI_VERSION,
                                         "bad-program",
                                         kDeviceArena,
                                         kHostArena,
                                         /*numEvents=*/2,
                                         /*worldSize=*/0,
                                         0,
                                         0,
                                         nullptr,
                                         step,
                                         nullptr};
  return &program;
}

//===- RuntimeImpl.h - The runtime's state (internal) -----------*- C++ -*-===//
//
// struct LetheRt behind the C API's opaque pointer, and the helpers every
// part of lib/Runtime uses to validate arguments and turn CUDA, cuBLAS and
// NCCL failures into a sticky status with a message.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_RUNTIME_RUNTIMEIMPL_H
#define LETHE_LIB_RUNTIME_RUNTIMEIMPL_H

#include "lethe-c/Runtime.h"

#include <cuda_runtime_api.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace lethe::rt {
struct GemmState;
struct CommState;

/// Scratch words at the start of the scratch allocation: digest sums of one
/// kernel's inputs, then the replay sink, then the named checksum slots.
constexpr uint32_t kMaxChecksums = 4096;

/// One op timed in profile mode.
struct ProfileRecord {
  int stream;
  std::string op;
  uint64_t bytes;
  cudaEvent_t start;
  cudaEvent_t end;
};
} // namespace lethe::rt

struct LetheRt {
  LetheRtConfig config{};
  LetheRtStatus status = LETHE_RT_OK;
  std::string message;
  bool dryRun = false;
  /// Set once letheRtCreate succeeded.
  bool ready = false;

  // Device.
  int device = -1;
  int numSMs = 1;
  std::string deviceName = "none (dry run)";
  int smClockKHz = 0;
  /// Measured SM cycles per microsecond, and how long an empty replay kernel
  /// occupies the stream back to back, which replay spins subtract.
  double cyclesPerUs = 0;
  double replayFloorUs = 0;

  cudaStream_t streams[LETHE_RT_NUM_STREAMS] = {};
  std::vector<cudaEvent_t> events;
  /// Per step: whether event i was recorded (waits on others are errors).
  std::vector<uint8_t> recorded;
  cudaEvent_t forkEvent = nullptr;
  cudaEvent_t joinEvents[LETHE_RT_NUM_STREAMS] = {};

  unsigned char *deviceArena = nullptr;
  unsigned char *hostArena = nullptr;
  /// kMaxKernelBuffers digest sums, 1 sink word, kMaxChecksums slots.
  uint64_t *scratch = nullptr;
  uint64_t scratchBytes = 0;

  // Checksums by name, in first-use order.
  std::vector<std::string> checksumNames;
  std::unordered_map<std::string, uint32_t> checksumIndex;
  std::vector<uint64_t> checksumValues;
  bool checksumsDirty = false;

  // Owned; freed by destroyGemmState / destroyCommState.
  lethe::rt::GemmState *gemm = nullptr;
  lethe::rt::CommState *comm = nullptr;

  // Accounting.
  LetheRtStats stats{};
  uint64_t deviceTotalBytes = 0;
  uint64_t usedAtContextBytes = 0;
  uint64_t usedAfterCreateBytes = 0;
  uint64_t ncclBytes = 0;

  // Profiling: records of the ops enqueued since the last reset, and a pool
  // of timing events reused across steps.
  std::vector<lethe::rt::ProfileRecord> profile;
  std::vector<cudaEvent_t> profilePool;
  size_t profilePoolUsed = 0;
  /// Set by the runner while a CUDA graph is captured (no timing events).
  bool capturing = false;

  LetheRt();
  ~LetheRt();
};

namespace lethe::rt {

/// Records the first error (sticky) and returns `status`.
LetheRtStatus fail(LetheRt *rt, LetheRtStatus status, const std::string &msg);

/// "letheRtGemm 'aten.mm %3'" or "letheRtCopyD2H".
std::string where(const char *api, const char *op);

/// Turns a failed CUDA call into a sticky error naming the API call, the op
/// and the CUDA call; returns LETHE_RT_OK on success.
LetheRtStatus checkCuda(LetheRt *rt, cudaError_t err, const std::string &at,
                        const char *call);

/// Checks that buf lies inside an arena of `limit` bytes and that its
/// offset is a multiple of `align`; records the high-water mark.
bool checkBuf(LetheRt *rt, const std::string &at, const std::string &role,
              LetheRtBuf buf, bool host, uint64_t align);

const char *streamName(int stream);
uint64_t dtypeSize(LetheRtDType dtype);
bool isFloatDType(int dtype);

/// Profile mode: times the ops enqueued between begin and end on a stream.
struct ProfileScope {
  ProfileScope(LetheRt *rt, int stream, const char *op, uint64_t bytes);
  ~ProfileScope();
  LetheRt *rt;
  int stream;
  cudaEvent_t end = nullptr;
};

/// Spin cycles for a kernel that should take timeUs, event to event.
uint64_t spinCyclesFor(const LetheRt *rt, double timeUs);

/// Launches a replay (timing mode) or hash op (checksum mode); buffers were
/// validated by the caller.
LetheRtStatus launchReplayOrHash(LetheRt *rt, const std::string &at,
                                 double timeUs, const LetheRtBuf *inputs,
                                 uint32_t numInputs, const LetheRtBuf *outputs,
                                 uint32_t numOutputs);

// Defined in Gemm.cpp and Collectives.cpp.
void destroyGemmState(LetheRt *rt);
void destroyCommState(LetheRt *rt);

} // namespace lethe::rt

#endif // LETHE_LIB_RUNTIME_RUNTIMEIMPL_H

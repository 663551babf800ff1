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
struct Watchdog;

/// Scratch words at the start of the scratch allocation: digest sums of one
/// kernel's inputs, then the replay sink, then the named checksum slots.
constexpr uint32_t kMaxChecksums = 4096;

/// One send or receive, as letheRtGetP2P reports it.
struct P2PRecord {
  std::string op;
  bool isSend;
  int peer;
  uint64_t bytes;
  int32_t group;
};

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
  /// occupies the stream back to back, eagerly and inside a CUDA graph,
  /// which replay spins subtract (spinCyclesFor).
  double cyclesPerUs = 0;
  double replayFloorUs = 0;
  double graphReplayFloorUs = 0;
  /// Rounds of the eager floor's measurement not kept: the GPU had drained
  /// before the host had enqueued the round's kernels.
  int replayFloorHostBoundRounds = 0;

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

  /// Bound on every blocking call ($LETHE_RT_TIMEOUT_S), and the thread
  /// that enforces it (device modes; Watchdog.cpp).
  double timeoutS = 0;
  lethe::rt::Watchdog *watchdog = nullptr;

  // Point to point: the NCCL group being gathered (letheRtGroupStart ..
  // letheRtGroupEnd) and the log of sends and receives (letheRtGetP2P).
  bool p2pGroupOpen = false;
  int32_t p2pGroups = 0;
  std::string p2pGroupLabel;
  uint64_t p2pGroupBytes = 0;
  std::vector<lethe::rt::P2PRecord> p2pLog;

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

  // Copies that yield to collectives (CopyYield.cpp).
  /// Device word: non-zero while a collective window is open.
  uint32_t *yieldFlag = nullptr;
  /// Chunk size of yielding copies; 0: copies go whole.
  uint64_t yieldChunkBytes = 0;
  /// $LETHE_COPY_YIELD: -1 none, 0 off, else the forced chunk size.
  int64_t yieldOverride = -1;
  /// Open windows (host side; only the outermost touches the flag).
  int windowDepth = 0;
  /// Whether the outermost open window raised the flag.
  bool windowRaised = false;
  /// Driver entry points (null: the spin-kernel fallback), and whether
  /// they capture into CUDA graphs (probed at creation).
  void *waitValue32 = nullptr;
  void *writeValue32 = nullptr;
  bool memOpsCapture = false;

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
LetheRtStatus initGemmState(LetheRt *rt);
void destroyGemmState(LetheRt *rt);
void destroyCommState(LetheRt *rt);

// Defined in Watchdog.cpp.
/// Reads $LETHE_RT_TIMEOUT_S (or its older name $LETHE_NCCL_TIMEOUT_S)
/// into rt->timeoutS; a malformed value is an invalid argument.
LetheRtStatus readTimeout(LetheRt *rt);
/// "20 s ($LETHE_RT_TIMEOUT_S)", for messages.
std::string timeoutText(const LetheRt *rt);
LetheRtStatus startWatchdog(LetheRt *rt);
void stopWatchdog(LetheRt *rt);
/// Whether a blocking call overran (the runtime is then unusable and its
/// streams may never drain).
bool watchdogFired(const LetheRt *rt);

/// Marks a call that may block (a synchronize, an NCCL call) for the
/// watchdog: if it runs past rt->timeoutS, or NCCL reports a failed peer,
/// the communicator is aborted so the call returns. finish(), right after
/// the call, returns the sticky LETHE_RT_TIMEOUT naming the cause, so the
/// call's own error (an effect of the abort) is not reported instead.
class BlockingCall {
public:
  BlockingCall(LetheRt *rt, const std::string &at, const char *call);
  ~BlockingCall();
  BlockingCall(const BlockingCall &) = delete;
  BlockingCall &operator=(const BlockingCall &) = delete;
  LetheRtStatus finish();

private:
  LetheRt *rt;
};

// Defined in Collectives.cpp, for the watchdog thread (safe to call while
// the main thread is blocked in an NCCL call or a synchronize).
/// Whether a communicator has been created and not yet aborted.
bool commReady(const LetheRt *rt);
/// NCCL's asynchronous error of the communicator, "" if none.
std::string commAsyncError(const LetheRt *rt);
/// ncclCommAbort: frees every rank's kernels and blocked calls.
void abortComm(LetheRt *rt);

// Defined in CopyYield.cpp.
/// Reads $LETHE_COPY_YIELD; on a device, allocates the window flag and finds
/// how to wait on it (probing stream memory operations under capture).
LetheRtStatus initCopyYield(LetheRt *rt);
void destroyCopyYield(LetheRt *rt);
/// The chunk size copies use now (0: whole).
uint64_t copyYieldChunk(const LetheRt *rt);
/// Opens / closes a collective window on the comm stream when yielding is
/// on (no-ops otherwise, and inside an outer window).
LetheRtStatus beginCollectiveWindow(LetheRt *rt, const std::string &at);
LetheRtStatus endCollectiveWindow(LetheRt *rt, const std::string &at);
/// Enqueues a copy of `bytes` in chunks of `chunk`, each after a wait for
/// the window flag, on `stream` (validated and counted by the caller).
LetheRtStatus enqueueYieldingCopy(LetheRt *rt, const std::string &at,
                                  bool toHost, unsigned char *dev,
                                  unsigned char *host, uint64_t bytes,
                                  uint64_t chunk);

} // namespace lethe::rt

/// Starts every C API entry point: a null handle is an invalid argument,
/// and a failed runtime answers with its sticky status.
#define LETHE_RT_ENTER(rt)                                                     \
  do {                                                                         \
    if (!(rt))                                                                 \
      return LETHE_RT_INVALID_ARGUMENT;                                        \
    if ((rt)->status != LETHE_RT_OK)                                           \
      return (rt)->status;                                                     \
  } while (0)

#endif // LETHE_LIB_RUNTIME_RUNTIMEIMPL_H

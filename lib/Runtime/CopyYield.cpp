//===- CopyYield.cpp - Host copies that yield to collectives --------------===//
//
// Where host copies and collectives share a path (NCCL through host memory
// over PCIe), each slows the other. Instead of ordering whole copies after
// collectives (which stalls the copy FIFOs behind the comm stream), the comm
// stream raises a device flag around each collective and copies go in
// chunks, each chunk's stream first waiting for the flag to be 0. Only the
// comm stream writes the flag and nothing on it waits for a copy inside a
// window, so copies can never hold up a collective; a collective overlaps at
// most the chunk per direction already running when it began.
//
// The wait and the writes are stream memory operations (cuStreamWaitValue32
// / cuStreamWriteValue32, reached through the runtime's driver entry points
// so the library does not link libcuda). Where the driver lacks them, or
// capturing them into a CUDA graph fails (probed once at creation), a
// one-thread kernel polls the flag and cudaMemsetAsync writes it.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "RuntimeImpl.h"

#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <string>

using namespace lethe::rt;

namespace {

using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t,
                                 unsigned int);
using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t,
                                  unsigned int);

/// Chunks smaller than this cost more in per-chunk launch overhead than the
/// overlap they save.
constexpr uint64_t kMinChunkBytes = 64 << 10;

void *driverEntryPoint(const char *symbol) {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  // The _v2 memory operations (CUDA 11.7), available on every platform.
  cudaError_t err = cudaGetDriverEntryPointByVersion(
      symbol, &fn, 11070, cudaEnableDefault, &found);
#else
  cudaError_t err =
      cudaGetDriverEntryPoint(symbol, &fn, cudaEnableDefault, &found);
#endif
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return fn;
}

CUdeviceptr flagAddress(const LetheRt *rt) {
  return (CUdeviceptr)(uintptr_t)rt->yieldFlag;
}

bool isCapturing(const LetheRt *rt, cudaStream_t stream) {
  if (rt->capturing)
    return true;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

bool useMemOps(const LetheRt *rt, cudaStream_t stream) {
  return rt->waitValue32 && rt->writeValue32 &&
         (rt->memOpsCapture || !isCapturing(rt, stream));
}

LetheRtStatus checkDriver(LetheRt *rt, CUresult result, const std::string &at,
                          const char *call) {
  if (result == CUDA_SUCCESS)
    return LETHE_RT_OK;
  return fail(rt, LETHE_RT_CUDA_ERROR,
              at + ": " + call + " failed: CUresult " +
                  std::to_string((int)result));
}

LetheRtStatus writeFlag(LetheRt *rt, const std::string &at, uint32_t value) {
  cudaStream_t stream = rt->streams[LETHE_STREAM_COMM];
  if (useMemOps(rt, stream))
    return checkDriver(rt,
                       ((WriteValueFn)rt->writeValue32)(
                           (CUstream)stream, flagAddress(rt), value,
                           CU_STREAM_WRITE_VALUE_DEFAULT),
                       at, "cuStreamWriteValue32(window flag)");
  return checkCuda(rt,
                   cudaMemsetAsync(rt->yieldFlag, value ? 1 : 0,
                                   sizeof(uint32_t), stream),
                   at, "cudaMemsetAsync(window flag)");
}

LetheRtStatus waitFlagZero(LetheRt *rt, const std::string &at,
                           cudaStream_t stream) {
  if (useMemOps(rt, stream))
    return checkDriver(rt,
                       ((WaitValueFn)rt->waitValue32)(
                           (CUstream)stream, flagAddress(rt), 0,
                           CU_STREAM_WAIT_VALUE_EQ),
                       at, "cuStreamWaitValue32(window flag == 0)");
  return checkCuda(rt, launchWaitFlagZero(rt->yieldFlag, stream), at,
                   "window-flag wait kernel launch");
}

/// Writes and waits on the flag on a stream of its own: eagerly, then
/// captured into a graph and launched. Leaves no error behind.
void probeMemOps(LetheRt *rt) {
  auto write = (WriteValueFn)rt->writeValue32;
  auto wait = (WaitValueFn)rt->waitValue32;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    rt->waitValue32 = rt->writeValue32 = nullptr;
    return;
  }
  auto sequence = [&]() {
    return write((CUstream)stream, flagAddress(rt), 1,
                 CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS &&
           write((CUstream)stream, flagAddress(rt), 0,
                 CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS &&
           wait((CUstream)stream, flagAddress(rt), 0,
                CU_STREAM_WAIT_VALUE_EQ) == CUDA_SUCCESS;
  };
  bool eager = sequence() && cudaStreamSynchronize(stream) == cudaSuccess;
  bool captured = false;
  if (eager &&
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) ==
          cudaSuccess) {
    bool recorded = sequence();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool ended = cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph;
    captured = recorded && ended &&
               cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess &&
               cudaGraphLaunch(exec, stream) == cudaSuccess &&
               cudaStreamSynchronize(stream) == cudaSuccess;
    if (exec)
      cudaGraphExecDestroy(exec);
    if (graph)
      cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
  (void)cudaGetLastError();
  if (!eager)
    rt->waitValue32 = rt->writeValue32 = nullptr;
  rt->memOpsCapture = captured;
}

/// "off", "0", or bytes with an optional K / M / G suffix (binary).
bool parseChunk(const char *text, int64_t &chunk) {
  std::string s = text;
  if (s == "off" || s == "0") {
    chunk = 0;
    return true;
  }
  char *end = nullptr;
  unsigned long long value = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str())
    return false;
  std::string suffix = end;
  int shift = suffix.empty() ? 0
              : suffix == "K" || suffix == "KiB" ? 10
              : suffix == "M" || suffix == "MiB" ? 20
              : suffix == "G" || suffix == "GiB" ? 30
                                                 : -1;
  if (shift < 0)
    return false;
  chunk = (int64_t)(value << shift);
  return chunk == 0 || (uint64_t)chunk >= kMinChunkBytes;
}

} // namespace

namespace lethe::rt {

LetheRtStatus initCopyYield(LetheRt *rt) {
  const std::string at = "letheRtCreate (copy yield)";
  if (const char *env = std::getenv("LETHE_COPY_YIELD"); env && *env) {
    int64_t chunk = 0;
    if (!parseChunk(env, chunk))
      return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                  at + ": $LETHE_COPY_YIELD is '" + env +
                      "'; expected off, 0, or a chunk size of at least "
                      "65536 bytes (suffix K, M or G allowed)");
    rt->yieldOverride = chunk;
  }
  if (rt->dryRun)
    return LETHE_RT_OK;
  if (checkCuda(rt,
                cudaMalloc(reinterpret_cast<void **>(&rt->yieldFlag),
                           sizeof(uint32_t)),
                at, "cudaMalloc(window flag)") ||
      checkCuda(rt, cudaMemset(rt->yieldFlag, 0, sizeof(uint32_t)), at,
                "cudaMemset(window flag)"))
    return rt->status;
  rt->scratchBytes += sizeof(uint32_t);
  rt->waitValue32 = driverEntryPoint("cuStreamWaitValue32");
  rt->writeValue32 = driverEntryPoint("cuStreamWriteValue32");
  if (rt->waitValue32 && rt->writeValue32)
    probeMemOps(rt);
  else
    rt->waitValue32 = rt->writeValue32 = nullptr;
  return LETHE_RT_OK;
}

void destroyCopyYield(LetheRt *rt) {
  if (rt->yieldFlag)
    cudaFree(rt->yieldFlag);
  rt->yieldFlag = nullptr;
}

uint64_t copyYieldChunk(const LetheRt *rt) {
  return rt->yieldOverride >= 0 ? (uint64_t)rt->yieldOverride
                                : rt->yieldChunkBytes;
}

LetheRtStatus beginCollectiveWindow(LetheRt *rt, const std::string &at) {
  if (rt->windowDepth++ > 0 || !copyYieldChunk(rt))
    return LETHE_RT_OK;
  rt->windowRaised = true;
  ++rt->stats.collectiveWindows;
  if (rt->dryRun)
    return LETHE_RT_OK;
  return writeFlag(rt, at, 1);
}

LetheRtStatus endCollectiveWindow(LetheRt *rt, const std::string &at) {
  if (rt->windowDepth <= 0)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": no collective window is open");
  if (--rt->windowDepth > 0 || !rt->windowRaised)
    return LETHE_RT_OK;
  rt->windowRaised = false;
  if (rt->dryRun)
    return LETHE_RT_OK;
  return writeFlag(rt, at, 0);
}

LetheRtStatus enqueueYieldingCopy(LetheRt *rt, const std::string &at,
                                  bool toHost, unsigned char *dev,
                                  unsigned char *host, uint64_t bytes,
                                  uint64_t chunk) {
  cudaStream_t stream =
      rt->streams[toHost ? LETHE_STREAM_D2H : LETHE_STREAM_H2D];
  for (uint64_t done = 0; done < bytes; done += chunk) {
    uint64_t n = std::min(chunk, bytes - done);
    if (waitFlagZero(rt, at, stream))
      return rt->status;
    cudaError_t err =
        toHost ? cudaMemcpyAsync(host + done, dev + done, n,
                                 cudaMemcpyDeviceToHost, stream)
               : cudaMemcpyAsync(dev + done, host + done, n,
                                 cudaMemcpyHostToDevice, stream);
    if (checkCuda(rt, err, at, "cudaMemcpyAsync (chunk)"))
      return rt->status;
  }
  return LETHE_RT_OK;
}

} // namespace lethe::rt

extern "C" LetheRtStatus letheRtSetCopyYield(LetheRt *rt, uint64_t chunkBytes) {
  LETHE_RT_ENTER(rt);
  if (chunkBytes && chunkBytes < kMinChunkBytes)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                "letheRtSetCopyYield: chunk of " + std::to_string(chunkBytes) +
                    " bytes; 0 (off) or at least " +
                    std::to_string(kMinChunkBytes));
  rt->yieldChunkBytes = chunkBytes;
  return LETHE_RT_OK;
}

extern "C" LetheRtStatus letheRtCollectiveWindowBegin(LetheRt *rt) {
  LETHE_RT_ENTER(rt);
  return beginCollectiveWindow(rt, "letheRtCollectiveWindowBegin");
}

extern "C" LetheRtStatus letheRtCollectiveWindowEnd(LetheRt *rt) {
  LETHE_RT_ENTER(rt);
  return endCollectiveWindow(rt, "letheRtCollectiveWindowEnd");
}

extern "C" const char *letheRtCopyYieldMechanism(const LetheRt *rt) {
  if (!rt || !rt->ready)
    return "none";
  if (rt->dryRun)
    return "none (dry run)";
  if (!rt->waitValue32)
    return "spin kernel";
  return rt->memOpsCapture ? "stream memory operations"
                           : "stream memory operations; spin kernel in CUDA "
                             "graphs";
}

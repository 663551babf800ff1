//===- Runtime.cpp - Streams, events, copies, kernels, checksums ----------===//
//
// The C API's core. Every call validates its arguments before it touches
// the device (so a dry run checks a program completely), counts what it
// enqueues, and turns failures into a sticky status and message. Creation
// and destruction are in Lifetime.cpp.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "RuntimeImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

using namespace lethe::rt;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace lethe::rt {

LetheRtStatus fail(LetheRt *rt, LetheRtStatus status, const std::string &msg) {
  if (rt->status == LETHE_RT_OK) {
    rt->status = status;
    rt->message = msg;
  }
  return status;
}

std::string where(const char *api, const char *op) {
  std::string s = api;
  if (op && *op)
    s += std::string(" '") + op + "'";
  return s;
}

LetheRtStatus checkCuda(LetheRt *rt, cudaError_t err, const std::string &at,
                        const char *call) {
  if (err == cudaSuccess)
    return LETHE_RT_OK;
  LetheRtStatus status = LETHE_RT_CUDA_ERROR;
  if (err == cudaErrorMemoryAllocation)
    status = LETHE_RT_OUT_OF_MEMORY;
  else if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
    status = LETHE_RT_NO_DEVICE;
  return fail(rt, status,
              at + ": " + call + " failed: " + cudaGetErrorString(err) + " (" +
                  cudaGetErrorName(err) + ")");
}

bool checkBuf(LetheRt *rt, const std::string &at, const std::string &role,
              LetheRtBuf buf, bool host, uint64_t align) {
  uint64_t limit =
      host ? rt->config.hostArenaBytes : rt->config.deviceArenaBytes;
  const char *arena = host ? "host arena" : "device arena";
  if (buf.offset > limit || buf.bytes > limit - buf.offset) {
    fail(rt, LETHE_RT_INVALID_ARGUMENT,
         at + ": " + role + " [" + std::to_string(buf.offset) + ", +" +
             std::to_string(buf.bytes) + ") lies outside the " + arena + " (" +
             std::to_string(limit) + " bytes)");
    return false;
  }
  if (align > 1 && buf.offset % align != 0) {
    fail(rt, LETHE_RT_INVALID_ARGUMENT,
         at + ": " + role + " offset " + std::to_string(buf.offset) +
             " is not a multiple of " + std::to_string(align));
    return false;
  }
  uint64_t &high = host ? rt->stats.hostHighWater : rt->stats.deviceHighWater;
  high = std::max(high, buf.offset + buf.bytes);
  return true;
}

const char *streamName(int stream) {
  static const char *names[] = {"compute", "d2h", "h2d", "comm"};
  return stream >= 0 && stream < LETHE_RT_NUM_STREAMS ? names[stream]
                                                      : "invalid";
}

uint64_t dtypeSize(LetheRtDType dtype) {
  switch (dtype) {
  case LETHE_DTYPE_F32:
    return 4;
  case LETHE_DTYPE_F16:
  case LETHE_DTYPE_BF16:
    return 2;
  default:
    return 1;
  }
}

bool isFloatDType(int dtype) {
  return dtype == LETHE_DTYPE_F32 || dtype == LETHE_DTYPE_F16 ||
         dtype == LETHE_DTYPE_BF16;
}

static cudaEvent_t takeProfileEvent(LetheRt *rt) {
  if (rt->profilePoolUsed < rt->profilePool.size())
    return rt->profilePool[rt->profilePoolUsed++];
  cudaEvent_t event = nullptr;
  if (checkCuda(rt, cudaEventCreate(&event), "profile", "cudaEventCreate") !=
      LETHE_RT_OK)
    return nullptr;
  rt->profilePool.push_back(event);
  ++rt->profilePoolUsed;
  return event;
}

ProfileScope::ProfileScope(LetheRt *rt, int stream, const char *op,
                           uint64_t bytes)
    : rt(rt), stream(stream) {
  if (!rt->config.profile || rt->capturing || rt->dryRun)
    return;
  cudaEvent_t start = takeProfileEvent(rt);
  end = takeProfileEvent(rt);
  if (!start || !end ||
      checkCuda(rt, cudaEventRecord(start, rt->streams[stream]), "profile",
                "cudaEventRecord") != LETHE_RT_OK) {
    end = nullptr;
    return;
  }
  rt->profile.push_back({stream, op ? op : "", bytes, start, end});
}

ProfileScope::~ProfileScope() {
  if (end)
    checkCuda(rt, cudaEventRecord(end, rt->streams[stream]), "profile",
              "cudaEventRecord");
}

uint64_t spinCyclesFor(const LetheRt *rt, double timeUs) {
  // Enqueued while capturing: the kernel runs in a graph.
  double spinUs =
      timeUs - (rt->capturing ? rt->graphReplayFloorUs : rt->replayFloorUs);
  return spinUs > 0 ? (uint64_t)(spinUs * rt->cyclesPerUs) : 0;
}

LetheRtStatus launchReplayOrHash(LetheRt *rt, const std::string &at,
                                 double timeUs, const LetheRtBuf *inputs,
                                 uint32_t numInputs, const LetheRtBuf *outputs,
                                 uint32_t numOutputs) {
  Span in[kMaxKernelBuffers], out[kMaxKernelBuffers];
  for (uint32_t i = 0; i < numInputs; ++i)
    in[i] = {rt->deviceArena + inputs[i].offset, inputs[i].bytes};
  for (uint32_t o = 0; o < numOutputs; ++o)
    out[o] = {rt->deviceArena + outputs[o].offset, outputs[o].bytes};
  cudaStream_t stream = rt->streams[LETHE_STREAM_COMPUTE];
  uint64_t cycles = spinCyclesFor(rt, timeUs);
  if (rt->config.mode == LETHE_MODE_CHECKSUM)
    return checkCuda(rt,
                     launchHashOp(in, (int)numInputs, out, (int)numOutputs,
                                  cycles, rt->numSMs, rt->scratch, stream),
                     at, "hash kernel launch");
  return checkCuda(rt,
                   launchReplay(in, (int)numInputs, out, (int)numOutputs,
                                cycles, rt->numSMs,
                                rt->scratch + kMaxKernelBuffers, stream),
                   at, "replay kernel launch");
}

} // namespace lethe::rt

static bool validStream(LetheRtStream stream) {
  return (int)stream >= 0 && (int)stream < LETHE_RT_NUM_STREAMS;
}

//===----------------------------------------------------------------------===//
// Status
//===----------------------------------------------------------------------===//

extern "C" LetheRtStatus letheRtGetStatus(const LetheRt *rt) {
  return rt ? rt->status : LETHE_RT_INVALID_ARGUMENT;
}

extern "C" const char *letheRtGetErrorMessage(const LetheRt *rt) {
  return rt ? rt->message.c_str() : "no runtime (null LetheRt)";
}

extern "C" LetheRtStatus letheRtClearInvalidArgument(LetheRt *rt) {
  if (!rt)
    return LETHE_RT_INVALID_ARGUMENT;
  if (rt->status == LETHE_RT_INVALID_ARGUMENT && rt->ready) {
    rt->status = LETHE_RT_OK;
    rt->message.clear();
  }
  return rt->status;
}

extern "C" const char *letheRtStatusName(LetheRtStatus status) {
  switch (status) {
  case LETHE_RT_OK:
    return "ok";
  case LETHE_RT_INVALID_ARGUMENT:
    return "invalid argument";
  case LETHE_RT_NO_DEVICE:
    return "no device";
  case LETHE_RT_CUDA_ERROR:
    return "CUDA error";
  case LETHE_RT_CUBLAS_ERROR:
    return "cuBLAS error";
  case LETHE_RT_NCCL_ERROR:
    return "NCCL error";
  case LETHE_RT_UNSUPPORTED:
    return "unsupported";
  case LETHE_RT_OUT_OF_MEMORY:
    return "out of memory";
  case LETHE_RT_IO_ERROR:
    return "I/O error";
  case LETHE_RT_TIMEOUT:
    return "timeout";
  }
  return "unknown status";
}

extern "C" LetheRtKernel letheRtKernelForOp(const char *opName) {
  if (!opName)
    return LETHE_KERNEL_REPLAY;
  std::string name = opName;
  if (name.rfind("aten.", 0) == 0)
    name = name.substr(5);
  name = name.substr(0, name.find('.'));
  static const char *gemms[] = {
      "mm",     "bmm",     "addmm",  "matmul",
      "linear", "baddbmm", "addbmm", "_addmm_activation"};
  for (const char *g : gemms)
    if (name == g)
      return LETHE_KERNEL_GEMM;
  return LETHE_KERNEL_REPLAY;
}

//===----------------------------------------------------------------------===//
// Steps and ordering
//===----------------------------------------------------------------------===//

extern "C" LetheRtStatus letheRtStepBegin(LetheRt *rt) {
  LETHE_RT_ENTER(rt);
  std::fill(rt->recorded.begin(), rt->recorded.end(), 0);
  if (rt->dryRun)
    return LETHE_RT_OK;
  const std::string at = "letheRtStepBegin";
  if (checkCuda(
          rt, cudaEventRecord(rt->forkEvent, rt->streams[LETHE_STREAM_COMPUTE]),
          at, "cudaEventRecord(compute)"))
    return rt->status;
  for (int s = 1; s < LETHE_RT_NUM_STREAMS; ++s)
    if (checkCuda(rt, cudaStreamWaitEvent(rt->streams[s], rt->forkEvent, 0), at,
                  "cudaStreamWaitEvent"))
      return rt->status;
  return LETHE_RT_OK;
}

extern "C" LetheRtStatus letheRtStepEnd(LetheRt *rt) {
  LETHE_RT_ENTER(rt);
  if (rt->p2pGroupOpen)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                "letheRtStepEnd: a point-to-point group is still open");
  if (rt->dryRun)
    return LETHE_RT_OK;
  const std::string at = "letheRtStepEnd";
  for (int s = 1; s < LETHE_RT_NUM_STREAMS; ++s)
    if (checkCuda(rt, cudaEventRecord(rt->joinEvents[s], rt->streams[s]), at,
                  "cudaEventRecord") ||
        checkCuda(rt,
                  cudaStreamWaitEvent(rt->streams[LETHE_STREAM_COMPUTE],
                                      rt->joinEvents[s], 0),
                  at, "cudaStreamWaitEvent(compute)"))
      return rt->status;
  return LETHE_RT_OK;
}

extern "C" LetheRtStatus letheRtSynchronize(LetheRt *rt) {
  LETHE_RT_ENTER(rt);
  if (rt->p2pGroupOpen)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                "letheRtSynchronize: a point-to-point group is still open");
  if (rt->dryRun)
    return LETHE_RT_OK;
  for (int s = 0; s < LETHE_RT_NUM_STREAMS; ++s) {
    std::string at = std::string("letheRtSynchronize(") + streamName(s) + ")";
    BlockingCall call(rt, at, "cudaStreamSynchronize");
    cudaError_t err = cudaStreamSynchronize(rt->streams[s]);
    if (call.finish() || checkCuda(rt, err, at, "cudaStreamSynchronize"))
      return rt->status;
  }
  return LETHE_RT_OK;
}

extern "C" LetheRtStatus letheRtRecord(LetheRt *rt, LetheRtStream stream,
                                       uint32_t event) {
  LETHE_RT_ENTER(rt);
  std::string at = std::string("letheRtRecord(") + streamName(stream) +
                   ", event " + std::to_string(event) + ")";
  if (!validStream(stream))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": stream " + std::to_string((int)stream) +
                    " is not one of compute, d2h, h2d, comm");
  if (event >= rt->config.numEvents)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": the program has " +
                    std::to_string(rt->config.numEvents) + " events");
  if (stream == LETHE_STREAM_COMM && rt->p2pGroupOpen)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": inside a point-to-point group the comm stream's "
                     "transfers start only at letheRtGroupEnd, so the event "
                     "would not follow them");
  rt->recorded[event] = 1;
  ++rt->stats.records;
  if (rt->dryRun)
    return LETHE_RT_OK;
  return checkCuda(rt, cudaEventRecord(rt->events[event], rt->streams[stream]),
                   at, "cudaEventRecord");
}

extern "C" LetheRtStatus letheRtWait(LetheRt *rt, LetheRtStream stream,
                                     uint32_t event) {
  LETHE_RT_ENTER(rt);
  std::string at = std::string("letheRtWait(") + streamName(stream) +
                   ", event " + std::to_string(event) + ")";
  if (!validStream(stream))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": stream " + std::to_string((int)stream) +
                    " is not one of compute, d2h, h2d, comm");
  if (event >= rt->config.numEvents)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": the program has " +
                    std::to_string(rt->config.numEvents) + " events");
  if (!rt->recorded[event])
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": event " + std::to_string(event) +
                    " was not recorded in this step, so the wait would not "
                    "wait for anything");
  ++rt->stats.waits;
  if (rt->dryRun)
    return LETHE_RT_OK;
  return checkCuda(
      rt, cudaStreamWaitEvent(rt->streams[stream], rt->events[event], 0), at,
      "cudaStreamWaitEvent");
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

static LetheRtStatus copy(LetheRt *rt, bool toHost, uint64_t deviceOffset,
                          uint64_t hostOffset, uint64_t bytes) {
  LETHE_RT_ENTER(rt);
  std::string at = toHost ? "letheRtCopyD2H" : "letheRtCopyH2D";
  if (!checkBuf(rt, at, "device range", {deviceOffset, bytes}, false, 1) ||
      !checkBuf(rt, at, "host range", {hostOffset, bytes}, true, 1))
    return rt->status;
  int stream = toHost ? LETHE_STREAM_D2H : LETHE_STREAM_H2D;
  ++rt->stats.opsPerStream[stream];
  (toHost ? rt->stats.bytesD2H : rt->stats.bytesH2D) += bytes;
  uint64_t chunk = copyYieldChunk(rt);
  if (chunk && bytes) {
    ++rt->stats.yieldingCopies;
    rt->stats.copyChunks += (bytes + chunk - 1) / chunk;
  }
  if (rt->dryRun || bytes == 0)
    return LETHE_RT_OK;
  ProfileScope profile(rt, stream, at.c_str(), bytes);
  unsigned char *dev = rt->deviceArena + deviceOffset;
  unsigned char *host = rt->hostArena + hostOffset;
  if (chunk)
    return enqueueYieldingCopy(rt, at, toHost, dev, host, bytes, chunk);
  cudaError_t err =
      toHost ? cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost,
                               rt->streams[stream])
             : cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice,
                               rt->streams[stream]);
  return checkCuda(rt, err, at, "cudaMemcpyAsync");
}

extern "C" LetheRtStatus letheRtCopyD2H(LetheRt *rt, uint64_t deviceOffset,
                                        uint64_t hostOffset, uint64_t bytes) {
  return copy(rt, true, deviceOffset, hostOffset, bytes);
}

extern "C" LetheRtStatus letheRtCopyH2D(LetheRt *rt, uint64_t hostOffset,
                                        uint64_t deviceOffset, uint64_t bytes) {
  return copy(rt, false, deviceOffset, hostOffset, bytes);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

static bool checkTime(LetheRt *rt, const std::string &at, double timeUs) {
  if (std::isfinite(timeUs) && timeUs >= 0)
    return true;
  fail(rt, LETHE_RT_INVALID_ARGUMENT,
       at + ": time " + std::to_string(timeUs) +
           " us is not a finite, non-negative number");
  return false;
}

extern "C" LetheRtStatus letheRtReplay(LetheRt *rt, const char *op,
                                       double timeUs, const LetheRtBuf *inputs,
                                       uint32_t numInputs,
                                       const LetheRtBuf *outputs,
                                       uint32_t numOutputs) {
  LETHE_RT_ENTER(rt);
  std::string at = where("letheRtReplay", op);
  if (!checkTime(rt, at, timeUs))
    return rt->status;
  if ((numInputs && !inputs) || (numOutputs && !outputs))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": a buffer list is null but its count is not 0");
  if ((uint64_t)numInputs + numOutputs > (uint64_t)kMaxKernelBuffers)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": " + std::to_string(numInputs + (uint64_t)numOutputs) +
                    " buffers; a kernel takes at most " +
                    std::to_string(kMaxKernelBuffers));
  for (uint32_t i = 0; i < numInputs; ++i)
    if (!checkBuf(rt, at, "input " + std::to_string(i), inputs[i], false, 16))
      return rt->status;
  for (uint32_t o = 0; o < numOutputs; ++o)
    if (!checkBuf(rt, at, "output " + std::to_string(o), outputs[o], false, 16))
      return rt->status;
  ++rt->stats.replays;
  ++rt->stats.opsPerStream[LETHE_STREAM_COMPUTE];
  rt->stats.kernelUs += timeUs;
  if (rt->dryRun)
    return LETHE_RT_OK;
  ProfileScope profile(rt, LETHE_STREAM_COMPUTE, op, 0);
  return launchReplayOrHash(rt, at, timeUs, inputs, numInputs, outputs,
                            numOutputs);
}

extern "C" LetheRtStatus letheRtRelease(LetheRt *rt, LetheRtStream stream,
                                        LetheRtBuf buf) {
  LETHE_RT_ENTER(rt);
  std::string at = std::string("letheRtRelease(") + streamName(stream) + ")";
  if (!validStream(stream))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": stream " + std::to_string((int)stream) +
                    " is not one of compute, d2h, h2d, comm");
  if (!checkBuf(rt, at, "buffer", buf, false, 1))
    return rt->status;
  ++rt->stats.releases;
  if (rt->dryRun || rt->config.mode != LETHE_MODE_CHECKSUM || !buf.bytes)
    return LETHE_RT_OK;
  return checkCuda(rt,
                   cudaMemsetAsync(rt->deviceArena + buf.offset, 0xEB,
                                   buf.bytes, rt->streams[stream]),
                   at, "cudaMemsetAsync (poison)");
}

extern "C" LetheRtStatus letheRtFill(LetheRt *rt, LetheRtBuf buf,
                                     LetheRtDType dtype, uint64_t seed) {
  LETHE_RT_ENTER(rt);
  std::string at = "letheRtFill";
  if (!isFloatDType(dtype) && dtype != LETHE_DTYPE_RAW)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": unknown dtype " + std::to_string((int)dtype));
  if (!checkBuf(rt, at, "buffer", buf, false, 16))
    return rt->status;
  ++rt->stats.opsPerStream[LETHE_STREAM_COMPUTE];
  if (rt->dryRun || !buf.bytes)
    return LETHE_RT_OK;
  return checkCuda(rt,
                   launchFill({rt->deviceArena + buf.offset, buf.bytes},
                              (int)dtype, seed, rt->numSMs,
                              rt->streams[LETHE_STREAM_COMPUTE]),
                   at, "fill kernel launch");
}

//===----------------------------------------------------------------------===//
// Checksums
//===----------------------------------------------------------------------===//

extern "C" LetheRtStatus letheRtChecksum(LetheRt *rt, const char *name,
                                         LetheRtBuf buf) {
  LETHE_RT_ENTER(rt);
  std::string at = where("letheRtChecksum", name);
  if (!name || !*name)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": a checksum needs a name");
  if (!checkBuf(rt, at, "buffer", buf, false, 16))
    return rt->status;
  auto it = rt->checksumIndex.find(name);
  uint32_t index;
  if (it != rt->checksumIndex.end()) {
    index = it->second;
  } else {
    if (rt->checksumNames.size() >= kMaxChecksums)
      return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                  at + ": more than " + std::to_string(kMaxChecksums) +
                      " named checksums");
    index = (uint32_t)rt->checksumNames.size();
    rt->checksumNames.push_back(name);
    rt->checksumIndex.emplace(name, index);
    rt->checksumValues.push_back(0);
  }
  rt->checksumsDirty = true;
  if (rt->dryRun)
    return LETHE_RT_OK;
  uint64_t *slot = rt->scratch + kMaxKernelBuffers + 1 + index;
  return checkCuda(rt,
                   launchDigest({rt->deviceArena + buf.offset, buf.bytes}, slot,
                                rt->numSMs, rt->streams[LETHE_STREAM_COMPUTE]),
                   at, "digest kernel launch");
}

extern "C" uint32_t letheRtNumChecksums(const LetheRt *rt) {
  return rt ? (uint32_t)rt->checksumNames.size() : 0;
}

extern "C" LetheRtStatus letheRtGetChecksum(LetheRt *rt, uint32_t index,
                                            const char **name,
                                            uint64_t *value) {
  LETHE_RT_ENTER(rt);
  const std::string at = "letheRtGetChecksum";
  if (index >= rt->checksumNames.size())
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": index " + std::to_string(index) + " of " +
                    std::to_string(rt->checksumNames.size()));
  if (rt->checksumsDirty && !rt->dryRun) {
    cudaStream_t stream = rt->streams[LETHE_STREAM_COMPUTE];
    if (letheRtSynchronize(rt) != LETHE_RT_OK ||
        checkCuda(rt,
                  cudaMemcpyAsync(rt->checksumValues.data(),
                                  rt->scratch + kMaxKernelBuffers + 1,
                                  sizeof(uint64_t) * rt->checksumValues.size(),
                                  cudaMemcpyDeviceToHost, stream),
                  at, "cudaMemcpyAsync"))
      return rt->status;
    BlockingCall call(rt, at, "cudaStreamSynchronize");
    cudaError_t err = cudaStreamSynchronize(stream);
    if (call.finish() || checkCuda(rt, err, at, "cudaStreamSynchronize"))
      return rt->status;
  }
  rt->checksumsDirty = false;
  if (name)
    *name = rt->checksumNames[index].c_str();
  if (value)
    *value = rt->checksumValues[index];
  return LETHE_RT_OK;
}

//===----------------------------------------------------------------------===//
// Access and accounting
//===----------------------------------------------------------------------===//

extern "C" void *letheRtDevicePointer(LetheRt *rt, uint64_t deviceOffset) {
  if (!rt || !rt->deviceArena || deviceOffset >= rt->config.deviceArenaBytes)
    return nullptr;
  return rt->deviceArena + deviceOffset;
}

extern "C" void *letheRtHostPointer(LetheRt *rt, uint64_t hostOffset) {
  if (!rt || !rt->hostArena || hostOffset >= rt->config.hostArenaBytes)
    return nullptr;
  return rt->hostArena + hostOffset;
}

extern "C" void letheRtGetStats(const LetheRt *rt, LetheRtStats *stats) {
  if (rt && stats)
    *stats = rt->stats;
}

extern "C" void letheRtResetStats(LetheRt *rt) {
  if (!rt)
    return;
  rt->stats = LetheRtStats{};
  rt->p2pLog.clear();
  rt->p2pGroups = rt->p2pGroupOpen ? 1 : 0;
}

extern "C" LetheRtStatus letheRtGetMemoryInfo(LetheRt *rt,
                                              LetheRtMemoryInfo *info) {
  LETHE_RT_ENTER(rt);
  if (!info)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                "letheRtGetMemoryInfo: info is null");
  LetheRtMemoryInfo m{};
  m.deviceArenaBytes = rt->config.deviceArenaBytes;
  m.hostArenaBytes = rt->config.hostArenaBytes;
  m.gemmWorkspaceBytes = rt->dryRun ? 0 : rt->config.gemmWorkspaceBytes;
  m.scratchBytes = rt->scratchBytes;
  m.ncclBytes = rt->ncclBytes;
  m.deviceTotalBytes = rt->deviceTotalBytes;
  m.usedAtContextBytes = rt->usedAtContextBytes;
  m.usedAfterCreateBytes = rt->usedAfterCreateBytes;
  if (!rt->dryRun) {
    size_t freeBytes = 0, totalBytes = 0;
    if (checkCuda(rt, cudaMemGetInfo(&freeBytes, &totalBytes),
                  "letheRtGetMemoryInfo", "cudaMemGetInfo"))
      return rt->status;
    m.usedNowBytes = totalBytes - freeBytes;
  }
  *info = m;
  return LETHE_RT_OK;
}

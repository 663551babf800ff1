//===- Lifetime.cpp - Creating and destroying a runtime -------------------===//
//
// letheRtCreate validates the configuration, then (unless a dry run) picks
// the device, creates the streams, events and arenas, the GEMM and copy
// state, and calibrates the replay kernel's floor; ~LetheRt undoes it, and
// leaves to the process's exit what streams that never drain still use.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "RuntimeImpl.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace lethe::rt;

LetheRt::LetheRt() = default;

LetheRt::~LetheRt() {
  if (dryRun || device < 0) {
    stopWatchdog(this);
    return;
  }
  // A failed run aborts its communicator first: a collective whose peer is
  // gone would keep the streams busy forever.
  if (status != LETHE_RT_OK)
    destroyCommState(this);
  // Best effort: the runtime is going away, errors have nowhere to go. But
  // streams that never drain (the watchdog fired, now or before) leave the
  // rest to the process's exit: cudaFree would wait for them.
  bool drained = !watchdogFired(this);
  if (drained) {
    BlockingCall call(this, "letheRtDestroy", "cudaStreamSynchronize");
    for (cudaStream_t s : streams)
      if (s)
        cudaStreamSynchronize(s);
    drained = call.finish() == LETHE_RT_OK;
  }
  stopWatchdog(this);
  destroyCommState(this);
  if (!drained)
    return;
  destroyGemmState(this);
  destroyCopyYield(this);
  for (cudaEvent_t e : events)
    cudaEventDestroy(e);
  for (cudaEvent_t e : profilePool)
    cudaEventDestroy(e);
  if (forkEvent)
    cudaEventDestroy(forkEvent);
  for (cudaEvent_t e : joinEvents)
    if (e)
      cudaEventDestroy(e);
  for (cudaStream_t s : streams)
    if (s)
      cudaStreamDestroy(s);
  cudaFree(deviceArena);
  cudaFree(scratch);
  cudaFreeHost(hostArena);
}

extern "C" void letheRtConfigInit(LetheRtConfig *config) {
  if (!config)
    return;
  std::memset(config, 0, sizeof(*config));
  config->device = -1;
  config->mode = LETHE_MODE_TIMING;
  config->gemmWorkspaceBytes = 32ull << 20;
}

/// Measures how long an empty replay kernel occupies the compute stream when
/// kernels run back to back (as a step's do), eagerly and inside a CUDA
/// graph, where it is shorter (0.68 against 1.49 us on an H200): a replay
/// spins for its op's time less the floor of the mode it runs in, so that
/// an op takes its time in both (with the eager floor, each replayed op of
/// a graph ran 0.8 us short: BERT's graph step 3.6% under its op times).
/// Eagerly: 64 kernels between two events, behind a 1 ms spin that keeps
/// the GPU busy while the host enqueues them, so host launch latency stays
/// out. In a graph: a graph of 64 kernels against one of 1. Medians of 5.
///
/// A round in which the spin ended before the host had enqueued the 64
/// kernels timed the host, not the kernels, and is not kept: on an H100
/// one program's floor came out 18.4 us against 1.8-2.1 for every other
/// (fidelity run of 2026-11-26), so each of its replays ran up to 16 us
/// short and its eager step 6% fast. Such a round doubles the spin for the
/// next; if fewer than 3 rounds keep the GPU busy, the least round is taken
/// (a host-bound round only overstates the floor) and the report says so
/// (`replay_floor_host_bound_rounds`).
static LetheRtStatus calibrateReplayFloor(LetheRt *rt) {
  cudaStream_t stream = rt->streams[LETHE_STREAM_COMPUTE];
  cudaEvent_t start, end, spun;
  const std::string at = "letheRtCreate (calibration)";
  if (checkCuda(rt, cudaEventCreate(&start), at, "cudaEventCreate") ||
      checkCuda(rt, cudaEventCreate(&end), at, "cudaEventCreate") ||
      checkCuda(rt,
                cudaEventCreateWithFlags(&spun, cudaEventDisableTiming), at,
                "cudaEventCreate"))
    return rt->status;
  uint64_t *sink = rt->scratch + kMaxKernelBuffers;
  uint64_t fillerCycles = (uint64_t)(1000 * rt->cyclesPerUs);
  // 1 ms spins, doubled after each host-bound round up to 16 ms.
  const uint64_t maxFillerCycles = 16 * fillerCycles;
  const int kernels = 64;
  auto empties = [&](int count) {
    cudaError_t err = cudaSuccess;
    for (int k = 0; k < count && err == cudaSuccess; ++k)
      err = launchReplay(nullptr, 0, nullptr, 0, 0, rt->numSMs, sink, stream);
    return err;
  };
  // Milliseconds between two events around `enqueue`, behind the filler;
  // `hostBound`: the filler had ended when the host finished enqueueing.
  auto timed = [&](const std::function<cudaError_t()> &enqueue, float &ms,
                   bool *hostBound = nullptr) {
    cudaError_t err = launchReplay(nullptr, 0, nullptr, 0, fillerCycles,
                                   rt->numSMs, sink, stream);
    if (err == cudaSuccess)
      err = cudaEventRecord(spun, stream);
    if (err == cudaSuccess)
      err = cudaEventRecord(start, stream);
    if (err == cudaSuccess)
      err = enqueue();
    if (err == cudaSuccess && hostBound) {
      cudaError_t query = cudaEventQuery(spun);
      *hostBound = query == cudaSuccess;
      if (query != cudaSuccess && query != cudaErrorNotReady)
        err = query;
    }
    if (err == cudaSuccess)
      err = cudaEventRecord(end, stream);
    if (err == cudaSuccess)
      err = cudaEventSynchronize(end);
    if (err == cudaSuccess)
      err = cudaEventElapsedTime(&ms, start, end);
    return err;
  };
  auto capture = [&](int count, cudaGraphExec_t &exec) {
    cudaGraph_t graph = nullptr;
    cudaError_t err =
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess) {
      cudaError_t inner = empties(count);
      err = cudaStreamEndCapture(stream, &graph);
      if (err == cudaSuccess)
        err = inner;
    }
    if (err == cudaSuccess)
      err = cudaGraphInstantiate(&exec, graph, 0);
    if (graph)
      cudaGraphDestroy(graph);
    return err;
  };
  std::vector<float> eager, hostBoundEager, graph;
  cudaGraphExec_t one = nullptr, many = nullptr;
  cudaError_t err = capture(1, one);
  if (err == cudaSuccess)
    err = capture(kernels, many);
  checkCuda(rt, err, at, "capturing empty replay kernels");
  // A warm-up round, then until 5 rounds kept the GPU busy (at most 12).
  for (int i = 0; i < 13 && eager.size() < 5 && rt->status == LETHE_RT_OK;
       ++i) {
    float ms = 0, oneMs = 0, manyMs = 0;
    bool hostBound = false;
    err = timed([&] { return empties(kernels); }, ms, &hostBound);
    if (err == cudaSuccess)
      err = timed([&] { return cudaGraphLaunch(one, stream); }, oneMs);
    if (err == cudaSuccess)
      err = timed([&] { return cudaGraphLaunch(many, stream); }, manyMs);
    if (checkCuda(rt, err, at, "timing empty replay kernels"))
      break;
    if (i == 0)
      continue;
    graph.push_back(std::max(0.0f, manyMs - oneMs) / (kernels - 1));
    if (!hostBound) {
      eager.push_back(ms / kernels);
      continue;
    }
    hostBoundEager.push_back(ms / kernels);
    fillerCycles = std::min(2 * fillerCycles, maxFillerCycles);
  }
  if (one)
    cudaGraphExecDestroy(one);
  if (many)
    cudaGraphExecDestroy(many);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaEventDestroy(spun);
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  rt->replayFloorHostBoundRounds = static_cast<int>(hostBoundEager.size());
  std::sort(graph.begin(), graph.end());
  if (eager.size() >= 3) {
    std::sort(eager.begin(), eager.end());
    rt->replayFloorUs = eager[eager.size() / 2] * 1000.0;
  } else {
    eager.insert(eager.end(), hostBoundEager.begin(), hostBoundEager.end());
    rt->replayFloorUs = *std::min_element(eager.begin(), eager.end()) * 1000.0;
  }
  rt->graphReplayFloorUs = graph[graph.size() / 2] * 1000.0;
  return LETHE_RT_OK;
}

/// MemAvailable of /proc/meminfo in bytes; 0 where unknown.
static uint64_t hostAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:")
      return kib * 1024;
  }
  return 0;
}

static LetheRtStatus createOnDevice(LetheRt *rt) {
  const std::string at = "letheRtCreate";
  const LetheRtConfig &c = rt->config;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return fail(rt, LETHE_RT_NO_DEVICE,
                at + ": cudaGetDeviceCount failed: " + cudaGetErrorString(err) +
                    " (" + cudaGetErrorName(err) +
                    "); no usable CUDA device or driver");
  if (count == 0)
    return fail(rt, LETHE_RT_NO_DEVICE, at + ": no CUDA device");
  rt->device = c.device;
  if (rt->device < 0) {
    const char *localRank = std::getenv("LOCAL_RANK");
    rt->device = localRank ? std::atoi(localRank) : 0;
  }
  if (rt->device >= count) {
    int requested = rt->device;
    rt->device = -1;
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": device " + std::to_string(requested) +
                    " requested, but only " + std::to_string(count) +
                    " present");
  }
  if (checkCuda(rt, cudaSetDevice(rt->device), at, "cudaSetDevice") ||
      checkCuda(rt, cudaFree(nullptr), at, "cudaFree(0) (context creation)"))
    return rt->status;

  cudaDeviceProp prop;
  if (checkCuda(rt, cudaGetDeviceProperties(&prop, rt->device), at,
                "cudaGetDeviceProperties") ||
      checkCuda(rt,
                cudaDeviceGetAttribute(&rt->smClockKHz, cudaDevAttrClockRate,
                                       rt->device),
                at, "cudaDeviceGetAttribute(clock rate)"))
    return rt->status;
  rt->numSMs = prop.multiProcessorCount;
  rt->deviceName = prop.name;
  size_t freeBytes = 0, totalBytes = 0;
  if (checkCuda(rt, cudaMemGetInfo(&freeBytes, &totalBytes), at,
                "cudaMemGetInfo"))
    return rt->status;
  rt->deviceTotalBytes = totalBytes;
  rt->usedAtContextBytes = totalBytes - freeBytes;

  for (int s = 0; s < LETHE_RT_NUM_STREAMS; ++s)
    if (checkCuda(
            rt,
            cudaStreamCreateWithFlags(&rt->streams[s], cudaStreamNonBlocking),
            at, "cudaStreamCreateWithFlags"))
      return rt->status;
  rt->events.assign(c.numEvents, nullptr);
  for (cudaEvent_t &e : rt->events)
    if (checkCuda(rt, cudaEventCreateWithFlags(&e, cudaEventDisableTiming), at,
                  "cudaEventCreateWithFlags"))
      return rt->status;
  if (checkCuda(
          rt, cudaEventCreateWithFlags(&rt->forkEvent, cudaEventDisableTiming),
          at, "cudaEventCreateWithFlags"))
    return rt->status;
  for (cudaEvent_t &e : rt->joinEvents)
    if (checkCuda(rt, cudaEventCreateWithFlags(&e, cudaEventDisableTiming), at,
                  "cudaEventCreateWithFlags"))
      return rt->status;

  if (c.deviceArenaBytes) {
    cudaError_t err = cudaMalloc(reinterpret_cast<void **>(&rt->deviceArena),
                                 c.deviceArenaBytes);
    if (err == cudaErrorMemoryAllocation)
      return fail(
          rt, LETHE_RT_OUT_OF_MEMORY,
          at + ": the device arena (" + std::to_string(c.deviceArenaBytes) +
              " bytes) does not fit on device " + std::to_string(rt->device) +
              " (" + rt->deviceName + "): " + std::to_string(freeBytes) +
              " bytes free of " + std::to_string(totalBytes) +
              " (cudaMalloc: out of memory)");
    if (checkCuda(rt, err, at,
                  ("cudaMalloc(device arena, " +
                   std::to_string(c.deviceArenaBytes) + " bytes)")
                      .c_str()))
      return rt->status;
  }
  if (c.hostArenaBytes) {
    // Pinning touches every page: an arena beyond what the host can give
    // ends in the kernel's OOM killer (SIGKILL, no message), not in an
    // error from cudaHostAlloc. Refuse it up front.
    uint64_t available = hostAvailableBytes();
    if (available && c.hostArenaBytes > available)
      return fail(rt, LETHE_RT_OUT_OF_MEMORY,
                  at + ": the host arena (" + std::to_string(c.hostArenaBytes) +
                      " bytes) cannot be pinned: the host has " +
                      std::to_string(available) +
                      " bytes available (MemAvailable in /proc/meminfo)");
    if (checkCuda(rt,
                  cudaHostAlloc(reinterpret_cast<void **>(&rt->hostArena),
                                c.hostArenaBytes, cudaHostAllocDefault),
                  at,
                  ("cudaHostAlloc(host arena, " +
                   std::to_string(c.hostArenaBytes) +
                   " bytes, pinned: cannot be pinned)")
                      .c_str()))
      return rt->status;
  }
  rt->scratchBytes = sizeof(uint64_t) * (kMaxKernelBuffers + 1 + kMaxChecksums);
  if (checkCuda(
          rt,
          cudaMalloc(reinterpret_cast<void **>(&rt->scratch), rt->scratchBytes),
          at, "cudaMalloc(scratch)") ||
      checkCuda(rt,
                cudaMemsetAsync(rt->scratch, 0, rt->scratchBytes,
                                rt->streams[LETHE_STREAM_COMPUTE]),
                at, "cudaMemsetAsync(scratch)"))
    return rt->status;
  // Checksum mode starts from a known state, so a read of a slot nothing
  // wrote gives the same wrong answer every time.
  if (c.mode == LETHE_MODE_CHECKSUM && rt->deviceArena &&
      checkCuda(rt,
                cudaMemsetAsync(rt->deviceArena, 0xA5, c.deviceArenaBytes,
                                rt->streams[LETHE_STREAM_COMPUTE]),
                at, "cudaMemsetAsync(device arena)"))
    return rt->status;
  if (initGemmState(rt) != LETHE_RT_OK)
    return rt->status;
  if (checkCuda(rt,
                measureClockRate(2000000, rt->streams[LETHE_STREAM_COMPUTE],
                                 &rt->cyclesPerUs),
                at, "measuring the SM clock"))
    return rt->status;
  if (calibrateReplayFloor(rt) != LETHE_RT_OK)
    return rt->status;
  if (initCopyYield(rt) != LETHE_RT_OK)
    return rt->status;
  // Everything above ran on the compute stream; the other streams start
  // from a finished setup.
  if (checkCuda(rt, cudaDeviceSynchronize(), at, "cudaDeviceSynchronize") ||
      checkCuda(rt, cudaMemGetInfo(&freeBytes, &totalBytes), at,
                "cudaMemGetInfo"))
    return rt->status;
  rt->usedAfterCreateBytes = totalBytes - freeBytes;
  return LETHE_RT_OK;
}

extern "C" LetheRtStatus letheRtCreate(const LetheRtConfig *config,
                                       LetheRt **out) {
  if (!out)
    return LETHE_RT_INVALID_ARGUMENT;
  LetheRt *rt = new LetheRt();
  *out = rt;
  if (config)
    rt->config = *config;
  else
    letheRtConfigInit(&rt->config);
  if (rt->config.mode != LETHE_MODE_TIMING &&
      rt->config.mode != LETHE_MODE_CHECKSUM &&
      rt->config.mode != LETHE_MODE_DRY_RUN)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                "letheRtCreate: unknown mode " +
                    std::to_string((int)rt->config.mode));
  rt->recorded.assign(rt->config.numEvents, 0);
  if (readTimeout(rt) != LETHE_RT_OK)
    return rt->status;
  if (rt->config.mode == LETHE_MODE_DRY_RUN) {
    rt->dryRun = true;
    if (initCopyYield(rt) != LETHE_RT_OK)
      return rt->status;
    rt->ready = true;
    return LETHE_RT_OK;
  }
  if (startWatchdog(rt) != LETHE_RT_OK || createOnDevice(rt) != LETHE_RT_OK)
    return rt->status;
  rt->ready = true;
  return LETHE_RT_OK;
}

extern "C" void letheRtDestroy(LetheRt *rt) { delete rt; }

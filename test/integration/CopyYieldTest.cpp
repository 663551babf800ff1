//===- CopyYieldTest.cpp - Copies that yield to collectives, on a GPU -----===//
//
// lethe-rt-yieldtest: checks on a device that a yielding copy waits while a
// collective window is open and runs as soon as it closes, eagerly and
// replayed from a CUDA graph, and that without yielding the same copy does
// not wait (so the check can fail). The window holds a 300 ms replay kernel
// (the comm stream waits for it inside the window); the host reads the
// pinned destination 100 ms in. Also: chunked copies round-trip exactly
// around real collectives on one rank. Prints one line per check and
// "N passed, M failed"; exits 1 on failure.
//
// lethe-rt-yieldtest --contention --world 2 --rank R --nccl-id-file F: one
// rank of a microbenchmark (bench/gpu_contention.sh runs it): all-gather
// time alone, beside D2H + H2D copies, and beside yielding copies, with
// compute gaps between the all-gathers as in an FSDP step; rank 0 prints a
// table, every rank its JSON on stderr.
//
// It reaches the runtime's streams (RuntimeImpl.h) only to capture a graph,
// as lethe-run does.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"
#include "lethe-c/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string &name, const std::string &detail = "") {
  ++(ok ? passed : failed);
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(),
              detail.empty() ? "" : ": ", detail.c_str());
}

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kCopyBytes = 16 * kMiB + 4321;
constexpr unsigned char kUntouched = 0xAB;

LetheRt *makeRuntime() {
  LetheRtConfig config;
  letheRtConfigInit(&config);
  config.deviceArenaBytes = 64 * kMiB;
  config.hostArenaBytes = 64 * kMiB;
  config.numEvents = 4;
  LetheRt *rt = nullptr;
  if (letheRtCreate(&config, &rt) != LETHE_RT_OK) {
    std::printf("FAIL create: %s\n", letheRtGetErrorMessage(rt));
    letheRtDestroy(rt);
    return nullptr;
  }
  return rt;
}

/// Bytes of the destination the copy has not written yet.
uint64_t untouchedBytes(LetheRt *rt) {
  auto *host = static_cast<unsigned char *>(letheRtHostPointer(rt, 0));
  uint64_t count = 0;
  for (uint64_t i = 0; i < kCopyBytes; ++i)
    count += host[i] == kUntouched;
  return count;
}

/// The step: compute spins 300 ms; the comm stream holds a window open
/// until then; the D2H stream copies once the window is open.
LetheRtStatus enqueueHeldCopy(LetheRt *rt) {
  letheRtStepBegin(rt);
  letheRtReplay(rt, "hold", 300000.0, nullptr, 0, nullptr, 0);
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
  letheRtCollectiveWindowBegin(rt);
  letheRtRecord(rt, LETHE_STREAM_COMM, 1);
  letheRtWait(rt, LETHE_STREAM_COMM, 0);
  letheRtCollectiveWindowEnd(rt);
  letheRtWait(rt, LETHE_STREAM_D2H, 1);
  letheRtCopyD2H(rt, 0, 0, kCopyBytes);
  return letheRtStepEnd(rt);
}

void testWindowHoldsCopies(bool yield, bool graph) {
  std::string tag = std::string(yield ? "yielding" : "not yielding") +
                    (graph ? ", CUDA graph" : ", eager");
  LetheRt *rt = makeRuntime();
  if (!rt)
    return ++failed, void();
  letheRtFill(rt, {0, 32 * kMiB}, LETHE_DTYPE_RAW, 5);
  letheRtSynchronize(rt);
  std::memset(letheRtHostPointer(rt, 0), kUntouched, kCopyBytes);
  letheRtSetCopyYield(rt, yield ? kMiB : 0);

  cudaGraph_t graphHandle = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaStream_t compute = rt->streams[LETHE_STREAM_COMPUTE];
  if (graph) {
    rt->capturing = true;
    cudaError_t err =
        cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal);
    LetheRtStatus s = err == cudaSuccess ? enqueueHeldCopy(rt) : LETHE_RT_OK;
    cudaError_t endErr = cudaStreamEndCapture(compute, &graphHandle);
    rt->capturing = false;
    if (err == cudaSuccess)
      err = endErr;
    if (err == cudaSuccess)
      err = cudaGraphInstantiate(&exec, graphHandle, 0);
    if (err == cudaSuccess)
      err = cudaGraphLaunch(exec, compute);
    check(err == cudaSuccess && s == LETHE_RT_OK,
          "the held copy captures and launches (" + tag + ")",
          err != cudaSuccess ? cudaGetErrorString(err)
                             : letheRtGetErrorMessage(rt));
  } else {
    enqueueHeldCopy(rt);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  uint64_t during = untouchedBytes(rt);
  LetheRtStatus s = letheRtSynchronize(rt);
  uint64_t after = untouchedBytes(rt);
  // Random bytes equal the marker about once in 256.
  bool copiedDuring = during < kCopyBytes / 16;
  if (yield)
    check(!copiedDuring, "a yielding copy waits while a window is open (" +
                             tag + ")",
          std::to_string(kCopyBytes - during) + " bytes copied at 100 ms");
  else
    check(copiedDuring,
          "a copy that does not yield runs inside the window (" + tag + ")",
          std::to_string(kCopyBytes - during) + " bytes copied at 100 ms");
  check(s == LETHE_RT_OK && after < kCopyBytes / 16,
        "the copy completes once the window closes (" + tag + ")",
        letheRtGetErrorMessage(rt));
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graphHandle)
    cudaGraphDestroy(graphHandle);
  letheRtDestroy(rt);
}

/// Yielding copies between real collectives (one rank) move every byte.
void testRoundTripAroundCollectives() {
  LetheRt *rt = makeRuntime();
  if (!rt)
    return ++failed, void();
  if (letheRtCommInit(rt, 1, 0, nullptr) == LETHE_RT_UNSUPPORTED) {
    std::printf("SKIP collectives: %s\n", letheRtGetErrorMessage(rt));
    letheRtDestroy(rt);
    return;
  }
  letheRtSetCopyYield(rt, kMiB);
  LetheRtBuf src = {0, 16 * kMiB}, dst = {16 * kMiB, 16 * kMiB},
             a = {32 * kMiB, 8 * kMiB}, b = {40 * kMiB, 8 * kMiB};
  letheRtFill(rt, src, LETHE_DTYPE_RAW, 11);
  letheRtFill(rt, dst, LETHE_DTYPE_RAW, 12);
  letheRtFill(rt, a, LETHE_DTYPE_F32, 13);
  letheRtResetStats(rt);
  letheRtStepBegin(rt);
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
  letheRtWait(rt, LETHE_STREAM_D2H, 0);
  letheRtWait(rt, LETHE_STREAM_COMM, 0);
  for (int i = 0; i < 8; ++i)
    letheRtAllGather(rt, "all_gather", a, b, LETHE_DTYPE_F32);
  letheRtCopyD2H(rt, src.offset, 0, src.bytes);
  letheRtRecord(rt, LETHE_STREAM_D2H, 1);
  letheRtWait(rt, LETHE_STREAM_H2D, 1);
  for (int i = 0; i < 8; ++i)
    letheRtAllReduce(rt, "all_reduce", a, b, LETHE_DTYPE_F32);
  letheRtCopyH2D(rt, 0, dst.offset, dst.bytes);
  letheRtRecord(rt, LETHE_STREAM_H2D, 2);
  letheRtRecord(rt, LETHE_STREAM_COMM, 3);
  letheRtWait(rt, LETHE_STREAM_COMPUTE, 2);
  letheRtWait(rt, LETHE_STREAM_COMPUTE, 3);
  letheRtChecksum(rt, "src", src);
  letheRtChecksum(rt, "dst", dst);
  letheRtStepEnd(rt);
  uint64_t v[2] = {};
  for (uint32_t i = 0; i < 2; ++i)
    letheRtGetChecksum(rt, i, nullptr, &v[i]);
  LetheRtStats stats;
  letheRtGetStats(rt, &stats);
  check(letheRtGetStatus(rt) == LETHE_RT_OK && v[0] == v[1] && v[0] != 0,
        "chunked copies round-trip around collectives",
        letheRtGetErrorMessage(rt));
  check(stats.copyChunks == 32 && stats.collectiveWindows == 16,
        "32 chunks and 16 collective windows",
        std::to_string(stats.copyChunks) + " chunks, " +
            std::to_string(stats.collectiveWindows) + " windows");
  letheRtDestroy(rt);
}

//===----------------------------------------------------------------------===//
// --contention: all-gather time alone, beside copies, beside yielding copies
//===----------------------------------------------------------------------===//

struct BenchOptions {
  int world = 2, rank = 0;
  std::string idFile;
  uint64_t sendMiB = 256, copyMiB = 1024, chunkMiB = 8;
  int copyRounds = 4, reps = 6;
  double gapUs = 15000;
};

struct BenchResult {
  std::vector<double> gatherMs;
  double d2hGBs = 0, h2dGBs = 0, wallMs = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

float elapsedMs(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms;
}

/// One run: compute spins `gapUs` before each all-gather (the comm stream
/// waits for it, as an FSDP prefetch waits for its layer), while both copy
/// streams (when `copies`) move copyRounds x copyMiB each way.
bool runVariant(LetheRt *rt, const BenchOptions &o, bool copies,
                uint64_t chunk, BenchResult &out) {
  const uint64_t copy = o.copyMiB * kMiB, send = o.sendMiB * kMiB;
  const uint64_t recvOffset = 2 * copy + send;
  letheRtSetCopyYield(rt, chunk);
  int n = o.reps;
  std::vector<cudaEvent_t> ev(2 * n + 6);
  for (cudaEvent_t &e : ev)
    cudaEventCreate(&e);
  cudaStream_t *st = rt->streams;
  letheRtStepBegin(rt);
  cudaEventRecord(ev[2 * n], st[LETHE_STREAM_COMPUTE]);
  if (copies) {
    cudaEventRecord(ev[2 * n + 1], st[LETHE_STREAM_D2H]);
    cudaEventRecord(ev[2 * n + 2], st[LETHE_STREAM_H2D]);
    for (int r = 0; r < o.copyRounds; ++r) {
      letheRtCopyD2H(rt, 0, 0, copy);
      letheRtCopyH2D(rt, copy, copy, copy);
    }
    cudaEventRecord(ev[2 * n + 3], st[LETHE_STREAM_D2H]);
    cudaEventRecord(ev[2 * n + 4], st[LETHE_STREAM_H2D]);
  }
  for (int i = 0; i < n; ++i) {
    letheRtReplay(rt, "gap", o.gapUs, nullptr, 0, nullptr, 0);
    letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
    letheRtWait(rt, LETHE_STREAM_COMM, 0);
    cudaEventRecord(ev[2 * i], st[LETHE_STREAM_COMM]);
    letheRtAllGather(rt, "all_gather", {2 * copy, send},
                     {recvOffset, send * (uint64_t)o.world}, LETHE_DTYPE_BF16);
    cudaEventRecord(ev[2 * i + 1], st[LETHE_STREAM_COMM]);
  }
  letheRtStepEnd(rt);
  cudaEventRecord(ev[2 * n + 5], st[LETHE_STREAM_COMPUTE]);
  bool ok = letheRtSynchronize(rt) == LETHE_RT_OK;
  out.gatherMs.clear();
  for (int i = 0; i < n; ++i)
    out.gatherMs.push_back(elapsedMs(ev[2 * i], ev[2 * i + 1]));
  out.wallMs = elapsedMs(ev[2 * n], ev[2 * n + 5]);
  if (copies) {
    double gb = (double)copy * o.copyRounds / 1e9;
    out.d2hGBs = gb / (elapsedMs(ev[2 * n + 1], ev[2 * n + 3]) / 1e3);
    out.h2dGBs = gb / (elapsedMs(ev[2 * n + 2], ev[2 * n + 4]) / 1e3);
  }
  for (cudaEvent_t e : ev)
    cudaEventDestroy(e);
  return ok;
}

int runContention(const BenchOptions &o) {
  LetheRtConfig config;
  letheRtConfigInit(&config);
  const uint64_t copy = o.copyMiB * kMiB, send = o.sendMiB * kMiB;
  config.deviceArenaBytes = 2 * copy + send * (1 + (uint64_t)o.world);
  config.hostArenaBytes = 2 * copy;
  config.numEvents = 1;
  LetheRt *rt = nullptr;
  if (letheRtCreate(&config, &rt) != LETHE_RT_OK ||
      letheRtCommInit(rt, o.world, o.rank,
                      o.idFile.empty() ? nullptr : o.idFile.c_str()) !=
          LETHE_RT_OK) {
    std::printf("contention: %s\n", letheRtGetErrorMessage(rt));
    letheRtDestroy(rt);
    return 1;
  }
  letheRtFill(rt, {0, config.deviceArenaBytes}, LETHE_DTYPE_RAW, 3);
  struct Variant {
    const char *name;
    bool copies;
    uint64_t chunk;
  } variants[] = {{"alone", false, 0},
                  {"overlap", true, 0},
                  {"yield", true, o.chunkMiB * kMiB}};
  BenchResult warm;
  runVariant(rt, o, false, 0, warm);
  double alone = 0;
  std::string json = "{\"rank\": " + std::to_string(o.rank) +
                     ", \"world\": " + std::to_string(o.world) +
                     ", \"mechanism\": \"" +
                     letheRtCopyYieldMechanism(rt) + "\", \"variants\": [";
  if (o.rank == 0)
    std::printf("copy-yield mechanism: %s\n"
                "| variant | all-gather ms (median) | vs alone | D2H GB/s | "
                "H2D GB/s | wall ms |\n|---|---|---|---|---|---|\n",
                letheRtCopyYieldMechanism(rt));
  bool ok = true;
  for (const Variant &v : variants) {
    BenchResult r;
    ok = runVariant(rt, o, v.copies, v.chunk, r) && ok;
    double med = median(r.gatherMs);
    if (!v.copies)
      alone = med;
    char line[512];
    std::snprintf(line, sizeof(line),
                  "| %s | %.3f | x%.3f | %.1f | %.1f | %.1f |\n", v.name, med,
                  alone > 0 ? med / alone : 0.0, r.d2hGBs, r.h2dGBs, r.wallMs);
    if (o.rank == 0)
      std::printf("%s", line);
    json += std::string(&v == variants ? "" : ", ") + "{\"name\": \"" +
            v.name + "\", \"gather_ms\": [";
    for (size_t i = 0; i < r.gatherMs.size(); ++i)
      json += (i ? ", " : "") + std::to_string(r.gatherMs[i]);
    json += "], \"d2h_gbs\": " + std::to_string(r.d2hGBs) +
            ", \"h2d_gbs\": " + std::to_string(r.h2dGBs) +
            ", \"wall_ms\": " + std::to_string(r.wallMs) + "}";
  }
  json += "], \"ok\": " + std::string(ok ? "true" : "false") +
          ", \"error\": \"" + letheRtGetErrorMessage(rt) + "\"}";
  std::fprintf(stderr, "%s\n", json.c_str());
  letheRtDestroy(rt);
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--contention") {
    BenchOptions o;
    for (int i = 2; i + 1 < argc; i += 2) {
      std::string name = argv[i], value = argv[i + 1];
      if (name == "--world")
        o.world = std::stoi(value);
      else if (name == "--rank")
        o.rank = std::stoi(value);
      else if (name == "--nccl-id-file")
        o.idFile = value;
      else if (name == "--send-mib")
        o.sendMiB = std::stoull(value);
      else if (name == "--copy-mib")
        o.copyMiB = std::stoull(value);
      else if (name == "--chunk-mib")
        o.chunkMiB = std::stoull(value);
      else if (name == "--copy-rounds")
        o.copyRounds = std::stoi(value);
      else if (name == "--reps")
        o.reps = std::stoi(value);
      else if (name == "--gap-us")
        o.gapUs = std::stod(value);
      else {
        std::printf("unknown option %s\n", name.c_str());
        return 2;
      }
    }
    return runContention(o);
  }
  LetheRt *rt = makeRuntime();
  if (!rt) {
    std::printf("0 passed, 1 failed\n");
    return 1;
  }
  std::string mechanism = letheRtCopyYieldMechanism(rt);
  std::printf("copy-yield mechanism: %s\n", mechanism.c_str());
  check(mechanism.rfind("none", 0) != 0, "a copy-yield mechanism exists",
        mechanism);
  letheRtDestroy(rt);
  for (bool graph : {false, true}) {
    testWindowHoldsCopies(/*yield=*/true, graph);
    testWindowHoldsCopies(/*yield=*/false, graph);
  }
  testRoundTripAroundCollectives();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

//===- CollectiveBench.cpp - lethe-rt-bench --collectives -----------------===//
//
// How host copies and NCCL collectives slow each other down on the machine
// it runs on: the factors of a device profile (collective_slowdown_with_
// copies, collective_slowdown_with_both_copies, copy_slowdown_with_
// collectives, the collectives' bus bandwidth), measured through the
// runtime's own calls. One process per GPU, every rank running the same
// sequence (the collectives pair up in order):
//
//   - all-gather and reduce-scatter of `--mib` MiB per rank alone, beside a
//     D2H copy, and beside D2H + H2D copies (the copies repeated until they
//     cover the collective, so it runs contended from start to end);
//   - D2H / H2D pinned copies of `--copy-mib` MiB alone, both at once, and
//     during a back-to-back loop of each collective (the loop as long as the
//     copy, its length agreed on by all ranks).
//
// Every figure is the median of `--reps` timed rounds after one warm-up.
// Each round starts on all GPUs together: a small all-reduce (a barrier),
// then a spin that gives the host time to enqueue the round. The report is
// one JSON object (stdout and --json). `--dry-run` validates the whole
// sequence with a dry-run runtime (no device, no NCCL) and reports zeros.
//
//===----------------------------------------------------------------------===//

#include "Json.h"
#include "RuntimeImpl.h"
#include "Samples.h"
#include "lethe/Runtime/Tools.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

using namespace lethe::rt;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

const char *kCollectiveUsage =
    "usage: lethe-rt-bench --collectives --world=N --rank=R "
    "[--nccl-id-file=PATH]\n"
    "         [--mib=256] [--copy-mib=1024] [--reps=7] [--device=N]\n"
    "         [--json=PATH] [--dry-run] [--yield-chunk-mib=8]\n";

enum class Kind { AllGather, ReduceScatter };
const char *kindName(Kind k) {
  return k == Kind::AllGather ? "all_gather" : "reduce_scatter";
}

struct CollectiveBench {
  LetheRt *rt = nullptr;
  bool dry = false, ok = true;
  int world = 1, rank = 0, reps = 7;
  uint64_t shard = 256 * kMiB, copy = 1024 * kMiB;
  std::string error;

  // Device arena: all-gather send (shard) and receive (world x shard),
  // reduce-scatter send (world x shard) and receive (shard), the D2H source
  // and H2D destination (copy each), a 256-byte barrier / agreement slot.
  LetheRtBuf agSend{}, agRecv{}, rsSend{}, rsRecv{}, barrier{}, agree{};
  uint64_t d2hSrc = 0, h2dDst = 0, deviceBytes = 0;
  // Host arena: D2H destination, H2D source.
  uint64_t d2hDst = 0, h2dSrc = 0, hostBytes = 0;

  cudaEvent_t startEvent = nullptr, barrierEvent = nullptr;
  cudaEvent_t endEvents[LETHE_RT_NUM_STREAMS] = {};

  void layout() {
    auto align = [](uint64_t x) { return (x + 4095) & ~4095ull; };
    uint64_t at = 0;
    auto take = [&](uint64_t bytes) {
      LetheRtBuf b{at, bytes};
      at = align(at + bytes);
      return b;
    };
    agSend = take(shard);
    agRecv = take(shard * world);
    rsSend = take(shard * world);
    rsRecv = take(shard);
    d2hSrc = take(copy).offset;
    h2dDst = take(copy).offset;
    barrier = take(256);
    agree = {barrier.offset + 128, 16 * (uint64_t)world};
    barrier.bytes = 64;
    deviceBytes = at;
    d2hDst = 0;
    h2dSrc = align(copy);
    hostBytes = h2dSrc + copy;
  }

  bool check(LetheRtStatus s) {
    if (s != LETHE_RT_OK && ok) {
      error = letheRtGetErrorMessage(rt);
      ok = false;
    }
    return ok;
  }
  bool check(cudaError_t err, const char *what) {
    if (err != cudaSuccess && ok) {
      error = std::string(what) + " failed: " + cudaGetErrorString(err);
      ok = false;
    }
    return ok;
  }

  void collective(Kind k) {
    if (k == Kind::AllGather)
      check(letheRtAllGather(rt, "bench all_gather", agSend, agRecv,
                             LETHE_DTYPE_BF16));
    else
      check(letheRtReduceScatter(rt, "bench reduce_scatter", rsSend, rsRecv,
                                 LETHE_DTYPE_BF16));
  }
  void copyD2H() { check(letheRtCopyD2H(rt, d2hSrc, d2hDst, copy)); }
  void copyH2D() { check(letheRtCopyH2D(rt, h2dSrc, h2dDst, copy)); }

  /// What one round enqueues on a stream: `count` calls of `enqueue`.
  struct Lane {
    int stream;
    int count;
    std::function<void()> enqueue;
  };

  /// Milliseconds each lane takes from a common start, per round (median,
  /// min, max over the timed rounds). The lanes' work starts together on
  /// this GPU and, through the barrier, on every rank's.
  std::vector<SampleSummary> round(const std::vector<Lane> &lanes) {
    std::vector<std::vector<double>> samples(lanes.size());
    for (int r = 0; ok && r < reps + 1; ++r) {
      check(letheRtAllReduce(rt, "bench barrier", barrier, barrier,
                             LETHE_DTYPE_F32));
      if (!dry) {
        check(cudaEventRecord(barrierEvent, rt->streams[LETHE_STREAM_COMM]),
              "cudaEventRecord");
        check(cudaStreamWaitEvent(rt->streams[LETHE_STREAM_COMPUTE],
                                  barrierEvent, 0),
              "cudaStreamWaitEvent");
      }
      // Gives the host time to enqueue the round before it starts.
      check(letheRtReplay(rt, "bench queue filler", 500.0, nullptr, 0, nullptr,
                          0));
      if (!dry)
        check(cudaEventRecord(startEvent, rt->streams[LETHE_STREAM_COMPUTE]),
              "cudaEventRecord");
      for (size_t i = 0; ok && i < lanes.size(); ++i) {
        cudaStream_t s = rt->streams[lanes[i].stream];
        if (!dry)
          check(cudaStreamWaitEvent(s, startEvent, 0), "cudaStreamWaitEvent");
        for (int c = 0; c < lanes[i].count; ++c)
          lanes[i].enqueue();
        if (!dry)
          check(cudaEventRecord(endEvents[i], s), "cudaEventRecord");
      }
      check(letheRtSynchronize(rt));
      for (size_t i = 0; !dry && ok && i < lanes.size(); ++i) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, startEvent, endEvents[i]),
              "cudaEventElapsedTime");
        if (r > 0) // the first round is warm-up
          samples[i].push_back(ms);
      }
    }
    std::vector<SampleSummary> result;
    for (auto &s : samples)
      result.push_back(summarize(s));
    return result;
  }

  /// The largest of every rank's `value` (all ranks must agree on loop
  /// lengths, or their collectives would not pair up).
  int agreeMax(int value) {
    if (dry)
      return std::max(value, 1);
    uint32_t mine[4] = {(uint32_t)value, 0, 0, 0};
    LetheRtBuf send{agree.offset, 16};
    check(cudaMemcpy(rt->deviceArena + send.offset, mine, 16,
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    // A pageable cudaMemcpy may return before its DMA lands.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(letheRtAllGather(rt, "bench agree", send, agree, LETHE_DTYPE_RAW));
    check(letheRtSynchronize(rt));
    std::vector<uint32_t> all(4 * world);
    check(cudaMemcpy(all.data(), rt->deviceArena + agree.offset, agree.bytes,
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    int best = value;
    for (int r = 0; r < world; ++r)
      best = std::max(best, (int)all[4 * r]);
    return std::max(best, 1);
  }

  double gbps(uint64_t bytes, double ms) const {
    return ms > 0 ? bytes / ms / 1e6 : 0;
  }
  /// NCCL's bus bandwidth of an all-gather / reduce-scatter moving world x
  /// shard bytes: (world - 1) / world of it crosses each rank's link.
  double busGbps(double ms) const {
    return ms > 0 ? (double)(world - 1) / world * shard * world / ms / 1e6 : 0;
  }
};

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

} // namespace

int lethe::rt::collectiveBenchMain(int argc, char **argv) {
  CollectiveBench b;
  int device = -1;
  std::string idFile, jsonPath;
  // Chunk of the yielding copies (beside_both_yield); 0: not measured.
  uint64_t yieldChunk = 8 * kMiB;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    if (eq != std::string::npos)
      value = arg.substr(eq + 1);
    auto number = [&](int lo) {
      char *end = nullptr;
      long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || v < lo) {
        std::cerr << "lethe-rt-bench: bad argument '" << arg << "'\n"
                  << kCollectiveUsage;
        std::exit(2);
      }
      return (int)v;
    };
    if (arg == "--collectives")
      continue;
    if (arg == "--help" || arg == "-h") {
      std::cout << kCollectiveUsage;
      return 0;
    }
    if (arg == "--dry-run")
      b.dry = true;
    else if (name == "--world")
      b.world = number(1);
    else if (name == "--rank")
      b.rank = number(0);
    else if (name == "--device")
      device = number(0);
    else if (name == "--mib")
      b.shard = (uint64_t)number(1) * kMiB;
    else if (name == "--copy-mib")
      b.copy = (uint64_t)number(1) * kMiB;
    else if (name == "--reps")
      b.reps = number(1);
    else if (name == "--nccl-id-file")
      idFile = value;
    else if (name == "--json")
      jsonPath = value;
    else if (name == "--yield-chunk-mib")
      yieldChunk = (uint64_t)number(0) * kMiB;
    else {
      std::cerr << "lethe-rt-bench: bad argument '" << arg << "'\n"
                << kCollectiveUsage;
      return 2;
    }
  }
  if (b.rank >= b.world) {
    std::cerr << "lethe-rt-bench: --rank must be below --world\n"
              << kCollectiveUsage;
    return 2;
  }
  b.layout();

  LetheRtConfig config;
  letheRtConfigInit(&config);
  config.device = device;
  config.mode = b.dry ? LETHE_MODE_DRY_RUN : LETHE_MODE_TIMING;
  config.deviceArenaBytes = b.deviceBytes;
  config.hostArenaBytes = b.hostBytes;
  LetheRtStatus created = letheRtCreate(&config, &b.rt);
  b.check(created);
  if (b.ok)
    b.check(letheRtCommInit(b.rt, b.world, b.rank,
                            idFile.empty() ? nullptr : idFile.c_str()));
  if (b.ok && !b.dry) {
    b.check(cudaEventCreate(&b.startEvent), "cudaEventCreate");
    b.check(cudaEventCreate(&b.barrierEvent), "cudaEventCreate");
    for (cudaEvent_t &e : b.endEvents)
      b.check(cudaEventCreate(&e), "cudaEventCreate");
  }
  // Contents: bf16 in [-1, 1) (sums stay finite), host source bytes set.
  b.check(letheRtFill(b.rt, b.agSend, LETHE_DTYPE_BF16, 1 + b.rank));
  b.check(letheRtFill(b.rt, b.rsSend, LETHE_DTYPE_BF16, 101 + b.rank));
  b.check(letheRtFill(b.rt, {b.d2hSrc, b.copy}, LETHE_DTYPE_BF16, 7));
  b.check(letheRtFill(b.rt, b.barrier, LETHE_DTYPE_F32, 3));
  if (void *host = letheRtHostPointer(b.rt, b.h2dSrc))
    std::memset(host, 0x3c, b.copy);
  b.check(letheRtSynchronize(b.rt));

  using Lane = CollectiveBench::Lane;
  auto d2hLane = [&](int count) {
    return Lane{LETHE_STREAM_D2H, count, [&] { b.copyD2H(); }};
  };
  auto h2dLane = [&](int count) {
    return Lane{LETHE_STREAM_H2D, count, [&] { b.copyH2D(); }};
  };
  auto collLane = [&](Kind k, int count) {
    return Lane{LETHE_STREAM_COMM, count, [&b, k] { b.collective(k); }};
  };

  JsonWriter json;
  json.beginObject();
  json.field("mode", "collectives");
  json.field("dry_run", b.dry);
  json.field("world", b.world);
  json.field("rank", b.rank);
  json.field("device", b.rt ? b.rt->deviceName : std::string());
  json.field("ordinal", b.rt ? b.rt->device : -1);
  for (const char *env :
       {"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE",
        "NCCL_PROTO", "NCCL_ALGO", "CUDA_VISIBLE_DEVICES"}) {
    const char *v = std::getenv(env);
    json.field(std::string("env_") + env, v ? v : "");
  }
  json.field("shard_bytes", b.shard);
  json.field("copy_bytes", b.copy);
  json.field("reps", b.reps);

  // Copies alone (every rank copying at once, as in training).
  SampleSummary d2hAlone{}, h2dAlone{};
  if (b.ok) {
    d2hAlone = b.round({d2hLane(1)})[0];
    h2dAlone = b.round({h2dLane(1)})[0];
    std::vector<SampleSummary> both = b.round({d2hLane(1), h2dLane(1)});
    json.key("copies").beginObject();
    writeSummary(json, "d2h_alone_ms", d2hAlone);
    writeSummary(json, "h2d_alone_ms", h2dAlone);
    writeSummary(json, "d2h_both_ms", both.size() > 0 ? both[0] : SampleSummary{});
    writeSummary(json, "h2d_both_ms", both.size() > 1 ? both[1] : SampleSummary{});
    json.field("d2h_gb_per_s", b.gbps(b.copy, d2hAlone.median));
    json.field("h2d_gb_per_s", b.gbps(b.copy, h2dAlone.median));
    json.field("d2h_gb_per_s_both",
               both.size() > 0 ? b.gbps(b.copy, both[0].median) : 0.0);
    json.field("h2d_gb_per_s_both",
               both.size() > 1 ? b.gbps(b.copy, both[1].median) : 0.0);
    json.endObject();
  }

  for (Kind k : {Kind::AllGather, Kind::ReduceScatter}) {
    if (!b.ok)
      break;
    SampleSummary alone = b.round({collLane(k, 1)})[0];
    // Copies repeated until they cover the contended collective (up to the
    // slowdown factor 3 assumed here), so it never runs uncontended.
    double copyMs = std::max(d2hAlone.median, h2dAlone.median);
    int copyRepeats =
        copyMs > 0 ? std::max(1, (int)std::ceil(3.0 * alone.median / copyMs))
                   : 1;
    std::vector<SampleSummary> besideD2H =
        b.round({collLane(k, 1), d2hLane(copyRepeats)});
    std::vector<SampleSummary> besideBoth =
        b.round({collLane(k, 1), d2hLane(copyRepeats), h2dLane(copyRepeats)});
    // The same with copies that yield to collectives (lib/Runtime/
    // CopyYield.cpp): chunks wait while the collective's window is open.
    std::vector<SampleSummary> besideBothYield;
    if (yieldChunk) {
      b.check(letheRtSetCopyYield(b.rt, yieldChunk));
      besideBothYield = b.round(
          {collLane(k, 1), d2hLane(copyRepeats), h2dLane(copyRepeats)});
      b.check(letheRtSetCopyYield(b.rt, 0));
    }
    // Collectives back to back for 1.5x the copy (the copy slowed by up to
    // x1.5 is still inside the loop); all ranks run the longest loop.
    int loop = alone.median > 0
                   ? (int)std::ceil(1.5 * 1.5 * copyMs / alone.median)
                   : 1;
    loop = b.agreeMax(std::min(loop, 2000));
    std::vector<SampleSummary> d2hDuring = b.round({collLane(k, loop), d2hLane(1)});
    std::vector<SampleSummary> h2dDuring = b.round({collLane(k, loop), h2dLane(1)});
    std::vector<SampleSummary> bothDuring =
        b.round({collLane(k, loop), d2hLane(1), h2dLane(1)});
    if (!b.ok)
      break;
    auto at = [](const std::vector<SampleSummary> &v, size_t i) {
      return i < v.size() ? v[i] : SampleSummary{};
    };
    json.key(kindName(k)).beginObject();
    writeSummary(json, "alone_ms", alone);
    writeSummary(json, "beside_d2h_ms", at(besideD2H, 0));
    writeSummary(json, "beside_both_ms", at(besideBoth, 0));
    json.field("bus_gb_per_s", b.busGbps(alone.median));
    json.field("slowdown_beside_d2h",
               ratio(at(besideD2H, 0).median, alone.median));
    json.field("slowdown_beside_both",
               ratio(at(besideBoth, 0).median, alone.median));
    if (yieldChunk) {
      writeSummary(json, "beside_both_yield_ms", at(besideBothYield, 0));
      json.field("slowdown_beside_both_yield",
                 ratio(at(besideBothYield, 0).median, alone.median));
      json.field("yield_chunk_bytes", yieldChunk);
      json.field("copy_yield_mechanism", letheRtCopyYieldMechanism(b.rt));
    }
    json.field("copy_repeats", copyRepeats);
    // Whether the copies outlasted the collective (else part of it ran
    // uncontended and the slowdown is understated).
    json.field("covered_d2h",
               at(besideD2H, 1).median >= at(besideD2H, 0).median);
    json.field("covered_both",
               std::min(at(besideBoth, 1).median, at(besideBoth, 2).median) >=
                   at(besideBoth, 0).median);
    json.field("loop", loop);
    writeSummary(json, "loop_ms", at(d2hDuring, 0));
    writeSummary(json, "d2h_during_ms", at(d2hDuring, 1));
    writeSummary(json, "h2d_during_ms", at(h2dDuring, 1));
    writeSummary(json, "d2h_both_during_ms", at(bothDuring, 1));
    writeSummary(json, "h2d_both_during_ms", at(bothDuring, 2));
    json.field("d2h_gb_per_s_during", b.gbps(b.copy, at(d2hDuring, 1).median));
    json.field("h2d_gb_per_s_during", b.gbps(b.copy, at(h2dDuring, 1).median));
    json.field("d2h_gb_per_s_both_during",
               b.gbps(b.copy, at(bothDuring, 1).median));
    json.field("h2d_gb_per_s_both_during",
               b.gbps(b.copy, at(bothDuring, 2).median));
    json.field("covered_copies",
               at(d2hDuring, 0).median >= at(d2hDuring, 1).median &&
                   at(h2dDuring, 0).median >= at(h2dDuring, 1).median);
    json.endObject();
  }

  LetheRtStats stats;
  letheRtGetStats(b.rt, &stats);
  json.field("collectives_enqueued", stats.collectives);
  json.field("bytes_collective", stats.bytesCollective);
  json.field("bytes_d2h", stats.bytesD2H);
  json.field("bytes_h2d", stats.bytesH2D);
  json.field("ok", b.ok);
  if (!b.ok)
    json.field("error", b.error);
  json.endObject();

  if (b.startEvent)
    cudaEventDestroy(b.startEvent);
  if (b.barrierEvent)
    cudaEventDestroy(b.barrierEvent);
  for (cudaEvent_t e : b.endEvents)
    if (e)
      cudaEventDestroy(e);
  letheRtDestroy(b.rt);

  std::cout << json.str();
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << json.str();
  }
  if (!b.ok)
    std::cerr << "lethe-rt-bench: rank " << b.rank << ": " << b.error << "\n";
  return b.ok ? 0 : 1;
}

//===- CalibrateHost.cpp - lethe-calibrate: GPUs sharing one host ---------===//
//
// With several GPUs visible, lethe-calibrate measures from one process:
//   - pinned copies of k = 1, 2, 4, ... and all GPUs at once, each
//     direction and both (how the ranks of one host share its bandwidth);
//   - NCCL all-gather and all-reduce over all GPUs by size (bus bandwidth
//     and fixed cost), an all-gather beside copies on every GPU, and every
//     GPU's copies during all-gathers (the copy / collective factors).
// Each GPU has its own streams, a device buffer and a pinned host buffer
// (portable, allocated by this thread: on a host of several NUMA nodes
// some GPUs copy across the inter-socket link, as ranks without NUMA
// binding do). Collective failures do not fail the run: the profile is
// written without collective fields and the summary says why.
//
//===----------------------------------------------------------------------===//

#include "CalibrateImpl.h"

#if LETHE_RT_HAVE_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace lethe::rt;
using namespace lethe::rt::calibrate;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

struct Gpu {
  int device = 0;
  cudaStream_t d2h = nullptr, h2d = nullptr, comm = nullptr;
  /// [0, C) D2H source, [C, 2C) H2D destination.
  unsigned char *dev = nullptr;
  /// [0, C) D2H destination, [C, 2C) H2D source.
  unsigned char *host = nullptr;
  /// Collective buffers: a shard to gather, and the gathered (or reduced)
  /// buffer of `ranks` shards.
  unsigned char *send = nullptr, *recv = nullptr;
#if LETHE_RT_HAVE_NCCL
  ncclComm_t nccl = nullptr;
#endif
};

struct Host {
  const Options &options;
  Measurements &m;
  Errors &errors;
  LaneTimer timer;
  std::vector<Gpu> gpus;
  uint64_t copyBytes;
  int reps;

  Host(const Options &options, Measurements &m, Errors &errors)
      : options(options), m(m), errors(errors),
        timer(errors, m, options.noGate) {
    copyBytes = (options.quick ? 128 : 512) * kMiB;
    reps = options.quick ? 3 : 5;
  }
  ~Host() {
    for (Gpu &g : gpus) {
      cudaSetDevice(g.device);
      cudaDeviceSynchronize();
#if LETHE_RT_HAVE_NCCL
      if (g.nccl)
        ncclCommDestroy(g.nccl);
#endif
      for (cudaStream_t s : {g.d2h, g.h2d, g.comm})
        if (s)
          cudaStreamDestroy(s);
      cudaFree(g.dev);
      cudaFree(g.send);
      cudaFree(g.recv);
      if (g.host)
        cudaFreeHost(g.host);
    }
  }

  bool setup(int n) {
    gpus.resize(n);
    for (int d = 0; d < n && errors.ok(); ++d) {
      Gpu &g = gpus[d];
      g.device = d;
      errors.cuda(cudaSetDevice(d), "cudaSetDevice");
      for (cudaStream_t *s : {&g.d2h, &g.h2d, &g.comm})
        errors.cuda(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking),
                    "cudaStreamCreate");
      errors.cuda(cudaMalloc(&g.dev, 2 * copyBytes), "cudaMalloc");
      void *host = nullptr;
      errors.cuda(cudaHostAlloc(&host, 2 * copyBytes, cudaHostAllocPortable),
                  "cudaHostAlloc(" + std::to_string(2 * copyBytes >> 20) +
                      " MiB pinned)");
      g.host = static_cast<unsigned char *>(host);
      if (errors.ok()) {
        std::memset(g.host, 0x3c, 2 * copyBytes);
        errors.cuda(cudaMemset(g.dev, 0x3c, 2 * copyBytes), "cudaMemset");
      }
    }
    // The gate's pinned words, once every GPU has its context.
    return errors.ok() && timer.init();
  }

  /// `count` copies of `bytes` on GPU g's copy stream.
  Lane copies(int g, bool toHost, uint64_t bytes, int count) {
    Gpu &gpu = gpus[g];
    return {{{gpu.device, toHost ? gpu.d2h : gpu.h2d}},
            [this, &gpu, toHost, bytes, count] {
              for (int i = 0; i < count; ++i) {
                uint64_t at = (uint64_t)i * bytes % copyBytes;
                errors.cuda(
                    toHost ? cudaMemcpyAsync(gpu.host + at, gpu.dev + at, bytes,
                                             cudaMemcpyDeviceToHost, gpu.d2h)
                           : cudaMemcpyAsync(gpu.dev + copyBytes + at,
                                             gpu.host + copyBytes + at, bytes,
                                             cudaMemcpyHostToDevice, gpu.h2d),
                    "cudaMemcpyAsync");
              }
            },
            count};
  }

  /// k GPUs copying at once: per-GPU GB/s.
  HostPoint together(int k, uint64_t bytes) {
    int count = itemsPerRound((double)copyBytes / bytes);
    double moved = (double)bytes * count;
    HostPoint p;
    p.gpus = k;
    p.bytes = bytes;
    auto rates = [&](const std::vector<double> &ms) {
      std::vector<double> r;
      for (double t : ms)
        r.push_back(t > 0 ? moved / t / 1e6 : 0);
      return r;
    };
    auto meanMin = [](const std::vector<double> &r, double &mean,
                      double &least) {
      mean = 0;
      least = r.empty() ? 0 : r.front();
      for (double x : r) {
        mean += x / r.size();
        least = std::min(least, x);
      }
    };
    std::vector<Lane> d2h, h2d, both;
    for (int g = 0; g < k; ++g) {
      d2h.push_back(copies(g, true, bytes, count));
      h2d.push_back(copies(g, false, bytes, count));
      both.push_back(copies(g, true, bytes, count));
      both.push_back(copies(g, false, bytes, count));
    }
    meanMin(rates(timer.run(d2h, reps)), p.d2hGBs, p.d2hMinGBs);
    meanMin(rates(timer.run(h2d, reps)), p.h2dGBs, p.h2dMinGBs);
    std::vector<double> r = rates(timer.run(both, reps)), perGpu;
    for (size_t g = 0; g + 1 < r.size(); g += 2)
      perGpu.push_back(r[g] + r[g + 1]);
    meanMin(perGpu, p.bothGBs, p.bothMinGBs);
    return p;
  }

  void copySweep() {
    int n = (int)gpus.size();
    for (int k = 1; k < n && errors.ok(); k *= 2)
      m.host.push_back(together(k, copyBytes));
    if (errors.ok())
      m.host.push_back(together(n, copyBytes));
    for (uint64_t bytes : {8 * kMiB, 64 * kMiB})
      if (errors.ok() && bytes < copyBytes)
        m.host.push_back(together(n, bytes));
  }

  void collectives(Errors &failed);
};

#if LETHE_RT_HAVE_NCCL
bool ncclOk(Errors &errors, ncclResult_t r, const char *what) {
  if (r != ncclSuccess)
    errors.fail(std::string(what) + " failed: " + ncclGetErrorString(r));
  return errors.ok();
}
#endif

void Host::collectives(Errors &e) {
#if LETHE_RT_HAVE_NCCL
  int n = (int)gpus.size();
  std::vector<uint64_t> shards =
      options.quick ? std::vector<uint64_t>{1 * kMiB, 16 * kMiB, 64 * kMiB}
                    : std::vector<uint64_t>{1 * kMiB, 4 * kMiB, 16 * kMiB,
                                            64 * kMiB, 256 * kMiB};
  uint64_t shard = shards.back();
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devices(n);
  for (int d = 0; d < n; ++d)
    devices[d] = d;
  if (!ncclOk(e, ncclCommInitAll(comms.data(), n, devices.data()),
              "ncclCommInitAll"))
    return;
  for (int d = 0; d < n; ++d) {
    Gpu &g = gpus[d];
    g.nccl = comms[d];
    e.cuda(cudaSetDevice(d), "cudaSetDevice");
    e.cuda(cudaMalloc(&g.send, shard), "cudaMalloc(collective buffers)");
    e.cuda(cudaMalloc(&g.recv, shard * n), "cudaMalloc(collective buffers)");
    if (e.ok()) {
      e.cuda(cudaMemset(g.send, 0x3c, shard), "cudaMemset");
      e.cuda(cudaMemset(g.recv, 0x3c, shard * n), "cudaMemset");
    }
  }
  if (!e.ok())
    return;
  std::vector<Endpoint> all;
  for (Gpu &g : gpus)
    all.push_back({g.device, g.comm});
  auto call = [this, &e](bool gather, uint64_t bytes) {
    ncclOk(e, ncclGroupStart(), "ncclGroupStart");
    for (Gpu &g : gpus)
      if (gather)
        ncclOk(e,
               ncclAllGather(g.send, g.recv, bytes, ncclInt8, g.nccl, g.comm),
               "ncclAllGather");
      else
        ncclOk(e,
               ncclAllReduce(g.recv, g.recv, bytes * gpus.size() / 2,
                             ncclBfloat16, ncclSum, g.nccl, g.comm),
               "ncclAllReduce");
    ncclOk(e, ncclGroupEnd(), "ncclGroupEnd");
  };
  // An NCCL call enqueues a kernel and may add event records and waits.
  const int opsPerCall = 4;
  auto lane = [&](bool gather, uint64_t bytes, int calls) {
    return Lane{all,
                [=] {
                  for (int i = 0; i < calls; ++i)
                    call(gather, bytes);
                },
                opsPerCall * calls};
  };
  // Every size runs once outside the timer first: NCCL connects lazily,
  // and must not do so while the GPUs hold at the start gate.
  auto sync = [&] {
    for (Gpu &g : gpus) {
      cudaSetDevice(g.device);
      e.cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  };
  for (uint64_t s : shards)
    for (bool gather : {true, false})
      if (e.ok())
        call(gather, s);
  sync();

  // Failures from here on go to `e`: they skip the collectives only.
  LaneTimer collectiveTimer(e, m, options.noGate);
  collectiveTimer.phase = "collectives";
  if (!collectiveTimer.init())
    return;
  for (uint64_t s : shards)
    for (bool gather : {true, false}) {
      if (!e.ok())
        return;
      int calls = itemsPerRound(s <= 4 * kMiB    ? 12
                                : s <= 64 * kMiB ? 5
                                                 : 2,
                                opsPerCall);
      double ms = collectiveTimer.run({lane(gather, s, calls)}, reps)[0];
      m.collectives.push_back(
          {gather ? "all_gather" : "all_reduce", n, s * n, ms * 1000 / calls});
    }

  // Contention at the largest size, against copies on every GPU.
  const HostPoint *alone = nullptr;
  for (const HostPoint &p : m.host)
    if (p.gpus == n && p.bytes == copyBytes)
      alone = &p;
  if (!alone || !(alone->d2hGBs > 0) || !(alone->h2dGBs > 0))
    return;
  m.contendedCollectiveBytes = shard * n;
  m.hostD2HAloneGBs = alone->d2hGBs;
  m.hostH2DAloneGBs = alone->h2dGBs;
  double copyMs = copyBytes / std::min(alone->d2hGBs, alone->h2dGBs) / 1e6;
  double estimateMs = collectiveTimer.run({lane(true, shard, 1)}, 2)[0];
  if (!(estimateMs > 0))
    return;
  // Copies outlast the collective slowed down by up to 3x.
  int repeats = itemsPerRound(3 * estimateMs / copyMs);
  std::vector<Lane> d2h{lane(true, shard, 1)}, bothLanes{lane(true, shard, 1)};
  for (int g = 0; g < n; ++g) {
    d2h.push_back(copies(g, true, copyBytes, repeats));
    bothLanes.push_back(copies(g, true, copyBytes, repeats));
    bothLanes.push_back(copies(g, false, copyBytes, repeats));
  }
  // Alone and beside copies in alternating rounds, so their ratio does
  // not depend on which ran first.
  std::vector<std::vector<double>> t = collectiveTimer.runInterleaved(
      {{lane(true, shard, 1)}, d2h, bothLanes}, reps);
  m.collectiveAloneMs = t[0][0];
  m.collectiveBesideD2HMs = t[1][0];
  m.collectiveBesideBothMs = t[2][0];
  if (!(m.collectiveAloneMs > 0))
    return;
  // An all-gather loop outlasting every GPU's copy (slowed by up to 1.5x).
  int loop = itemsPerRound(2.25 * copyMs / m.collectiveAloneMs, opsPerCall);
  for (bool toHost : {true, false}) {
    std::vector<Lane> lanes{lane(true, shard, loop)};
    for (int g = 0; g < n; ++g)
      lanes.push_back(copies(g, toHost, copyBytes, 1));
    std::vector<double> ms = collectiveTimer.run(lanes, reps);
    double mean = 0;
    for (size_t i = 1; i < ms.size(); ++i)
      mean += (ms[i] > 0 ? copyBytes / ms[i] / 1e6 : 0) / n;
    (toHost ? m.hostD2HDuringCollectiveGBs : m.hostH2DDuringCollectiveGBs) =
        mean;
  }
#else
  (void)e;
  m.collectivesSkipped = "the runtime was built without NCCL";
#endif
}

} // namespace

bool calibrate::measureHost(const Options &options, int gpus, Measurements &m,
                            Errors &errors) {
  Host host(options, m, errors);
  if (!measureOrSkip("GPUs of the host copying at once", m, errors, host.timer,
                     [&] {
                       if (host.setup(gpus))
                         host.copySweep();
                     }))
    return false;
  Errors collectiveErrors;
  host.collectives(collectiveErrors);
  if (!collectiveErrors.ok()) {
    // What was measured before the failure is dropped with it.
    m.collectives.clear();
    m.collectiveAloneMs = m.collectiveBesideD2HMs = m.collectiveBesideBothMs =
        0;
    m.hostD2HDuringCollectiveGBs = m.hostH2DDuringCollectiveGBs = 0;
    m.collectivesSkipped = collectiveErrors.first;
  }
  return true;
}

//===- Bench.cpp - lethe-rt-bench: what the runtime achieves on a GPU
//------===//
//
// Measures, on the machine it runs on, the figures the planner's device
// profile and the runtime's claims rest on, and prints markdown tables:
//   - pinned host<->device copy bandwidth with plain cudaMemcpyAsync (the
//     ceiling) and through the runtime's copy calls, one direction and both
//     at once, and beside a GEMM loop;
//   - GEMM rate through letheRtGemm for square and GPT-2-like shapes;
//   - replay-kernel accuracy: measured kernel time against the asked time,
//     with and without memory traffic, alone and back to back.
// Times are medians of CUDA-event timings after warm-up.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"
#include "lethe/Runtime/Tools.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace lethe::rt;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Bench {
  LetheRt *rt = nullptr;
  bool ok = true;
  int reps = 7;

  bool check(cudaError_t err, const char *what) {
    if (err != cudaSuccess && ok) {
      std::fprintf(stderr, "lethe-rt-bench: %s failed: %s\n", what,
                   cudaGetErrorString(err));
      ok = false;
    }
    return ok;
  }
  bool check(LetheRtStatus s) {
    if (s != LETHE_RT_OK && ok) {
      std::fprintf(stderr, "lethe-rt-bench: %s\n", letheRtGetErrorMessage(rt));
      ok = false;
    }
    return ok;
  }
  cudaStream_t stream(int s) { return rt->streams[s]; }

  /// Milliseconds per call of `enqueue` on each listed stream, run together:
  /// all streams start after one event, each is timed to its own end.
  std::vector<double>
  timeTogether(const std::vector<int> &streams,
               const std::function<void(int stream)> &enqueue, int calls = 1) {
    std::vector<std::vector<double>> samples(streams.size());
    cudaEvent_t start, ends[LETHE_RT_NUM_STREAMS];
    check(cudaEventCreate(&start), "cudaEventCreate");
    for (cudaEvent_t &e : ends)
      check(cudaEventCreate(&e), "cudaEventCreate");
    for (int r = 0; ok && r < reps + 1; ++r) {
      // A spin ahead of the start keeps the GPU busy while the host
      // enqueues, so host launch latency stays out of short timings.
      check(letheRtReplay(rt, "queue filler", 200.0, nullptr, 0, nullptr, 0));
      check(cudaEventRecord(start, stream(LETHE_STREAM_COMPUTE)),
            "cudaEventRecord");
      for (size_t i = 0; i < streams.size(); ++i) {
        check(cudaStreamWaitEvent(stream(streams[i]), start, 0),
              "cudaStreamWaitEvent");
        for (int c = 0; c < calls; ++c)
          enqueue(streams[i]);
        check(cudaEventRecord(ends[i], stream(streams[i])), "cudaEventRecord");
      }
      check(letheRtSynchronize(rt));
      for (size_t i = 0; ok && i < streams.size(); ++i) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, ends[i]),
              "cudaEventElapsedTime");
        if (r > 0) // the first round is warm-up
          samples[i].push_back(ms / calls);
      }
    }
    cudaEventDestroy(start);
    for (cudaEvent_t e : ends)
      cudaEventDestroy(e);
    std::vector<double> result;
    for (auto &s : samples)
      result.push_back(median(s));
    return result;
  }

  /// Milliseconds per replay of a CUDA graph captured from `enqueue` (work
  /// on the compute stream only).
  double graphTime(const std::function<void()> &enqueue) {
    cudaStream_t compute = stream(LETHE_STREAM_COMPUTE);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    rt->capturing = true;
    if (check(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture")) {
      enqueue();
      check(cudaStreamEndCapture(compute, &graph), "cudaStreamEndCapture");
    }
    rt->capturing = false;
    double ms = 0;
    if (check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate"))
      ms = timeTogether({LETHE_STREAM_COMPUTE}, [&](int) {
        check(cudaGraphLaunch(exec, compute), "cudaGraphLaunch");
      })[0];
    if (exec)
      cudaGraphExecDestroy(exec);
    if (graph)
      cudaGraphDestroy(graph);
    return ms;
  }
};

void copyBench(Bench &b, uint64_t bytes) {
  std::printf("## Pinned host<->device copies, %llu MiB each\n\n",
              (unsigned long long)(bytes / kMiB));
  std::printf("| path | D2H GB/s | H2D GB/s |\n|---|---|---|\n");
  unsigned char *dev = b.rt->deviceArena, *host = b.rt->hostArena;
  auto raw = [&](int s) {
    if (s == LETHE_STREAM_D2H)
      b.check(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost,
                              b.stream(s)),
              "cudaMemcpyAsync");
    else
      b.check(cudaMemcpyAsync(dev + bytes, host + bytes, bytes,
                              cudaMemcpyHostToDevice, b.stream(s)),
              "cudaMemcpyAsync");
  };
  auto viaRuntime = [&](int s) {
    if (s == LETHE_STREAM_D2H)
      b.check(letheRtCopyD2H(b.rt, 0, 0, bytes));
    else
      b.check(letheRtCopyH2D(b.rt, bytes, bytes, bytes));
  };
  auto gbps = [&](double ms) { return ms > 0 ? bytes / ms / 1e6 : 0; };
  auto row = [&](const char *name, const std::function<void(int)> &f,
                 bool together) {
    double d2h, h2d;
    if (together) {
      auto t = b.timeTogether({LETHE_STREAM_D2H, LETHE_STREAM_H2D}, f);
      d2h = t[0];
      h2d = t[1];
    } else {
      d2h = b.timeTogether({LETHE_STREAM_D2H}, f)[0];
      h2d = b.timeTogether({LETHE_STREAM_H2D}, f)[0];
    }
    std::printf("| %s | %.1f | %.1f |\n", name, gbps(d2h), gbps(h2d));
  };
  row("cudaMemcpyAsync, one direction at a time", raw, false);
  row("cudaMemcpyAsync, both directions at once", raw, true);
  row("letheRtCopyD2H / H2D, one at a time", viaRuntime, false);
  row("letheRtCopyD2H / H2D, both at once", viaRuntime, true);

  // Beside a GEMM loop on the compute stream: copy rate and GEMM slowdown.
  const int64_t n = 8192;
  uint64_t matrix = (uint64_t)n * n * 2, base = 2 * bytes;
  LetheRtGemm g{LETHE_DTYPE_BF16,
                0,
                0,
                1,
                n,
                n,
                n,
                {base, matrix},
                {base + matrix, matrix},
                {0, 0},
                {base + 2 * matrix, matrix}};
  b.check(letheRtFill(b.rt, g.a, LETHE_DTYPE_BF16, 1));
  b.check(letheRtFill(b.rt, g.b, LETHE_DTYPE_BF16, 2));
  auto gemmLoop = [&](int) {
    for (int i = 0; i < 12; ++i)
      b.check(letheRtGemm(b.rt, "bench gemm", 0, &g));
  };
  double gemmAlone = b.timeTogether({LETHE_STREAM_COMPUTE}, gemmLoop)[0];
  auto both = [&](int s) {
    if (s == LETHE_STREAM_COMPUTE)
      gemmLoop(s);
    else
      viaRuntime(s);
  };
  auto t = b.timeTogether(
      {LETHE_STREAM_COMPUTE, LETHE_STREAM_D2H, LETHE_STREAM_H2D}, both);
  std::printf("| letheRtCopyD2H / H2D, both at once beside a GEMM loop | "
              "%.1f | %.1f |\n\n",
              gbps(t[1]), gbps(t[2]));
  std::printf("GEMM loop (12 x bf16 8192^3): %.2f ms alone, %.2f ms beside "
              "the copies (x%.3f).\n\n",
              gemmAlone, t[0], gemmAlone > 0 ? t[0] / gemmAlone : 0);
}

void gemmBench(Bench &b) {
  std::printf("## GEMMs through letheRtGemm (cuBLASLt, f32 accumulate, "
              "random data)\n\n");
  std::printf("| dtype | batch | m | n | k | transA | transB | bias | ms | "
              "TFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|\n");
  struct Shape {
    LetheRtDType dtype;
    int64_t batch, m, n, k;
    int transA, transB, bias;
  } shapes[] = {
      {LETHE_DTYPE_BF16, 1, 8192, 8192, 8192, 0, 0, 0},
      {LETHE_DTYPE_F16, 1, 8192, 8192, 8192, 0, 0, 0},
      {LETHE_DTYPE_F32, 1, 8192, 8192, 8192, 0, 0, 0},
      // GPT-2 small, 8 x 1024 tokens: qkv, proj, fc, fc2 forward.
      {LETHE_DTYPE_BF16, 1, 8192, 2304, 768, 0, 1, 1},
      {LETHE_DTYPE_BF16, 1, 8192, 768, 768, 0, 1, 1},
      {LETHE_DTYPE_BF16, 1, 8192, 3072, 768, 0, 1, 1},
      {LETHE_DTYPE_BF16, 1, 8192, 768, 3072, 0, 1, 1},
      // Their weight gradients (x^T dy) and input gradients.
      {LETHE_DTYPE_BF16, 1, 3072, 768, 8192, 1, 0, 0},
      {LETHE_DTYPE_BF16, 1, 8192, 3072, 768, 0, 0, 0},
      // Attention scores, 8 x 12 heads.
      {LETHE_DTYPE_BF16, 96, 1024, 1024, 64, 0, 1, 0},
  };
  const char *names[] = {"f32", "f16", "bf16"};
  for (const Shape &s : shapes) {
    uint64_t elt = s.dtype == LETHE_DTYPE_F32 ? 4 : 2;
    uint64_t a = s.batch * s.m * s.k * elt, bb = s.batch * s.k * s.n * elt;
    uint64_t c = s.batch * s.m * s.n * elt, bias = s.bias ? s.n * elt : 0;
    auto align = [](uint64_t x) { return (x + 255) & ~255ull; };
    LetheRtGemm g{s.dtype,
                  s.transA,
                  s.transB,
                  s.batch,
                  s.m,
                  s.n,
                  s.k,
                  {0, a},
                  {align(a), bb},
                  {align(a) + align(bb), bias},
                  {align(a) + align(bb) + align(bias), c}};
    if (g.c.offset + c > b.rt->config.deviceArenaBytes)
      continue;
    b.check(letheRtFill(b.rt, g.a, s.dtype, 11));
    b.check(letheRtFill(b.rt, g.b, s.dtype, 12));
    if (bias)
      b.check(letheRtFill(b.rt, g.bias, s.dtype, 13));
    double ms = b.timeTogether(
        {LETHE_STREAM_COMPUTE},
        [&](int) { b.check(letheRtGemm(b.rt, "bench gemm", 0, &g)); }, 10)[0];
    double flops = 2.0 * s.batch * s.m * s.n * s.k;
    std::printf("| %s | %lld | %lld | %lld | %lld | %d | %d | %s | %.3f | "
                "%.1f |\n",
                names[s.dtype], (long long)s.batch, (long long)s.m,
                (long long)s.n, (long long)s.k, s.transA, s.transB,
                s.bias ? "yes" : "no", ms, ms > 0 ? flops / ms / 1e9 : 0);
  }
  std::printf("\n");
}

void replayBench(Bench &b) {
  std::printf("## Replay kernels: asked vs measured time\n\n");
  std::printf("SM clock measured %.0f MHz; an empty replay kernel occupies "
              "the stream %.2f us back to back (subtracted from every spin). "
              "Each kernel below is timed alone, event to event, behind a spin "
              "that hides host launch latency: the event pair adds its own "
              "overhead to short kernels.\n\n",
              b.rt->cyclesPerUs, b.rt->replayFloorUs);
  // Device-to-device copy rate: the floor for replays that move bytes.
  uint64_t big = 512 * kMiB;
  double d2dMs = b.timeTogether({LETHE_STREAM_COMPUTE}, [&](int s) {
    b.check(cudaMemcpyAsync(b.rt->deviceArena + big, b.rt->deviceArena, big,
                            cudaMemcpyDeviceToDevice, b.stream(s)),
            "cudaMemcpyAsync");
  })[0];
  double hbm = d2dMs > 0 ? 2.0 * big / d2dMs / 1e6 : 0;
  std::printf("Device-to-device copy: %.0f GB/s counting read + write.\n\n",
              hbm);
  std::printf("| asked us | bytes read + written | memory floor us | "
              "measured us | error |\n|---|---|---|---|---|\n");
  double targets[] = {2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000};
  uint64_t traffic[] = {0, 16 * kMiB, 256 * kMiB};
  for (uint64_t bytes : traffic) {
    for (double target : targets) {
      LetheRtBuf in = {0, bytes / 2}, out = {bytes / 2, bytes / 2};
      double ms = b.timeTogether({LETHE_STREAM_COMPUTE}, [&](int) {
        b.check(letheRtReplay(b.rt, "bench replay", target, &in, bytes ? 1 : 0,
                              &out, bytes ? 1 : 0));
      })[0];
      double floorUs = hbm > 0 ? bytes / hbm / 1e3 : 0;
      double expect = std::max(target, floorUs);
      std::printf("| %.0f | %llu MiB | %.1f | %.2f | %+.1f%% |\n", target,
                  (unsigned long long)(bytes / kMiB), floorUs, ms * 1000,
                  (ms * 1000 / expect - 1) * 100);
    }
  }
  std::printf("\nBack to back on one stream, 200 kernels, launched eagerly "
              "(the host enqueues one in about as long as a short kernel "
              "runs) and as one CUDA graph:\n\n");
  std::printf("| asked us each | eager us each | error | graph us each | "
              "error |\n|---|---|---|---|---|\n");
  const int count = 200;
  for (double target : {2.0, 5.0, 10.0, 20.0, 50.0, 200.0}) {
    auto enqueue = [&] {
      for (int i = 0; i < count; ++i)
        b.check(letheRtReplay(b.rt, "bench replay", target, nullptr, 0, nullptr,
                              0));
    };
    double eagerUs = b.timeTogether({LETHE_STREAM_COMPUTE}, [&](int) {
      enqueue();
    })[0] * 1000 / count;
    double graphUs = b.graphTime(enqueue) * 1000 / count;
    std::printf("| %.0f | %.2f | %+.1f%% | %.2f | %+.1f%% |\n", target, eagerUs,
                (eagerUs / target - 1) * 100, graphUs,
                (graphUs / target - 1) * 100);
  }
  std::printf("\n");
}

} // namespace

int lethe::rt::benchMain(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--collectives")
      return collectiveBenchMain(argc, argv);
  bool quick = false;
  int device = -1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick")
      quick = true;
    else if (arg.rfind("--device=", 0) == 0)
      device = std::atoi(arg.c_str() + 9);
    else {
      std::fprintf(stderr, "usage: lethe-rt-bench [--quick] [--device=N]\n"
                           "       lethe-rt-bench --collectives ... "
                           "(--collectives --help)\n");
      return 2;
    }
  }
  uint64_t copyBytes = (quick ? 64 : 512) * kMiB;
  LetheRtConfig config;
  letheRtConfigInit(&config);
  config.device = device;
  config.deviceArenaBytes = 3072 * kMiB;
  config.hostArenaBytes = 2 * copyBytes;
  Bench b;
  b.reps = quick ? 3 : 7;
  if (letheRtCreate(&config, &b.rt) != LETHE_RT_OK) {
    std::fprintf(stderr, "lethe-rt-bench: %s\n", letheRtGetErrorMessage(b.rt));
    letheRtDestroy(b.rt);
    return 1;
  }
  std::printf("# lethe-rt-bench on %s (%d SMs)\n\n", b.rt->deviceName.c_str(),
              b.rt->numSMs);
  copyBench(b, copyBytes);
  if (b.ok)
    gemmBench(b);
  if (b.ok)
    replayBench(b);
  letheRtDestroy(b.rt);
  return b.ok ? 0 : 1;
}

//===- CalibrateMeasure.cpp - lethe-calibrate: one GPU --------------------===//
//
// The single-GPU measurements, through the runtime's own calls where
// compiled programs use them (letheRtCopyD2H / H2D, letheRtGemm,
// letheRtReplay), so the profile describes what Lethe's programs get:
//   - pinned copies by size, each direction alone and both at once;
//   - dense GEMM rates by dtype (cuBLASLt), misaligned bf16 GEMMs, HBM;
//   - kernel loops beside copies and copies beside kernel loops;
//   - launch, event-record and cross-stream-wait costs, eager and in CUDA
//     graphs.
// Device arena: [0, C) D2H source, [C, 2C) H2D destination, then three
// 256 MiB GEMM operands, then the memory-bound kernel's input and output.
// Host arena: [0, C) D2H destination, [C, 2C) H2D source.
//
//===----------------------------------------------------------------------===//

#include "CalibrateImpl.h"
#include "Kernels.h"
#include "Samples.h"

#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace lethe::rt;
using namespace lethe::rt::calibrate;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGemmSlot = 256 * kMiB;

struct OneGpu {
  const Options &options;
  LetheRt *rt;
  Measurements &m;
  Errors &errors;
  LaneTimer timer;

  uint64_t copyBytes, memoryHalf, gemmBase, memoryIn, memoryOut;
  int reps;

  OneGpu(const Options &options, LetheRt *rt, Measurements &m, Errors &errors)
      : options(options), rt(rt), m(m), errors(errors),
        timer(errors, m, options.noGate) {
    copyBytes = rt->config.hostArenaBytes / 2;
    gemmBase = 2 * copyBytes;
    memoryHalf = (rt->config.deviceArenaBytes - gemmBase - 3 * kGemmSlot) / 2;
    memoryIn = gemmBase + 3 * kGemmSlot;
    memoryOut = memoryIn + memoryHalf;
    reps = options.quick ? 3 : 7;
  }

  cudaStream_t stream(int s) const { return rt->streams[s]; }
  Endpoint on(int s) const { return {rt->device, rt->streams[s]}; }
  bool ok(LetheRtStatus s) { return errors.runtime(rt, s); }

  Lane copies(bool toHost, uint64_t bytes, int count) {
    return {{on(toHost ? LETHE_STREAM_D2H : LETHE_STREAM_H2D)},
            [this, toHost, bytes, count] {
              for (int i = 0; i < count; ++i) {
                uint64_t at = (uint64_t)i * bytes % copyBytes;
                if (toHost)
                  ok(letheRtCopyD2H(rt, at, at, bytes));
                else
                  ok(letheRtCopyH2D(rt, copyBytes + at, copyBytes + at, bytes));
              }
            },
            count};
  }

  void copySweep();
  void gemmRates();
  void memory();
  void contention();
  void launches();

  // Kernel loops of the runtime: bf16 8192^3 GEMMs, memory-bound replays.
  LetheRtGemm gemm{};
  Lane gemmLoop(int count) {
    return {{on(LETHE_STREAM_COMPUTE)},
            [this, count] {
              for (int i = 0; i < count; ++i)
                ok(letheRtGemm(rt, "calibrate gemm", 0, &gemm));
            },
            count};
  }
  /// `count` bf16 8192^3 GEMMs, each followed by `memoryPerGemm`
  /// memory-bound replays: GEMMs as a training step runs them, between
  /// memory-bound kernels rather than back to back at the power limit.
  Lane mixedLoop(int count, int memoryPerGemm) {
    return {{on(LETHE_STREAM_COMPUTE)},
            [this, count, memoryPerGemm] {
              LetheRtBuf in{memoryIn, memoryHalf}, out{memoryOut, memoryHalf};
              for (int i = 0; i < count; ++i) {
                ok(letheRtGemm(rt, "calibrate gemm", 0, &gemm));
                for (int j = 0; j < memoryPerGemm; ++j)
                  ok(letheRtReplay(rt, "calibrate memory-bound", 0, &in, 1,
                                   &out, 1));
              }
            },
            count * (1 + memoryPerGemm)};
  }
  Lane memoryLoop(int count) {
    return {
        {on(LETHE_STREAM_COMPUTE)},
        [this, count] {
          LetheRtBuf in{memoryIn, memoryHalf}, out{memoryOut, memoryHalf};
          for (int i = 0; i < count; ++i)
            ok(letheRtReplay(rt, "calibrate memory-bound", 0, &in, 1, &out, 1));
        },
        count};
  }
};

void OneGpu::copySweep() {
  std::vector<uint64_t> sizes;
  if (options.quick)
    sizes = {64 << 10, 1 * kMiB, 16 * kMiB, 256 * kMiB};
  else
    sizes = {64 << 10,  256 << 10, 1 * kMiB,   4 * kMiB,
             16 * kMiB, 64 * kMiB, 256 * kMiB, 1024 * kMiB};
  for (uint64_t bytes : sizes) {
    if (bytes > copyBytes || !errors.ok())
      continue;
    // Enough copies back to back that the sample is long next to the
    // timing's own noise, so small ones show their fixed cost.
    // Capped: all of a round is queued behind the start gate.
    int count = itemsPerRound(256.0 * kMiB / bytes);
    CopyPoint p;
    p.bytes = bytes;
    p.count = count;
    double perCopy = 1000.0 / count;
    p.d2hUs = timer.run({copies(true, bytes, count)}, reps)[0] * perCopy;
    p.h2dUs = timer.run({copies(false, bytes, count)}, reps)[0] * perCopy;
    std::vector<double> both = timer.run(
        {copies(true, bytes, count), copies(false, bytes, count)}, reps);
    if (both.size() == 2) {
      p.d2hBothUs = both[0] * perCopy;
      p.h2dBothUs = both[1] * perCopy;
    }
    m.copies.push_back(p);
  }
}

/// Dense GEMM rates through cuBLASLt with the runtime's row-major
/// convention (C[m][n] = A[m][k] op(B), handed to column-major cuBLASLt as
/// the transposed product); B transposed where f8 and i8 need it.
class GemmRates {
public:
  GemmRates(OneGpu &g) : g(g) {}
  ~GemmRates() {
    if (workspace)
      cudaFree(workspace);
    if (handle)
      cublasLtDestroy(handle);
  }

  struct Spec {
    const char *dtype;
    cudaDataType_t ab, c;
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int64_t m, n, k;
    bool transB;
  };

  /// FLOP/s, or 0 with `why` set when cuBLASLt cannot run it.
  double rate(const Spec &s, std::string &why);

private:
  OneGpu &g;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  const uint64_t workspaceBytes = 32 * kMiB;
};

size_t elementSize(cudaDataType_t t) {
  switch (t) {
  case CUDA_R_64F:
    return 8;
  case CUDA_R_32F:
  case CUDA_R_32I:
    return 4;
  case CUDA_R_16F:
  case CUDA_R_16BF:
    return 2;
  default:
    return 1;
  }
}

double GemmRates::rate(const Spec &s, std::string &why) {
  if (!handle) {
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS)
      return g.errors.fail("cublasLtCreate failed"), 0;
    if (!g.errors.cuda(cudaMalloc(&workspace, workspaceBytes),
                       "cudaMalloc(GEMM workspace)"))
      return 0;
  }
  uint64_t aBytes = s.m * s.k * elementSize(s.ab),
           bBytes = s.k * s.n * elementSize(s.ab),
           cBytes = s.m * s.n * elementSize(s.c);
  if (aBytes > kGemmSlot || bBytes > kGemmSlot || cBytes > kGemmSlot)
    return g.errors.fail(std::string("GEMM operands of ") + s.dtype +
                         " exceed their slots"),
           0;
  unsigned char *base = g.rt->deviceArena + g.gemmBase;
  unsigned char *a = base, *b = base + kGemmSlot, *c = base + 2 * kGemmSlot;
  // Random operands (zeros would run cooler and faster).
  for (int i = 0; i < 2; ++i) {
    LetheRtBuf buf{g.gemmBase + i * kGemmSlot, i ? bBytes : aBytes};
    if (s.ab == CUDA_R_16BF || s.ab == CUDA_R_16F || s.ab == CUDA_R_32F)
      g.ok(letheRtFill(g.rt, buf,
                       s.ab == CUDA_R_32F   ? LETHE_DTYPE_F32
                       : s.ab == CUDA_R_16F ? LETHE_DTYPE_F16
                                            : LETHE_DTYPE_BF16,
                       21 + i));
    else
      g.errors.cuda(launchFillBytes({g.rt->deviceArena + buf.offset, buf.bytes},
                                    s.ab == CUDA_R_64F ? 1 : 0, 31 + i,
                                    g.rt->numSMs,
                                    g.stream(LETHE_STREAM_COMPUTE)),
                    "fill kernel launch");
  }
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, cl = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasOperation_t opX = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opY = CUBLAS_OP_N;
  // X = B (n x k as stored column-major, or k x n when transposed),
  // Y = A^T (k x m), C^T (n x m).
  cublasStatus_t st = cublasLtMatmulDescCreate(&desc, s.compute, s.scale);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opX,
                                        sizeof(opX));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opY,
                                        sizeof(opY));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = s.transB ? cublasLtMatrixLayoutCreate(&x, s.ab, s.k, s.n, s.k)
                  : cublasLtMatrixLayoutCreate(&x, s.ab, s.n, s.k, s.n);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&y, s.ab, s.k, s.m, s.k);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&cl, s.c, s.n, s.m, s.n);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceCreate(&pref);
  uint64_t ws = workspaceBytes;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle, desc, x, y, cl, cl, pref, 1,
                                        &result, &returned);
  double flops = 0;
  if (st != CUBLAS_STATUS_SUCCESS) {
    why = std::string("cuBLASLt: ") + cublasLtGetStatusString(st);
  } else if (returned == 0) {
    why = "cuBLASLt has no algorithm for it on this GPU";
  } else {
    float alphaF = 1, betaF = 0;
    double alphaD = 1, betaD = 0;
    int32_t alphaI = 1, betaI = 0;
    const void *alpha = s.scale == CUDA_R_64F   ? (const void *)&alphaD
                        : s.scale == CUDA_R_32I ? (const void *)&alphaI
                                                : (const void *)&alphaF;
    const void *beta = s.scale == CUDA_R_64F   ? (const void *)&betaD
                       : s.scale == CUDA_R_32I ? (const void *)&betaI
                                               : (const void *)&betaF;
    cudaStream_t stream = g.stream(LETHE_STREAM_COMPUTE);
    const int calls = 5;
    Lane lane{{g.on(LETHE_STREAM_COMPUTE)},
              [&] {
                for (int i = 0; i < calls; ++i) {
                  cublasStatus_t r = cublasLtMatmul(
                      handle, desc, alpha, b, x, a, y, beta, c, cl, c, cl,
                      &result.algo, workspace, workspaceBytes, stream);
                  if (r != CUBLAS_STATUS_SUCCESS && why.empty())
                    why = std::string("cublasLtMatmul: ") +
                          cublasLtGetStatusString(r);
                }
              },
              calls};
    // One warm-up round of `calls`, then the timed rounds.
    double ms = g.timer.run({lane}, std::max(3, g.reps - 2))[0] / calls;
    if (why.empty() && ms > 0)
      flops = 2.0 * s.m * s.n * s.k / (ms * 1e-3);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(x);
  cublasLtMatrixLayoutDestroy(y);
  cublasLtMatrixLayoutDestroy(cl);
  cublasLtMatmulDescDestroy(desc);
  // A failed GEMM may leave an error behind; clear it so the next runs.
  cudaGetLastError();
  return flops;
}

void OneGpu::gemmRates() {
  GemmRates rates(*this);
  const int64_t n = 8192;
  GemmRates::Spec specs[] = {
      {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F, n, n,
       n, false},
      {"f16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F, n, n, n,
       false},
      {"f8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F, n, n,
       n, true},
      {"i8", CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, CUDA_R_32I, n, n, n,
       true},
      {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F,
       n, n, n, false},
      {"f32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, n, n, n,
       false},
      {"f64", CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F, 4096,
       4096, 4096, false},
  };
  for (const GemmRates::Spec &s : specs) {
    if (!errors.ok())
      return;
    std::string why;
    double flops = rates.rate(s, why);
    if (flops > 0)
      m.peakFlops[s.dtype] = flops;
    else
      m.skippedDtypes[s.dtype] = why.empty() ? "no time measured" : why;
  }
  if (!m.peakFlops.count("f32"))
    errors.fail("the f32 GEMM rate (the profile's fallback rate) could not "
                "be measured: " +
                m.skippedDtypes["f32"]);
  double bf16 = m.peakFlops.count("bf16") ? m.peakFlops["bf16"] : 0;
  for (auto [mm, kk, nn] :
       {std::tuple<int64_t, int64_t, int64_t>{8192, 4096, 4095},
        {8192, 4095, 4096}}) {
    std::string why;
    double flops =
        bf16 > 0 && errors.ok()
            ? rates.rate({"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F,
                          CUDA_R_32F, mm, nn, kk, false},
                         why)
            : 0;
    if (flops > 0)
      m.unalignedFractions.push_back(flops / bf16);
  }
  if (m.unalignedFractions.size() != 2)
    m.unalignedFractions.clear();
}

void OneGpu::memory() {
  const int calls = 5;
  unsigned char *arena = rt->deviceArena;
  Lane d2d{{on(LETHE_STREAM_COMPUTE)},
           [&] {
             for (int i = 0; i < calls; ++i)
               errors.cuda(cudaMemcpyAsync(arena + memoryOut, arena + memoryIn,
                                           memoryHalf, cudaMemcpyDeviceToDevice,
                                           stream(LETHE_STREAM_COMPUTE)),
                           "cudaMemcpyAsync(device to device)");
           },
           calls};
  double ms = timer.run({d2d}, reps)[0];
  m.hbmBytesPerSec = ms > 0 ? 2.0 * memoryHalf * calls / (ms * 1e-3) : 0;
  ms = timer.run({memoryLoop(calls)}, reps)[0];
  m.memoryKernelBytesPerSec =
      ms > 0 ? 2.0 * memoryHalf * calls / (ms * 1e-3) : 0;
}

void OneGpu::contention() {
  const int64_t n = 8192;
  gemm = {LETHE_DTYPE_BF16,
          0,
          0,
          1,
          n,
          n,
          n,
          {gemmBase, kGemmSlot},
          {gemmBase + kGemmSlot, kGemmSlot},
          {0, 0},
          {gemmBase + 2 * kGemmSlot, kGemmSlot}};
  ok(letheRtFill(rt, gemm.a, LETHE_DTYPE_BF16, 41));
  ok(letheRtFill(rt, gemm.b, LETHE_DTYPE_BF16, 42));
  if (!errors.ok() || m.copies.empty())
    return;
  const CopyPoint &big = m.copies.back();
  m.contentionBytes = big.bytes;
  m.d2hAloneGBs = big.bytes / big.d2hUs / 1e3;
  m.h2dAloneGBs = big.bytes / big.h2dUs / 1e3;
  double copyMs = std::max(big.d2hUs, big.h2dUs) / 1000;
  double loopMs = options.quick ? 15 : 30;

  auto measure = [&](auto loop, KernelContention &k, double &d2hDuring,
                     double &h2dDuring, int opsEach = 1) {
    double oneMs = timer.run({loop(1)}, 2)[0];
    if (!(oneMs > 0) || !errors.ok())
      return;
    int count = itemsPerRound(loopMs / oneMs, opsEach);
    // Copies outlast the loop (slowed by up to 1.5x), so it never runs
    // uncontended; `oneMs` stands in for the loop's time alone.
    int copies = itemsPerRound(1.5 * count * oneMs / copyMs);
    // Alone and beside copies in alternating rounds: measured one after the
    // other, the first ran on clocks still ramping up (a GEMM loop came out
    // faster beside copies than alone).
    // The slowdowns are a few percent, and a GEMM loop's time drifts by as
    // much between rounds (clocks under the power limit): with 7 rounds
    // and the ratio of medians, five calibrations of one H100 put the GEMM
    // beside one-way copies at x1.015-x1.058 (2026-11-26). Hence twice the
    // rounds, and each round's own ratio.
    std::vector<std::vector<std::vector<double>>> t =
        timer.runInterleavedSamples(
            {{loop(count)},
             {loop(count), this->copies(true, big.bytes, copies)},
             {loop(count), this->copies(false, big.bytes, copies)},
             {loop(count), this->copies(true, big.bytes, copies),
              this->copies(false, big.bytes, copies)}},
            2 * reps + 1);
    if (!errors.ok() || t.size() != 4)
      return;
    const std::vector<double> &alone = t[0][0];
    auto paired = [&](const std::vector<double> &beside) {
      std::vector<double> ratios;
      for (size_t r = 0; r < std::min(alone.size(), beside.size()); ++r)
        if (alone[r] > 0 && beside[r] > 0)
          ratios.push_back(beside[r] / alone[r]);
      return summarize(std::move(ratios)).median;
    };
    k.aloneMs = summarize(alone).median;
    k.besideD2HMs = summarize(t[1][0]).median;
    k.besideH2DMs = summarize(t[2][0]).median;
    k.besideBothMs = summarize(t[3][0]).median;
    k.d2hSlowdown = paired(t[1][0]);
    k.h2dSlowdown = paired(t[2][0]);
    k.bothSlowdown = paired(t[3][0]);
    // A loop that outlasts one copy.
    int cover = itemsPerRound(1.5 * copyMs / oneMs, opsEach);
    std::vector<double> d =
        timer.run({loop(cover), this->copies(true, big.bytes, 1)}, reps);
    d2hDuring = d.size() == 2 && d[1] > 0 ? big.bytes / d[1] / 1e6 : 0;
    d = timer.run({loop(cover), this->copies(false, big.bytes, 1)}, reps);
    h2dDuring = d.size() == 2 && d[1] > 0 ? big.bytes / d[1] / 1e6 : 0;
  };
  measure([this](int c) { return gemmLoop(c); }, m.matmul, m.d2hDuringMatmulGBs,
          m.h2dDuringMatmulGBs);
  measure([this](int c) { return memoryLoop(c); }, m.memoryBound,
          m.d2hDuringMemoryGBs, m.h2dDuringMemoryGBs);

  // The GEMM loop runs at the card's power limit, where copies cost it
  // clock: x1.015-1.062 between calibrations of one H100, x1.055 on the
  // H200 whose fidelity run then over-predicted every convolution- and
  // GEMM-heavy plan (UNet +2.5 points; with no GEMM slowdown all 48 graph
  // overheads fell within 1.5 points, 2026-11-26). A step's GEMMs alternate
  // with memory-bound kernels: measured so, GEMMs and memory-bound replays
  // of about equal time in one loop, the GEMMs' part of its slowdown
  // (deriveProfile) is what a step sees.
  double gemmMs = timer.run({gemmLoop(1)}, 2)[0];
  double memoryMs = timer.run({memoryLoop(1)}, 2)[0];
  if (!(gemmMs > 0 && memoryMs > 0) || !errors.ok() ||
      !(m.memoryBound.aloneMs > 0))
    return;
  int perGemm = std::clamp((int)std::lround(gemmMs / memoryMs), 1, 8);
  m.mixedMemoryPerGemm = perGemm;
  m.mixedGemmShare = gemmMs / (gemmMs + perGemm * memoryMs);
  double unusedD2H = 0, unusedH2D = 0;
  measure([this, perGemm](int c) { return mixedLoop(c, perGemm); }, m.mixed,
          unusedD2H, unusedH2D, 1 + perGemm);
}

void OneGpu::launches() {
  cudaStream_t compute = stream(LETHE_STREAM_COMPUTE),
               side = stream(LETHE_STREAM_D2H);
  int many = options.quick ? 15 : 31;
  auto kernels = [&](int count) {
    return Lane{{on(LETHE_STREAM_COMPUTE)},
                [this, count, compute] {
                  for (int i = 0; i < count; ++i)
                    errors.cuda(launchEmpty(compute), "kernel launch");
                },
                count};
  };
  m.launchUs = timer.run({kernels(1)}, many)[0] * 1000;
  m.viewUs = timer.run({kernels(0)}, many)[0] * 1000;

  // Host enqueue time of the runtime's kernel, the GPU busy meanwhile. The
  // 400 launches of one round behind a 20 ms spin once read 28.8 us on an
  // H100 whose other calibrations read 3.2-4.8 (2026-11-26): a stall of
  // the host in most rounds, or a hardware queue that filled and blocked
  // the host until the spin ended. Hence short rounds (well within the
  // queue), two warm-up rounds, a spin that must still run when the host
  // is done (an event after it, queried without waiting), the median of
  // the rounds kept, and a figure that fails hostLaunchFromRounds' checks
  // not written (the base profile's kept, the reason listed as skipped).
  {
    const int count = kMaxOpsPerStream - kGateOps;
    const int rounds = options.quick ? 7 : 15, warmUp = 2;
    // The spin outlasts `count` launches at kMaxHostLaunchUs each.
    const double spinUs = 2.0 * count * kMaxHostLaunchUs;
    cudaEvent_t spun = nullptr;
    errors.cuda(cudaEventCreateWithFlags(&spun, cudaEventDisableTiming),
                "cudaEventCreate");
    m.hostLaunchRoundsUs.clear();
    m.hostLaunchDrainedRounds = 0;
    for (int r = 0; r < warmUp + rounds && errors.ok(); ++r) {
      ok(letheRtReplay(rt, "calibrate filler", spinUs, nullptr, 0, nullptr,
                       0));
      errors.cuda(cudaEventRecord(spun, compute), "cudaEventRecord");
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < count; ++i)
        ok(letheRtReplay(rt, "calibrate launch", 0, nullptr, 0, nullptr, 0));
      auto t1 = std::chrono::steady_clock::now();
      // cudaSuccess: the spin had ended, the GPU waited for the host.
      bool drained = cudaEventQuery(spun) == cudaSuccess;
      ok(letheRtSynchronize(rt));
      if (r < warmUp)
        continue;
      if (drained) {
        ++m.hostLaunchDrainedRounds;
        continue;
      }
      m.hostLaunchRoundsUs.push_back(
          std::chrono::duration<double, std::micro>(t1 - t0).count() / count);
    }
    if (spun)
      cudaEventDestroy(spun);
    std::string why;
    m.hostLaunchUs = hostLaunchFromRounds(m.hostLaunchRoundsUs, why);
    if (!why.empty()) {
      m.skipped.push_back("host launch: " + why +
                          "; the base profile's host_launch_us kept");
      std::fprintf(stderr, "lethe-calibrate: warning: host launch %s\n",
                   why.c_str());
    }
  }

  // Chains of empty kernels: plain, with an event recorded after each, and
  // alternating between two streams that wait for each other's events.
  // A hop is a kernel and an event record (and, ping-pong, a wait on the
  // other stream): 2 * 28 + 1 operations, within the per-round cap. Even,
  // so that the last kernel runs on the compute stream the lane ends on.
  const int hops = 28;
  static_assert(2 * hops + 1 + kGateOps <= kMaxOpsPerStream);
  std::vector<cudaEvent_t> events(hops + 1, nullptr);
  for (cudaEvent_t &e : events)
    errors.cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                "cudaEventCreate");
  auto chain = [&](bool record, bool pingPong) {
    for (int i = 0; i <= hops && errors.ok(); ++i) {
      cudaStream_t s = pingPong && i % 2 ? side : compute;
      if (pingPong && i > 0)
        errors.cuda(cudaStreamWaitEvent(s, events[i - 1], 0),
                    "cudaStreamWaitEvent");
      errors.cuda(launchEmpty(s), "kernel launch");
      if (record && i < hops)
        errors.cuda(cudaEventRecord(events[i], s), "cudaEventRecord");
    }
  };
  auto eager = [&](bool record, bool pingPong) {
    return timer.run({{{on(LETHE_STREAM_COMPUTE)},
                       [&, record, pingPong] { chain(record, pingPong); },
                       2 * hops + 1}},
                     reps)[0] *
           1000;
  };
  double plain = eager(false, false), recorded = eager(true, false),
         crossed = eager(true, true);
  m.eventRecordUs = (recorded - plain) / hops;
  m.waitUs = (crossed - recorded) / hops;

  // The same in CUDA graphs, and graphs of 1 and 200 kernels.
  auto capture = [&](const std::function<void()> &enqueue) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (errors.cuda(
            cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture")) {
      enqueue();
      errors.cuda(cudaStreamEndCapture(compute, &graph),
                  "cudaStreamEndCapture");
    }
    if (graph)
      errors.cuda(cudaGraphInstantiate(&exec, graph, 0),
                  "cudaGraphInstantiate");
    if (graph)
      cudaGraphDestroy(graph);
    return exec;
  };
  auto replay = [&](cudaGraphExec_t exec) {
    double us = exec ? timer.run({{{on(LETHE_STREAM_COMPUTE)},
                                   [&, exec] {
                                     errors.cuda(cudaGraphLaunch(exec, compute),
                                                 "cudaGraphLaunch");
                                   }}},
                                 reps)[0] *
                           1000
                     : 0;
    if (exec)
      cudaGraphExecDestroy(exec);
    return us;
  };
  double graphChain = replay(capture([&] { chain(true, false); }));
  double graphCrossed = replay(capture([&] { chain(true, true); }));
  m.graphWaitUs = (graphCrossed - graphChain) / hops;
  const int nodes = 200;
  double one = replay(
      capture([&] { errors.cuda(launchEmpty(compute), "kernel launch"); }));
  double full = replay(capture([&] {
    for (int i = 0; i < nodes; ++i)
      errors.cuda(launchEmpty(compute), "kernel launch");
  }));
  m.graphKernelUs = (full - one) / (nodes - 1);
  m.graphLaunchUs = one - m.launchUs;
  for (cudaEvent_t e : events)
    if (e)
      cudaEventDestroy(e);
}

} // namespace

bool calibrate::measureOneGpu(const Options &options, LetheRt *rt,
                              Measurements &m, Errors &errors) {
  OneGpu g(options, rt, m, errors);
  cudaDeviceProp prop;
  if (!errors.cuda(cudaGetDeviceProperties(&prop, rt->device),
                   "cudaGetDeviceProperties") ||
      !g.timer.init())
    return false;
  m.device = prop.name;
  m.sms = prop.multiProcessorCount;
  m.deviceMemoryBytes = (double)prop.totalGlobalMem;
  // Copy sources hold data (the copy engines do not care, but a checksum
  // run of the same arenas would).
  g.ok(letheRtFill(rt, {0, g.copyBytes}, LETHE_DTYPE_BF16, 1));
  g.ok(letheRtFill(rt, {g.memoryIn, g.memoryHalf}, LETHE_DTYPE_BF16, 2));
  if (void *host = letheRtHostPointer(rt, g.copyBytes))
    std::memset(host, 0x3c, g.copyBytes);
  g.ok(letheRtSynchronize(rt));

  if (!errors.ok())
    return false;
  // Each measurement on its own: one that fails is skipped, with its reason.
  int measured = 0;
  measured += measureOrSkip("pinned copies by size", m, errors, g.timer,
                            [&] { g.copySweep(); });
  measured +=
      measureOrSkip("GEMM rates", m, errors, g.timer, [&] { g.gemmRates(); });
  measured +=
      measureOrSkip("HBM bandwidth", m, errors, g.timer, [&] { g.memory(); });
  measured += measureOrSkip("kernels beside copies", m, errors, g.timer,
                            [&] { g.contention(); });
  measured += measureOrSkip("launch, event and wait costs", m, errors, g.timer,
                            [&] { g.launches(); });
  if (measured == 0)
    return errors.fail("every measurement failed; the first: " +
                       m.skipped.front());
  return errors.ok();
}

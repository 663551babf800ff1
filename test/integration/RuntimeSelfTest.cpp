//===- RuntimeSelfTest.cpp - The runtime checked on a real GPU
//-------------===//
//
// lethe-rt-selftest: exercises the C API on a device and checks results on
// the host: digests against Hash.h's host reference, every output byte of
// replay and hash kernels, GEMMs against a float64 reference for every
// dtype, transposition and bias, copies across streams ordered only by
// events, release poisoning, collectives on one rank, and error messages.
// Prints one line per check and "N passed, M failed"; exits 1 on failure.
//
//===----------------------------------------------------------------------===//

#include "lethe-c/Runtime.h"
#include "lethe/Runtime/Hash.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace lethe::rt;

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string &name, const std::string &detail = "") {
  if (ok)
    ++passed;
  else
    ++failed;
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(),
              detail.empty() ? "" : ": ", detail.c_str());
}

constexpr uint64_t kMiB = 1 << 20;

LetheRt *makeRuntime(LetheRtMode mode) {
  LetheRtConfig config;
  letheRtConfigInit(&config);
  config.mode = mode;
  config.deviceArenaBytes = 64 * kMiB;
  config.hostArenaBytes = 64 * kMiB;
  config.numEvents = 4;
  LetheRt *rt = nullptr;
  if (letheRtCreate(&config, &rt) != LETHE_RT_OK) {
    std::printf("FAIL create: %s\n", letheRtGetErrorMessage(rt));
    return nullptr;
  }
  return rt;
}

uint64_t namedChecksum(LetheRt *rt, const char *want) {
  for (uint32_t i = 0; i < letheRtNumChecksums(rt); ++i) {
    const char *name = nullptr;
    uint64_t value = 0;
    letheRtGetChecksum(rt, i, &name, &value);
    if (name && std::strcmp(name, want) == 0)
      return value;
  }
  return 0;
}

uint64_t deviceDigest(LetheRt *rt, LetheRtBuf buf) {
  letheRtChecksum(rt, "selftest", buf);
  return namedChecksum(rt, "selftest");
}

/// Copies a device range into the host arena at 0 and returns a pointer,
/// after all work enqueued so far.
const unsigned char *toHost(LetheRt *rt, LetheRtBuf buf) {
  // The copy stream is not ordered after the compute stream's kernels.
  letheRtSynchronize(rt);
  letheRtCopyD2H(rt, buf.offset, 0, buf.bytes);
  letheRtSynchronize(rt);
  return static_cast<const unsigned char *>(letheRtHostPointer(rt, 0));
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float f16ToFloat(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  float v = exp == 0 ? std::ldexp((float)mant, -24)
                     : std::ldexp((float)(mant | 1024), exp - 25);
  return sign ? -v : v;
}

std::vector<double> readFloats(LetheRt *rt, LetheRtBuf buf,
                               LetheRtDType dtype) {
  const unsigned char *p = toHost(rt, buf);
  std::vector<double> v;
  size_t elt = dtype == LETHE_DTYPE_F32 ? 4 : 2;
  for (size_t i = 0; i + elt <= buf.bytes; i += elt) {
    if (dtype == LETHE_DTYPE_F32) {
      float f;
      std::memcpy(&f, p + i, 4);
      v.push_back(f);
    } else {
      uint16_t h;
      std::memcpy(&h, p + i, 2);
      v.push_back(dtype == LETHE_DTYPE_BF16 ? bf16ToFloat(h) : f16ToFloat(h));
    }
  }
  return v;
}

void testDigests(LetheRt *rt) {
  for (uint64_t len :
       {1ull, 7ull, 8ull, 15ull, 16ull, 4097ull, (1ull << 20) + 3}) {
    LetheRtBuf buf = {16 * kMiB, len};
    letheRtFill(rt, buf, LETHE_DTYPE_RAW, len);
    uint64_t device = deviceDigest(rt, buf);
    uint64_t host = hostDigest(toHost(rt, buf), len);
    check(device == host,
          "digest matches host reference, " + std::to_string(len) + " bytes");
  }
  LetheRtBuf a = {0, kMiB}, b = {kMiB, kMiB}, c = {2 * kMiB, kMiB};
  letheRtFill(rt, a, LETHE_DTYPE_BF16, 5);
  letheRtFill(rt, b, LETHE_DTYPE_BF16, 5);
  letheRtFill(rt, c, LETHE_DTYPE_BF16, 6);
  uint64_t da = deviceDigest(rt, a), db = deviceDigest(rt, b),
           dc = deviceDigest(rt, c);
  check(da == db, "fill is deterministic (same seed, other offset)");
  check(da != dc, "fill depends on the seed");
}

void testFillValues(LetheRt *rt) {
  for (LetheRtDType dtype :
       {LETHE_DTYPE_F32, LETHE_DTYPE_F16, LETHE_DTYPE_BF16}) {
    LetheRtBuf buf = {0, 256 * 1024};
    letheRtFill(rt, buf, dtype, 42);
    std::vector<double> v = readFloats(rt, buf, dtype);
    size_t bad = 0, negative = 0;
    for (double x : v) {
      if (!std::isfinite(x) || std::fabs(x) < 0.0624 || std::fabs(x) > 1.0)
        ++bad;
      negative += x < 0;
    }
    check(bad == 0 && negative > v.size() / 4 && negative < 3 * v.size() / 4,
          "fill values, dtype " + std::to_string(dtype),
          std::to_string(bad) + " out of range, " + std::to_string(negative) +
              " negative of " + std::to_string(v.size()));
  }
}

void testGemm(LetheRt *rt) {
  const int64_t batch = 2, m = 64, n = 48, k = 80;
  for (LetheRtDType dtype :
       {LETHE_DTYPE_F32, LETHE_DTYPE_F16, LETHE_DTYPE_BF16}) {
    uint64_t elt = dtype == LETHE_DTYPE_F32 ? 4 : 2;
    LetheRtBuf a = {0, batch * m * k * elt}, b = {kMiB, batch * k * n * elt},
               bias = {2 * kMiB, n * elt}, c = {3 * kMiB, batch * m * n * elt};
    letheRtFill(rt, a, dtype, 1);
    letheRtFill(rt, b, dtype, 2);
    letheRtFill(rt, bias, dtype, 3);
    std::vector<double> A = readFloats(rt, a, dtype),
                        B = readFloats(rt, b, dtype),
                        Bias = readFloats(rt, bias, dtype);
    for (int transA = 0; transA < 2; ++transA)
      for (int transB = 0; transB < 2; ++transB)
        for (int withBias = 0; withBias < 2; ++withBias) {
          LetheRtGemm g = {
              dtype, transA, transB, batch, m,
              n,     k,      a,      b,     withBias ? bias : LetheRtBuf{0, 0},
              c};
          LetheRtStatus s = letheRtGemm(rt, "selftest gemm", 0, &g);
          std::vector<double> C = readFloats(rt, c, dtype);
          double err = 0, norm = 0;
          for (int64_t p = 0; p < batch; ++p)
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double ref = withBias ? Bias[j] : 0;
                for (int64_t q = 0; q < k; ++q) {
                  double x = transA ? A[p * k * m + q * m + i]
                                    : A[p * m * k + i * k + q];
                  double y = transB ? B[p * n * k + j * k + q]
                                    : B[p * k * n + q * n + j];
                  ref += x * y;
                }
                double got = C[p * m * n + i * n + j];
                err += (got - ref) * (got - ref);
                norm += ref * ref;
              }
          double rel = std::sqrt(err / norm);
          double tol = dtype == LETHE_DTYPE_F32   ? 1e-5
                       : dtype == LETHE_DTYPE_F16 ? 2e-3
                                                  : 1e-2;
          char detail[128];
          std::snprintf(detail, sizeof(detail), "rel. error %.2e (tol %.0e)%s",
                        rel, tol, s ? letheRtGetErrorMessage(rt) : "");
          check(s == LETHE_RT_OK && rel < tol,
                "gemm dtype " + std::to_string(dtype) + " transA " +
                    std::to_string(transA) + " transB " +
                    std::to_string(transB) + " bias " +
                    std::to_string(withBias),
                detail);
        }
  }
}

uint32_t finiteWordHost(uint64_t index) {
  uint32_t x = (uint32_t)((index * kGolden) >> 32);
  return 0x3C003C00u | (x & 0x83FF83FFu);
}

void testReplayWrites(LetheRt *rt) {
  LetheRtBuf in = {0, 3 * kMiB + 5}, out = {4 * kMiB, kMiB + 3};
  letheRtFill(rt, in, LETHE_DTYPE_RAW, 9);
  letheRtFill(rt, out, LETHE_DTYPE_RAW, 10);
  letheRtReplay(rt, "selftest replay", 50.0, &in, 1, &out, 1);
  const unsigned char *p = toHost(rt, out);
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < out.bytes; ++i)
    wrong += p[i] != (unsigned char)(finiteWordHost(i / 4) >> (8 * (i % 4)));
  check(wrong == 0, "replay writes every output byte",
        std::to_string(wrong) + " bytes differ");
}

void testHashOp() {
  LetheRt *rt = makeRuntime(LETHE_MODE_CHECKSUM);
  if (!rt)
    return;
  LetheRtBuf x = {0, kMiB + 5}, y = {2 * kMiB, 4096};
  LetheRtBuf outs[2] = {{3 * kMiB, 777}, {4 * kMiB, 65536}};
  letheRtFill(rt, x, LETHE_DTYPE_RAW, 1);
  letheRtFill(rt, y, LETHE_DTYPE_BF16, 2);
  LetheRtBuf ins[2] = {x, y};
  letheRtReplay(rt, "selftest hash", 10.0, ins, 2, outs, 2);
  uint64_t seed = seedStart(2);
  seed = foldDigest(seed, hostDigest(toHost(rt, x), x.bytes));
  seed = foldDigest(seed, hostDigest(toHost(rt, y), y.bytes));
  for (uint32_t o = 0; o < 2; ++o) {
    const unsigned char *p = toHost(rt, outs[o]);
    uint64_t oseed = outputSeed(seed, o), wrong = 0;
    for (uint64_t i = 0; i < outs[o].bytes; ++i)
      wrong +=
          p[i] != (unsigned char)(outputWord(oseed, i / 8) >> (8 * (i % 8)));
    check(wrong == 0,
          "hash op output " + std::to_string(o) + " matches the host reference",
          std::to_string(wrong) + " bytes differ");
  }
  LetheRtBuf victim = {8 * kMiB, 12345};
  letheRtFill(rt, victim, LETHE_DTYPE_RAW, 3);
  letheRtRelease(rt, LETHE_STREAM_H2D, victim);
  const unsigned char *p = toHost(rt, victim);
  uint64_t notPoison = 0;
  for (uint64_t i = 0; i < victim.bytes; ++i)
    notPoison += p[i] != 0xEB;
  check(notPoison == 0, "release poisons in checksum mode");
  check(letheRtGetStatus(rt) == LETHE_RT_OK, "checksum-mode runtime ok",
        letheRtGetErrorMessage(rt));
  letheRtDestroy(rt);
}

void testCrossStreamCopies(LetheRt *rt) {
  LetheRtBuf src = {0, 32 * kMiB}, dst = {32 * kMiB, 32 * kMiB};
  letheRtFill(rt, src, LETHE_DTYPE_RAW, 77);
  letheRtFill(rt, dst, LETHE_DTYPE_RAW, 78);
  letheRtStepBegin(rt);
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
  letheRtWait(rt, LETHE_STREAM_D2H, 0);
  letheRtCopyD2H(rt, src.offset, 0, src.bytes);
  letheRtRecord(rt, LETHE_STREAM_D2H, 1);
  letheRtWait(rt, LETHE_STREAM_H2D, 1);
  letheRtCopyH2D(rt, 0, dst.offset, dst.bytes);
  letheRtRecord(rt, LETHE_STREAM_H2D, 2);
  letheRtWait(rt, LETHE_STREAM_COMPUTE, 2);
  letheRtChecksum(rt, "src", src);
  letheRtChecksum(rt, "dst", dst);
  letheRtStepEnd(rt);
  uint64_t a = namedChecksum(rt, "src"), b = namedChecksum(rt, "dst");
  check(a == b && a != 0, "D2H then H2D ordered by events round-trips");
}

void testErrors(LetheRt *rt) {
  LetheRtBuf in = {0, 16}, out = {60 * kMiB, 8 * kMiB};
  LetheRtStatus s = letheRtReplay(rt, "aten.relu %9", 1.0, &in, 1, &out, 1);
  std::string msg = letheRtGetErrorMessage(rt);
  check(s == LETHE_RT_INVALID_ARGUMENT &&
            msg.find("letheRtReplay 'aten.relu %9': output 0") == 0 &&
            msg.find("lies outside the device arena") != std::string::npos,
        "out-of-arena output is refused", msg);
  check(letheRtReplay(rt, "next", 1.0, &in, 1, &in, 1) == s,
        "errors are sticky");
  letheRtClearInvalidArgument(rt);
  letheRtStepBegin(rt);
  s = letheRtWait(rt, LETHE_STREAM_COMPUTE, 3);
  msg = letheRtGetErrorMessage(rt);
  check(s == LETHE_RT_INVALID_ARGUMENT &&
            msg.find("was not recorded in this step") != std::string::npos,
        "a wait on an unrecorded event is refused", msg);
  letheRtClearInvalidArgument(rt);
  check(letheRtGetStatus(rt) == LETHE_RT_OK, "invalid arguments clear");
}

void testCollectives() {
  for (LetheRtMode mode : {LETHE_MODE_TIMING, LETHE_MODE_CHECKSUM}) {
    LetheRt *rt = makeRuntime(mode);
    if (!rt)
      return;
    std::string tag = mode == LETHE_MODE_TIMING ? " (timing)" : " (checksum)";
    LetheRtStatus s = letheRtCommInit(rt, 1, 0, nullptr);
    if (s == LETHE_RT_UNSUPPORTED) {
      std::printf("SKIP collectives: %s\n", letheRtGetErrorMessage(rt));
      letheRtDestroy(rt);
      return;
    }
    LetheRtBuf a = {0, 4 * kMiB}, b = {4 * kMiB, 4 * kMiB},
               c = {8 * kMiB, 4 * kMiB}, d = {12 * kMiB, 4 * kMiB};
    letheRtFill(rt, a, LETHE_DTYPE_F32, 1);
    letheRtStepBegin(rt);
    letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0);
    letheRtWait(rt, LETHE_STREAM_COMM, 0);
    letheRtAllReduce(rt, "all_reduce", a, b, LETHE_DTYPE_F32);
    letheRtAllGather(rt, "all_gather", a, c, LETHE_DTYPE_F32);
    letheRtReduceScatter(rt, "reduce_scatter", a, d, LETHE_DTYPE_F32);
    letheRtRecord(rt, LETHE_STREAM_COMM, 1);
    letheRtWait(rt, LETHE_STREAM_COMPUTE, 1);
    letheRtChecksum(rt, "a", a);
    letheRtChecksum(rt, "b", b);
    letheRtChecksum(rt, "c", c);
    letheRtChecksum(rt, "d", d);
    letheRtStepEnd(rt);
    uint64_t v[4] = {};
    for (uint32_t i = 0; i < 4; ++i)
      letheRtGetChecksum(rt, i, nullptr, &v[i]);
    check(letheRtGetStatus(rt) == LETHE_RT_OK && v[0] == v[1] && v[0] == v[2] &&
              v[0] == v[3],
          "collectives on one rank copy their input" + tag,
          letheRtGetErrorMessage(rt));
    letheRtDestroy(rt);
  }
}

} // namespace

int main() {
  LetheRt *rt = makeRuntime(LETHE_MODE_TIMING);
  if (!rt) {
    std::printf("0 passed, 1 failed\n");
    return 1;
  }
  testDigests(rt);
  testFillValues(rt);
  testGemm(rt);
  testReplayWrites(rt);
  testCrossStreamCopies(rt);
  testErrors(rt);
  check(letheRtGetStatus(rt) == LETHE_RT_OK, "timing runtime ok",
        letheRtGetErrorMessage(rt));
  letheRtDestroy(rt);
  testHashOp();
  testCollectives();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

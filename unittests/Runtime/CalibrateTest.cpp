//===- CalibrateTest.cpp - lethe-calibrate without a GPU ------------------===//
//
// What lethe-calibrate does with its measurements needs no device: the
// fits of time against size, the profile fields derived from them (clamped
// into the loader's ranges), the base profile carried over, and the JSON it
// writes. The profile written from fixtureMeasurements() is checked in as
// test/Runtime/Inputs/calibrated-profile.json, which the lit test
// test/Runtime/calibrate-profile.test loads with `lethe report --device`:
// writer and loader are held to one format from both sides.
//
//===----------------------------------------------------------------------===//

#include "lethe/Runtime/Calibrate.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

using namespace lethe::rt::calibrate;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

/// Per-copy times of `fixedUs + bytes / gbps`.
double copyUs(uint64_t bytes, double fixedUs, double gbps) {
  return fixedUs + bytes / gbps / 1e3;
}

/// An H100-like pair of GPUs (figures of issue 17 where it has them).
Measurements fixtureMeasurements() {
  Measurements m;
  m.device = "NVIDIA H100 80GB HBM3";
  m.sms = 132;
  m.deviceMemoryBytes = 85017493504.0;
  m.hostMemoryBytes = 256.0 * (1ull << 30);
  m.gpus = 2;
  m.date = "2026-01-02";
  m.software = "CUDA runtime 13.0, driver API 13.0";
  for (uint64_t bytes = 64 << 10; bytes <= 1024 * kMiB; bytes *= 4) {
    CopyPoint p;
    p.bytes = bytes;
    p.count =
        (int)std::max<uint64_t>(1, std::min<uint64_t>(128, 256 * kMiB / bytes));
    p.d2hUs = copyUs(bytes, 4.0, 54.4);
    p.h2dUs = copyUs(bytes, 3.0, 52.6);
    p.d2hBothUs = copyUs(bytes, 4.0, 40.6);
    p.h2dBothUs = copyUs(bytes, 3.0, 40.6);
    m.copies.push_back(p);
  }
  m.hbmBytesPerSec = 2.87e12;
  m.memoryKernelBytesPerSec = 2.61e12;
  m.peakFlops = {{"bf16", 798.26e12}, {"f16", 770.55e12}, {"f8", 1436.0e12},
                 {"tf32", 413.14e12}, {"f32", 51.19e12},  {"f64", 60.7e12}};
  m.skippedDtypes = {{"i8", "cuBLASLt has no algorithm for it on this GPU"}};
  m.unalignedFractions = {0.168, 0.179};
  m.launchUs = 3.33;
  m.viewUs = 1.25;
  m.hostLaunchUs = 2.61;
  m.graphKernelUs = 1.07;
  m.graphLaunchUs = 2.4;
  m.eventRecordUs = 0.02;
  m.waitUs = 1.93;
  m.graphWaitUs = -0.04; // noise around zero: written as 0
  m.matmul = {30.1, 30.7, 30.4, 31.3};
  m.memoryBound = {30.0, 31.5, 31.2, 33.0};
  m.contentionBytes = 1024 * kMiB;
  m.d2hAloneGBs = 54.1;
  m.h2dAloneGBs = 52.5;
  m.d2hDuringMatmulGBs = 53.9;
  m.h2dDuringMatmulGBs = 53.0; // faster than alone: noise, clamped to 1
  m.d2hDuringMemoryGBs = 48.0;
  m.h2dDuringMemoryGBs = 47.0;
  m.host = {{1, 512 * kMiB, 54.4, 52.6, 81.2, 54.4, 52.6, 81.2},
            {2, 512 * kMiB, 49.7, 46.85, 61.6, 49.7, 46.3, 61.0},
            {2, 8 * kMiB, 48.9, 46.0, 60.1, 48.8, 45.7, 59.8}};
  for (uint64_t shard : {1 * kMiB, 16 * kMiB, 256 * kMiB}) {
    // 2 ranks: bus bytes = shard (all-gather), 2 x shard (all-reduce).
    m.collectives.push_back({"all_gather", 2, 2 * shard, 20.0 + shard / 350e3});
    m.collectives.push_back(
        {"all_reduce", 2, 2 * shard, 30.0 + 2 * shard / 330e3});
  }
  m.contendedCollectiveBytes = 512 * kMiB;
  m.collectiveAloneMs = 0.79;
  m.collectiveBesideD2HMs = 0.797;
  m.collectiveBesideBothMs = 0.80;
  m.hostD2HAloneGBs = 49.7;
  m.hostH2DAloneGBs = 46.85;
  m.hostD2HDuringCollectiveGBs = 49.5;
  m.hostH2DDuringCollectiveGBs = 46.85;
  return m;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const ProfileField *find(const std::vector<ProfileField> &fields,
                         const std::string &key) {
  for (const ProfileField &f : fields)
    if (f.key == key)
      return &f;
  return nullptr;
}

std::string value(const std::vector<ProfileField> &fields,
                  const std::string &key) {
  const ProfileField *f = find(fields, key);
  return f ? f->json : "<missing>";
}

std::string member(const std::vector<ProfileField> &fields,
                   const std::string &key, const std::string &name) {
  const ProfileField *f = find(fields, key);
  if (!f)
    return "<missing>";
  for (const auto &[k, v] : f->members)
    if (k == name)
      return v;
  return "<missing>";
}

TEST(CalibrateFit, RecoversFixedCostAndBandwidth) {
  std::vector<Sample> samples;
  for (double bytes = 65536; bytes <= 1 << 30; bytes *= 4)
    samples.push_back({bytes, copyUs((uint64_t)bytes, 4.0, 54.4)});
  RateFit fit = fitRate(samples);
  ASSERT_TRUE(fit.valid);
  EXPECT_NEAR(fit.fixedUs, 4.0, 1e-6);
  EXPECT_NEAR(fit.bytesPerSec, 54.4e9, 1e3);
  EXPECT_LT(fit.maxRelError, 1e-9);
}

TEST(CalibrateFit, RelativeErrorWeighsSmallCopies) {
  // 5% noise on every sample, alternating in sign: the fit stays within a
  // few percent on both ends instead of trading the small copies' fixed
  // cost for the large ones' absolute error.
  std::vector<Sample> samples;
  int i = 0;
  for (double bytes = 65536; bytes <= 1 << 30; bytes *= 4, ++i)
    samples.push_back(
        {bytes, copyUs((uint64_t)bytes, 5.0, 50.0) * (i % 2 ? 1.05 : 0.95)});
  RateFit fit = fitRate(samples);
  ASSERT_TRUE(fit.valid);
  EXPECT_NEAR(fit.bytesPerSec / 1e9, 50.0, 2.5);
  EXPECT_NEAR(fit.fixedUs, 5.0, 0.5);
  EXPECT_NEAR(fit.maxRelError, 0.05, 0.02);
}

TEST(CalibrateFit, NegativeInterceptFitsThroughTheOrigin) {
  // Small copies faster than the line through the large ones: a negative
  // fixed cost is noise, so the fit is a pure bandwidth.
  std::vector<Sample> samples = {{1e6, 19.0}, {1e8, 2000.0}, {1e9, 20000.0}};
  RateFit fit = fitRate(samples);
  ASSERT_TRUE(fit.valid);
  EXPECT_EQ(fit.fixedUs, 0.0);
  EXPECT_GT(fit.bytesPerSec, 49e9);
  EXPECT_LT(fit.bytesPerSec, 52e9);
}

TEST(CalibrateFit, DegenerateInputs) {
  EXPECT_FALSE(fitRate({}).valid);
  EXPECT_FALSE(fitRate({{0, 10}, {1e6, 0}}).valid);
  // One sample: a bandwidth through the origin.
  RateFit one = fitRate({{1e9, 20000}});
  ASSERT_TRUE(one.valid);
  EXPECT_EQ(one.fixedUs, 0.0);
  EXPECT_NEAR(one.bytesPerSec, 50e9, 1);
}

TEST(CalibrateFit, BusBytesFollowTheRing) {
  EXPECT_DOUBLE_EQ(busBytes({"all_gather", 4, 1 << 20, 0}), 0.75 * (1 << 20));
  EXPECT_DOUBLE_EQ(busBytes({"all_reduce", 4, 1 << 20, 0}), 1.5 * (1 << 20));
  EXPECT_DOUBLE_EQ(busBytes({"all_gather", 1, 1 << 20, 0}), 0.0);
}

TEST(CalibrateJson, SplitsObjectsIntoRawMembers) {
  RawObject o;
  std::string error;
  ASSERT_TRUE(parseRawObject(
      "{\"a\": 1.5e3, \"b\": {\"x\": [1, {\"y\": \"}\"}]}, \"c\\u0041\": "
      "\"q\\\"t\", \"d\": null}",
      o, error))
      << error;
  ASSERT_EQ(o.members.size(), 4u);
  EXPECT_EQ(*o.get("a"), "1.5e3");
  EXPECT_EQ(*o.get("b"), "{\"x\": [1, {\"y\": \"}\"}]}");
  EXPECT_EQ(*o.get("cA"), "\"q\\\"t\"");
  EXPECT_EQ(*o.get("d"), "null");
  EXPECT_EQ(o.get("e"), nullptr);

  EXPECT_FALSE(parseRawObject("{\"a\": 1,\n \"b\" 2}", o, error));
  EXPECT_EQ(error, "line 2: expected ':' after \"b\"");
  EXPECT_FALSE(parseRawObject("{\"a\": 1} x", o, error));
  EXPECT_EQ(error, "line 1: unexpected text after the object");
  EXPECT_FALSE(parseRawObject("{\"a\": 1x}", o, error));
  EXPECT_EQ(error, "line 1: bad number '1x'");
  EXPECT_FALSE(parseRawObject("[1]", o, error));
  EXPECT_EQ(error, "line 1: expected '{'");
}

TEST(CalibrateProfile, DerivedFieldsAreFittedAndClamped) {
  std::vector<ProfileField> f =
      deriveProfile(fixtureMeasurements(), nullptr, "");
  EXPECT_EQ(value(f, "name"), "\"nvidia-h100-80gb-hbm3\"");
  // Fits of the per-copy times: bandwidth and fixed cost.
  EXPECT_EQ(value(f, "d2h_gb_per_s"), "54.4");
  EXPECT_EQ(value(f, "d2h_fixed_us"), "4");
  EXPECT_EQ(value(f, "h2d_gb_per_s"), "52.6");
  EXPECT_EQ(value(f, "h2d_fixed_us"), "3");
  // Duplex at the largest size: the lower of the two directions' ratios.
  EXPECT_EQ(value(f, "duplex_factor"), "0.75");
  // The sums over the GPUs of the host, at the largest size with all GPUs.
  EXPECT_EQ(value(f, "host_d2h_gb_per_s"), "99.4");
  EXPECT_EQ(value(f, "host_h2d_gb_per_s"), "93.7");
  EXPECT_EQ(value(f, "host_both_gb_per_s"), "123.2");
  // One direction: the mean of D2H (x1.020) and H2D (x1.010).
  EXPECT_EQ(value(f, "matmul_slowdown_with_copies"), "1.015");
  EXPECT_EQ(value(f, "memory_bound_slowdown_with_both_copies"), "1.1");
  // H2D beside GEMMs ran faster than alone (x1.010): the mean is kept at 1.
  EXPECT_EQ(value(f, "copy_slowdown_with_matmul"), "1");
  EXPECT_EQ(value(f, "copy_slowdown_with_memory_bound"), "0.891");
  // Collectives: the all-gather fit over bus bytes.
  EXPECT_EQ(value(f, "nvlink_gb_per_s"), "350");
  EXPECT_EQ(value(f, "collective_fixed_us"), "20");
  EXPECT_EQ(value(f, "collective_slowdown_with_both_copies"), "1.013");
  // A wait cost below zero is noise: 0, and the note says so.
  EXPECT_EQ(value(f, "graph_wait_us"), "0");
  EXPECT_NE(find(f, "graph_wait_us")->noteJson.find("noise, written as 0"),
            std::string::npos);
  EXPECT_EQ(member(f, "peak_tflops", "bf16"), "798.3");
  EXPECT_EQ(member(f, "peak_tflops", "i8"), "<missing>");
  EXPECT_EQ(member(f, "kernel_efficiency", "unaligned_matmul"), "0.17");
  EXPECT_EQ(member(f, "kernel_efficiency", "attention"), "<missing>");
  // Half of 256 GiB of host memory shared by 2 GPUs.
  EXPECT_EQ(value(f, "host_pinned_bytes"), "68719476736");
  EXPECT_EQ(value(f, "device_memory_bytes"), "85017493504");
}

TEST(CalibrateProfile, KernelSlowdownsArePerRoundRatiosWhereMeasured) {
  // The medians of the rounds say x1.020 / x1.010 one way and x1.040 both
  // ways; the medians of each round's own ratio (what drifts between rounds
  // cancels within one) say less, and are what the profile keeps.
  Measurements m = fixtureMeasurements();
  m.matmul.d2hSlowdown = 1.004;
  m.matmul.h2dSlowdown = 1.008;
  m.matmul.bothSlowdown = 1.012;
  std::vector<ProfileField> f = deriveProfile(m, nullptr, "");
  EXPECT_EQ(value(f, "matmul_slowdown_with_copies"), "1.006");
  EXPECT_EQ(value(f, "matmul_slowdown_with_both_copies"), "1.012");
  EXPECT_NE(find(f, "matmul_slowdown_with_copies")
                ->noteJson.find("median of per-round ratios"),
            std::string::npos);
  // A paired ratio below 1 (a loop faster beside copies) is kept at 1.
  m.matmul.d2hSlowdown = m.matmul.h2dSlowdown = 0.99;
  f = deriveProfile(m, nullptr, "");
  EXPECT_EQ(value(f, "matmul_slowdown_with_copies"), "1");
}

TEST(CalibrateProfile, WritesTheCheckedInFixture) {
  std::string written =
      writeProfile(deriveProfile(fixtureMeasurements(), nullptr, "h100-test"));
  std::string path = std::string(LETHE_SOURCE_DIR) +
                     "/test/Runtime/Inputs/calibrated-profile.json";
  if (std::getenv("LETHE_UPDATE_FIXTURES")) {
    std::ofstream(path) << written;
    GTEST_SKIP() << "wrote " << path;
  }
  EXPECT_EQ(written, readFile(path))
      << "the profile writer changed: review the difference, then rerun "
         "with LETHE_UPDATE_FIXTURES=1 to refresh "
      << path;
}

TEST(CalibrateProfile, CarriesTheBaseProfileOver) {
  std::string path = ::testing::TempDir() + "calibrate-base.json";
  std::ofstream(path) << R"({
  "name": "h100",
  "description": "H100 SXM5",
  "peak_tflops": {"bf16": 700, "i8": 1400.5, "f32": 50},
  "kernel_efficiency": {"attention": 0.79, "convolution": 0.35,
                        "unaligned_matmul": 0.2},
  "hbm_gb_per_s": 3000,
  "d2h_gb_per_s": 50,
  "h2d_gb_per_s": 50,
  "launch_overhead_us": 3,
  "device_memory_bytes": 85017493504,
  "host_pinned_bytes": 68719476736,
  "notes": {"kernel_efficiency": "torch SDPA, \"measured\"",
            "host_pinned_bytes": "64 GiB: a \"policy\""}
})";
  BaseProfile base;
  std::string error;
  ASSERT_TRUE(loadBaseProfile(path, base, error)) << error;
  Measurements m = fixtureMeasurements();
  m.gpus = 1;
  m.host.clear();
  m.collectives.clear();
  m.collectiveAloneMs = 0;
  m.hostD2HDuringCollectiveGBs = m.hostH2DDuringCollectiveGBs = 0;
  std::vector<ProfileField> f = deriveProfile(m, &base, "");
  // The base's name; its description, with how this one was made.
  EXPECT_EQ(value(f, "name"), "\"h100\"");
  EXPECT_EQ(value(f, "description"),
            "\"H100 SXM5; NVIDIA H100 80GB HBM3 (132 SMs, 79.2 GiB); "
            "measured by lethe-calibrate on 2026-01-02\"");
  // Measured figures win; what was not measured comes from the base.
  EXPECT_EQ(member(f, "peak_tflops", "bf16"), "798.3");
  EXPECT_EQ(member(f, "peak_tflops", "i8"), "1400.5");
  EXPECT_EQ(member(f, "kernel_efficiency", "attention"), "0.79");
  EXPECT_EQ(member(f, "kernel_efficiency", "unaligned_matmul"), "0.17");
  EXPECT_EQ(value(f, "host_pinned_bytes"), "68719476736");
  EXPECT_EQ(find(f, "host_pinned_bytes")->noteJson,
            "\"not measured by lethe-calibrate; from " + path +
                ": 64 GiB: a \\\"policy\\\"\"");
  EXPECT_NE(find(f, "peak_tflops")->noteJson.find("from " + path + ": i8"),
            std::string::npos);
  // One GPU: no host sharing or collective figures, from anywhere.
  EXPECT_EQ(find(f, "host_d2h_gb_per_s"), nullptr);
  EXPECT_EQ(find(f, "nvlink_gb_per_s"), nullptr);
  // Notes with escapes survive as JSON.
  std::string text = writeProfile(f);
  RawObject all, notes;
  ASSERT_TRUE(parseRawObject(text, all, error)) << error;
  ASSERT_TRUE(parseRawObject(*all.get("notes"), notes, error)) << error;
  EXPECT_NE(notes.get("host_pinned_bytes")->find("a \\\"policy\\\"\""),
            std::string::npos);
  EXPECT_NE(notes.get("kernel_efficiency")
                ->find("from " + path + ": attention convolution"),
            std::string::npos);

  EXPECT_FALSE(loadBaseProfile(path + ".missing", base, error));
  EXPECT_EQ(error, path + ".missing: cannot read the base profile");
  std::remove(path.c_str());
}

TEST(CalibrateProfile, Slug) {
  EXPECT_EQ(slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
  EXPECT_EQ(slug("  GH200 (480GB) "), "gh200-480gb");
  EXPECT_EQ(slug("--"), "gpu");
}

} // namespace

// Everything one gated round enqueues waits behind the start gate, so a
// round stays far below a stream's queue depth (about a thousand pending
// operations): a host call that finds the queue full blocks until the GPU
// drains it, which it cannot while the gate is closed.
TEST(CalibrateRounds, ItemsPerRoundStayWithinTheCap) {
  const int most = kMaxOpsPerStream - kGateOps;
  // 256 MiB of 64 KiB copies would be 4096 copies; a round takes 61.
  EXPECT_EQ(itemsPerRound(256.0 * 1024 / 64), most);
  EXPECT_EQ(itemsPerRound(3.2), 4); // rounded up
  EXPECT_EQ(itemsPerRound(1), 1);
  EXPECT_EQ(itemsPerRound(0.01), 1); // at least one
  EXPECT_EQ(itemsPerRound(0), 1);
  EXPECT_EQ(itemsPerRound(std::nan("")), 1);
  EXPECT_EQ(itemsPerRound(1e30), most);
  // Items of several operations each (an NCCL call: up to 4).
  EXPECT_EQ(itemsPerRound(20, 4), most / 4);
  EXPECT_EQ(itemsPerRound(20, 4) * 4 + kGateOps <= kMaxOpsPerStream, true);
  EXPECT_EQ(itemsPerRound(5, 4), 5);
  // An item larger than the cap still runs once.
  EXPECT_EQ(itemsPerRound(3, 1000), 1);
  for (double wanted : {1.0, 7.5, 60.0, 61.0, 62.0, 1000.0})
    for (int each : {1, 2, 3, 4, 9})
      EXPECT_LE(itemsPerRound(wanted, each) * each + kGateOps, kMaxOpsPerStream)
          << wanted << " x " << each;
}

TEST(CalibrateRounds, BusiestStreamSumsTheLanesOfOneStream) {
  // Two lanes on stream 1 (D2H copies beside D2H copies) add up; a lane
  // on another stream does not.
  EXPECT_EQ(busiestStreamOps({{1, 30}, {2, 50}, {1, 25}}), 55 + kGateOps);
  EXPECT_EQ(busiestStreamOps({{1, 61}}), kMaxOpsPerStream);
  EXPECT_GT(busiestStreamOps({{1, 61}, {1, 1}}), kMaxOpsPerStream);
  EXPECT_EQ(busiestStreamOps({}), kGateOps);
}

// An NCCL lane runs on every GPU: each endpoint is timed from the lane's
// first endpoint on its own device, since CUDA cannot time an event pair
// of two devices ("invalid resource handle" from a GPU-0 begin and a GPU-1
// end was the bug).
TEST(CalibrateRounds, EndpointsAreTimedFromABeginOnTheirDevice) {
  EXPECT_EQ(timingOrigins({0, 1}), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(timingOrigins({0, 1, 0, 1}), (std::vector<size_t>{0, 1, 0, 1}));
  EXPECT_EQ(timingOrigins({3, 3, 2}), (std::vector<size_t>{0, 0, 2}));
  EXPECT_EQ(timingOrigins({}), std::vector<size_t>{});
}

// Interleaved measurements (a loop alone and beside copies) rotate each
// round: over `sets` rounds every set runs once in every position, so no
// set always runs first, on colder clocks.
TEST(CalibrateRounds, InterleavedRoundsRotate) {
  EXPECT_EQ(interleavedOrder(3, 0), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(interleavedOrder(3, 1), (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(interleavedOrder(1, 5), std::vector<size_t>{0});
  for (size_t sets : {2u, 4u, 5u}) {
    std::vector<std::vector<int>> seen(sets, std::vector<int>(sets, 0));
    for (int round = 1; round <= (int)sets; ++round) {
      std::vector<size_t> order = interleavedOrder(sets, round);
      ASSERT_EQ(order.size(), sets);
      for (size_t pos = 0; pos < sets; ++pos)
        ++seen[order[pos]][pos];
    }
    for (auto &row : seen)
      for (int n : row)
        EXPECT_EQ(n, 1) << sets << " sets";
  }
}

// A measurement that failed is listed with its reason, as are those taken
// without the gate; the profile keeps the base's fields for the first.
TEST(CalibrateReport, SummaryListsSkippedAndUngatedMeasurements) {
  Measurements m = fixtureMeasurements();
  m.skipped = {"GEMM rates: cublasLtCreate failed"};
  m.ungated = {"pinned copies by size: a start gate stayed closed 5 s (the "
               "host blocked while enqueueing); measured without the gate"};
  std::string text = summarize(m, deriveProfile(m, nullptr, ""));
  size_t skipped =
      text.find("## Not measured (the profile keeps the base's "
                "fields)\n\n- GEMM rates: cublasLtCreate failed\n");
  size_t ungated = text.find("## Measured without the start gate");
  size_t profile = text.find("## Profile");
  ASSERT_NE(skipped, std::string::npos) << text;
  ASSERT_NE(ungated, std::string::npos) << text;
  EXPECT_LT(skipped, profile);
  EXPECT_LT(ungated, profile);
  EXPECT_NE(text.find("- pinned copies by size: a start gate stayed closed"),
            std::string::npos);
  std::string samples = writeSamples(m);
  EXPECT_NE(samples.find("\"skipped\": [\n    \"GEMM rates: cublasLtCreate "
                         "failed\"\n  ]"),
            std::string::npos)
      << samples;

  Measurements clean = fixtureMeasurements();
  std::string plain = summarize(clean, deriveProfile(clean, nullptr, ""));
  EXPECT_EQ(plain.find("## Not measured"), std::string::npos);
  EXPECT_EQ(plain.find("## Measured without the start gate"),
            std::string::npos);
}

TEST(CalibrateLaunch, HostLaunchIsTheMedianOfAgreeingRounds) {
  std::string why;
  // One stalled round does not move the median.
  EXPECT_DOUBLE_EQ(hostLaunchFromRounds({4.1, 3.9, 4.0, 41.0, 4.2}, why), 4.1);
  EXPECT_TRUE(why.empty()) << why;
  // Rounds that did not measure (0, NaN) are dropped before counting.
  EXPECT_DOUBLE_EQ(hostLaunchFromRounds({3.0, 0.0, 3.2, NAN, 3.1}, why), 3.1);
  EXPECT_TRUE(why.empty()) << why;
}

TEST(CalibrateLaunch, ImplausibleHostLaunchIsNotKept) {
  std::string why;
  // The H100 calibration of 2026-11-26 that read 28.8 us.
  EXPECT_EQ(hostLaunchFromRounds({28.1, 28.8, 29.5}, why), 0.0);
  EXPECT_NE(why.find("past 20 us"), std::string::npos) << why;
  // Most rounds stalled: the median is over 1.5x the least round.
  EXPECT_EQ(hostLaunchFromRounds({4.0, 9.0, 9.5, 10.0, 11.0}, why), 0.0);
  EXPECT_NE(why.find("rounds disagree"), std::string::npos) << why;
  // Too few rounds kept the GPU busy.
  EXPECT_EQ(hostLaunchFromRounds({4.0, 4.1}, why), 0.0);
  EXPECT_NE(why.find("3 needed"), std::string::npos) << why;
}

TEST(CalibrateLaunch, HostLaunchNotKeptKeepsTheBaseProfiles) {
  // A figure not kept (0) writes no host_launch_us: the base profile's
  // stays, and the summary lists why.
  Measurements m = fixtureMeasurements();
  std::string why;
  m.hostLaunchUs = hostLaunchFromRounds({28.1, 28.8, 29.5}, why);
  m.skipped.push_back("host launch: " + why);
  std::vector<ProfileField> fields = deriveProfile(m, nullptr, "");
  for (const ProfileField &f : fields)
    EXPECT_NE(f.key, "host_launch_us");
  EXPECT_NE(summarize(m, fields).find("- host launch: of 28.8 us"),
            std::string::npos);
}

TEST(CalibrateProfile, GemmSlowdownComesFromTheMixedLoopWhereMeasured) {
  // Half the mixed loop's time is GEMMs; the memory-bound loop is x1.05
  // beside one direction, x1.10 beside both. A mixed loop of x1.03 leaves
  // the GEMMs x1.01 ((1.03 - 0.5 x 1.05) / 0.5); of x1.06, x1.02.
  EXPECT_NEAR(gemmSlowdownInMix(1.03, 1.05, 0.5), 1.01, 1e-12);
  EXPECT_EQ(gemmSlowdownInMix(1.03, 1.05, 0.0), 0.0);
  EXPECT_EQ(gemmSlowdownInMix(0.0, 1.05, 0.5), 0.0);
  Measurements m = fixtureMeasurements();
  m.memoryBound.d2hSlowdown = m.memoryBound.h2dSlowdown = 1.05;
  m.memoryBound.bothSlowdown = 1.10;
  m.matmul.d2hSlowdown = m.matmul.h2dSlowdown = 1.06; // the power limit's
  m.mixed = {20.0, 20.6, 20.6, 21.2};
  m.mixed.d2hSlowdown = m.mixed.h2dSlowdown = 1.03;
  m.mixed.bothSlowdown = 1.06;
  m.mixedMemoryPerGemm = 3;
  m.mixedGemmShare = 0.5;
  std::string one, both, note;
  for (const ProfileField &f : deriveProfile(m, nullptr, "")) {
    if (f.key == "matmul_slowdown_with_copies") {
      one = f.json;
      note = f.noteJson;
    }
    if (f.key == "matmul_slowdown_with_both_copies")
      both = f.json;
  }
  EXPECT_EQ(one, "1.01");
  EXPECT_EQ(both, "1.02");
  EXPECT_NE(note.find("each followed by 3 memory-bound replays"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("read x1.06"), std::string::npos) << note;
  // Without the mixed loop the GEMM loop's own factors are written.
  m.mixed = {};
  for (const ProfileField &f : deriveProfile(m, nullptr, ""))
    if (f.key == "matmul_slowdown_with_copies")
      EXPECT_EQ(f.json, "1.06");
}

//===- DeviceProfileTest.cpp ----------------------------------------------===//

#include "lethe/Support/DeviceProfile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace lethe;
using llvm::Expected;

namespace {

/// A minimal valid profile; tests edit one field at a time.
std::string minimalProfile(llvm::StringRef extra = "",
                           llvm::StringRef hbm = "\"hbm_gb_per_s\": 1000") {
  return (llvm::Twine("{\"name\": \"toy\", \"peak_tflops\": {\"f32\": 10, "
                      "\"bf16\": 100}, ") +
          hbm +
          ", \"d2h_gb_per_s\": 20, \"h2d_gb_per_s\": 25, "
          "\"launch_overhead_us\": 2, \"device_memory_bytes\": 1e9, "
          "\"host_pinned_bytes\": 2e9" +
          extra + "}")
      .str();
}

std::string errorOf(Expected<DeviceProfile> profile) {
  if (profile)
    return "<no error>";
  return llvm::toString(profile.takeError());
}

TEST(DeviceProfileTest, BuiltinsLoadAndAreSane) {
  std::vector<std::string> names = DeviceProfile::builtinNames();
  for (const char *expected :
       {"a100", "h100", "h200", "h200-nvlink", "h200-pcie"})
    EXPECT_TRUE(llvm::is_contained(names, expected)) << expected;
  for (const std::string &name : names) {
    Expected<DeviceProfile> profile = DeviceProfile::load(name);
    ASSERT_TRUE(bool(profile)) << llvm::toString(profile.takeError());
    EXPECT_EQ(profile->name, name);
    for (const char *dtype : {"bf16", "f16", "f32", "tf32", "f8", "f64"})
      EXPECT_TRUE(profile->peakFlops.count(dtype)) << name << " " << dtype;
    // Physical sanity: tensor cores beat plain f32, HBM beats PCIe, and
    // every figure has its source written down.
    EXPECT_GT(profile->flopsFor("bf16"), 4 * profile->flopsFor("f32"));
    EXPECT_GT(profile->hbmBytesPerSec, 20 * profile->d2hBytesPerSec);
    EXPECT_GT(profile->launchOverheadUs, profile->viewUs);
    for (const char *field :
         {"peak_tflops", "hbm_gb_per_s", "d2h_gb_per_s", "h2d_gb_per_s",
          "duplex_factor", "nvlink_gb_per_s", "launch_overhead_us",
          "view_us", "device_memory_bytes", "host_pinned_bytes"})
      EXPECT_TRUE(profile->notes.count(field)) << name << " " << field;
  }
}

TEST(DeviceProfileTest, H200FiguresInSIUnits) {
  Expected<DeviceProfile> h200 = DeviceProfile::load("h200");
  ASSERT_TRUE(bool(h200)) << llvm::toString(h200.takeError());
  // The figures lethe-calibrate measured (bench/results/calibrate.md).
  EXPECT_DOUBLE_EQ(h200->hbmBytesPerSec, 4.187e12);
  EXPECT_DOUBLE_EQ(h200->d2hBytesPerSec, 55.1e9);
  EXPECT_DOUBLE_EQ(h200->h2dBytesPerSec, 55.4e9);
  EXPECT_DOUBLE_EQ(h200->duplexFactor, 0.87);
  EXPECT_DOUBLE_EQ(h200->flopsFor("bf16"), 811.5e12);
  EXPECT_DOUBLE_EQ(h200->hostBothBytesPerSec, 170e9);
  EXPECT_DOUBLE_EQ(h200->collectiveFixedUs, 13.2);
}

TEST(DeviceProfileTest, CollectiveVariantsDifferOnlyInTheCollectivePath) {
  Expected<DeviceProfile> nvlink = DeviceProfile::load("h200-nvlink");
  Expected<DeviceProfile> pcie = DeviceProfile::load("h200-pcie");
  ASSERT_TRUE(nvlink && pcie);
  // Measured with lethe-rt-bench --collectives (bench/results/gpu-fsdp.md).
  EXPECT_DOUBLE_EQ(nvlink->collectiveSlowdownWithCopies, 1.007);
  EXPECT_DOUBLE_EQ(pcie->collectiveSlowdownWithCopies, 2.132);
  EXPECT_DOUBLE_EQ(pcie->collectiveSlowdownWithBothCopies, 2.132);
  EXPECT_DOUBLE_EQ(pcie->copySlowdownWithCollectives, 0.626);
  EXPECT_LT(pcie->nvlinkBytesPerSec, nvlink->nvlinkBytesPerSec);
  EXPECT_EQ(pcie->hbmBytesPerSec, nvlink->hbmBytesPerSec);
  EXPECT_EQ(pcie->d2hBytesPerSec, nvlink->d2hBytesPerSec);
}

TEST(DeviceProfileTest, ParsesOptionalFieldsAndDefaults) {
  Expected<DeviceProfile> toy = DeviceProfile::parse(minimalProfile(), "toy");
  ASSERT_TRUE(bool(toy)) << llvm::toString(toy.takeError());
  EXPECT_DOUBLE_EQ(toy->hbmBytesPerSec, 1e12);
  EXPECT_DOUBLE_EQ(toy->duplexFactor, 1.0);
  EXPECT_DOUBLE_EQ(toy->nvlinkBytesPerSec, 0.0);
  EXPECT_DOUBLE_EQ(toy->viewUs, 0.0);
  EXPECT_DOUBLE_EQ(toy->collectiveSlowdownWithCopies, 1.0);
  // An op class without an efficiency runs at the peak.
  EXPECT_DOUBLE_EQ(toy->efficiencyFor("attention"), 1.0);
  // A dtype the profile lacks runs at the f32 rate.
  EXPECT_DOUBLE_EQ(toy->flopsFor("f8"), 10e12);
  EXPECT_DOUBLE_EQ(toy->flopsFor("bf16"), 100e12);

  Expected<DeviceProfile> noted = DeviceProfile::parse(
      minimalProfile(", \"duplex_factor\": 0.5, \"notes\": "
                     "{\"duplex_factor\": \"guessed\"}"),
      "toy");
  ASSERT_TRUE(bool(noted)) << llvm::toString(noted.takeError());
  EXPECT_DOUBLE_EQ(noted->duplexFactor, 0.5);
  Expected<DeviceProfile> efficient = DeviceProfile::parse(
      minimalProfile(", \"kernel_efficiency\": {\"attention\": 0.8}"),
      "toy");
  ASSERT_TRUE(bool(efficient)) << llvm::toString(efficient.takeError());
  EXPECT_DOUBLE_EQ(efficient->efficiencyFor("attention"), 0.8);
  EXPECT_DOUBLE_EQ(efficient->efficiencyFor("convolution"), 1.0);
  EXPECT_EQ(noted->notes.lookup("duplex_factor"), "guessed");
}

// What lethe-calibrate adds (fixed costs, host sharing, kernel and copy
// contention, launch and wait costs): optional, so older profiles load with
// the neutral defaults, and read in SI units where the file says GB/s.
TEST(DeviceProfileTest, CalibrationFieldsDefaultAndParse) {
  Expected<DeviceProfile> old = DeviceProfile::parse(minimalProfile(), "old");
  ASSERT_TRUE(bool(old)) << llvm::toString(old.takeError());
  EXPECT_DOUBLE_EQ(old->d2hFixedUs, 0.0);
  EXPECT_DOUBLE_EQ(old->hostBothBytesPerSec, 0.0);
  EXPECT_DOUBLE_EQ(old->matmulSlowdownWithBothCopies, 1.0);
  EXPECT_DOUBLE_EQ(old->copySlowdownWithMemoryBound, 1.0);
  EXPECT_DOUBLE_EQ(old->graphWaitUs, 0.0);

  Expected<DeviceProfile> calibrated = DeviceProfile::parse(
      minimalProfile(", \"d2h_fixed_us\": 4.5, \"h2d_fixed_us\": 3.5, "
                     "\"host_d2h_gb_per_s\": 99.4, \"host_h2d_gb_per_s\": 93.7, "
                     "\"host_both_gb_per_s\": 123.2, "
                     "\"matmul_slowdown_with_copies\": 1.02, "
                     "\"matmul_slowdown_with_both_copies\": 1.04, "
                     "\"memory_bound_slowdown_with_copies\": 1.03, "
                     "\"memory_bound_slowdown_with_both_copies\": 1.06, "
                     "\"copy_slowdown_with_matmul\": 0.97, "
                     "\"copy_slowdown_with_memory_bound\": 0.9, "
                     "\"host_launch_us\": 2.6, \"graph_kernel_us\": 1.1, "
                     "\"graph_launch_us\": 4, \"event_record_us\": 0.1, "
                     "\"wait_us\": 1.9, \"graph_wait_us\": 1.2, "
                     "\"collective_fixed_us\": 25, "
                     "\"notes\": {\"host_both_gb_per_s\": \"2 GPUs\"}"),
      "calibrated");
  ASSERT_TRUE(bool(calibrated)) << llvm::toString(calibrated.takeError());
  EXPECT_DOUBLE_EQ(calibrated->d2hFixedUs, 4.5);
  EXPECT_DOUBLE_EQ(calibrated->h2dFixedUs, 3.5);
  EXPECT_DOUBLE_EQ(calibrated->hostD2HBytesPerSec, 99.4e9);
  EXPECT_DOUBLE_EQ(calibrated->hostH2DBytesPerSec, 93.7e9);
  EXPECT_DOUBLE_EQ(calibrated->hostBothBytesPerSec, 123.2e9);
  EXPECT_DOUBLE_EQ(calibrated->matmulSlowdownWithCopies, 1.02);
  EXPECT_DOUBLE_EQ(calibrated->memoryBoundSlowdownWithBothCopies, 1.06);
  EXPECT_DOUBLE_EQ(calibrated->copySlowdownWithMatmul, 0.97);
  EXPECT_DOUBLE_EQ(calibrated->copySlowdownWithMemoryBound, 0.9);
  EXPECT_DOUBLE_EQ(calibrated->hostLaunchUs, 2.6);
  EXPECT_DOUBLE_EQ(calibrated->graphKernelUs, 1.1);
  EXPECT_DOUBLE_EQ(calibrated->graphLaunchUs, 4.0);
  EXPECT_DOUBLE_EQ(calibrated->eventRecordUs, 0.1);
  EXPECT_DOUBLE_EQ(calibrated->waitUs, 1.9);
  EXPECT_DOUBLE_EQ(calibrated->graphWaitUs, 1.2);
  EXPECT_DOUBLE_EQ(calibrated->collectiveFixedUs, 25.0);
  EXPECT_EQ(calibrated->notes.lookup("host_both_gb_per_s"), "2 GPUs");

  // Slowdowns keep their direction: kernels only slow down (>= 1), copies
  // only lose bandwidth (<= 1).
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(", \"matmul_slowdown_with_copies\": 0.98"),
                "toy")),
            "toy: field 'matmul_slowdown_with_copies': expected a number >= "
            "1, got 0.98");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(", \"copy_slowdown_with_matmul\": 1.1"),
                "toy")),
            "toy: field 'copy_slowdown_with_matmul': expected a number in "
            "(0, 1], got 1.1");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(", \"wait_us\": -1"), "toy")),
            "toy: field 'wait_us': expected a non-negative number, got -1");
}

TEST(DeviceProfileTest, ErrorsNameTheFileAndTheField) {
  EXPECT_EQ(errorOf(DeviceProfile::parse(minimalProfile(", \"hbm\": 3"),
                                         "my.json")),
            "my.json: unknown field 'hbm' (known fields: name, description, "
            "peak_tflops, kernel_efficiency, notes, hbm_gb_per_s, d2h_gb_per_s, h2d_gb_per_s, "
            "duplex_factor, nvlink_gb_per_s, launch_overhead_us, view_us, "
            "collective_slowdown_with_copies, "
            "collective_slowdown_with_both_copies, "
            "copy_slowdown_with_collectives, d2h_fixed_us, h2d_fixed_us, "
            "host_d2h_gb_per_s, host_h2d_gb_per_s, host_both_gb_per_s, "
            "matmul_slowdown_with_copies, matmul_slowdown_with_both_copies, "
            "memory_bound_slowdown_with_copies, "
            "memory_bound_slowdown_with_both_copies, memory_kernel_gb_per_s, "
            "copy_slowdown_with_matmul, copy_slowdown_with_memory_bound, "
            "host_launch_us, graph_kernel_us, graph_launch_us, "
            "event_record_us, wait_us, graph_wait_us, collective_fixed_us, "
            "device_memory_bytes, host_pinned_bytes)");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile("", "\"hbm_gb_per_s\": -5"), "my.json")),
            "my.json: field 'hbm_gb_per_s': expected a positive number, got "
            "-5");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile("", "\"hbm_gb_per_s\": \"fast\""), "my.json")),
            "my.json: field 'hbm_gb_per_s': expected a positive number, got "
            "\"fast\"");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile("", "\"nvlink_gb_per_s\": 0"), "my.json")),
            "my.json: missing required field 'hbm_gb_per_s'");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(", \"duplex_factor\": 1.5"), "my.json")),
            "my.json: field 'duplex_factor': expected a number in (0, 1], "
            "got 1.5");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(", \"collective_slowdown_with_copies\": 0.9"),
                "my.json")),
            "my.json: field 'collective_slowdown_with_copies': expected a "
            "number >= 1, got 0.9");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(", \"notes\": {\"hbm\": \"x\"}"), "my.json")),
            "my.json: field 'notes.hbm': names no field of the profile");
  EXPECT_EQ(
      errorOf(DeviceProfile::parse(
          "{\"name\": \"x\", \"peak_tflops\": {\"bf16\": 1}}", "my.json")),
      "my.json: field 'peak_tflops': missing required dtype 'f32' (the rate "
      "other dtypes fall back to)");
  EXPECT_EQ(
      errorOf(DeviceProfile::parse(
          "{\"name\": \"x\", \"peak_tflops\": {\"f32\": 1, \"fp9\": 2}}",
          "my.json")),
      "my.json: field 'peak_tflops.fp9': unknown dtype (known: bf16, f16, "
      "f32, tf32, f8, f64, i8)");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                "{\"name\": \"x\", \"peak_tflops\": {\"f32\": 0}}", "my.json")),
            "my.json: field 'peak_tflops.f32': expected a positive number, "
            "got 0");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(", \"kernel_efficiency\": {\"conv\": 0.5}"),
                "my.json")),
            "my.json: field 'kernel_efficiency.conv': unknown op class "
            "(known: attention, attention_backward, convolution, "
            "convolution_backward, unaligned_matmul)");
  EXPECT_EQ(errorOf(DeviceProfile::parse(
                minimalProfile(
                    ", \"kernel_efficiency\": {\"convolution\": 1.2}"),
                "my.json")),
            "my.json: field 'kernel_efficiency.convolution': expected a "
            "number in (0, 1], got 1.2");
  std::string syntax = errorOf(DeviceProfile::parse("{\"name\": ", "my.json"));
  EXPECT_EQ(syntax.rfind("my.json: invalid JSON: ", 0), 0u) << syntax;
}

TEST(DeviceProfileTest, LoadsAUserFileAndRejectsUnknownNames) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("lethe-profile", "json", path));
  llvm::FileRemover remover(path);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << minimalProfile();
  }
  Expected<DeviceProfile> user = DeviceProfile::load(path);
  ASSERT_TRUE(bool(user)) << llvm::toString(user.takeError());
  EXPECT_EQ(user->name, "toy");

  std::string unknown = errorOf(DeviceProfile::load("h300"));
  EXPECT_EQ(unknown, "unknown device 'h300': give a built-in profile name "
                     "or the path of a JSON profile (built-in profiles: "
                     "a100, h100, h200, h200-nvlink, h200-pcie)");
  std::string missing = errorOf(DeviceProfile::load("/nonexistent/x.json"));
  EXPECT_NE(missing.find("(built-in profiles: a100, h100"), std::string::npos)
      << missing;
  EXPECT_EQ(
      missing.rfind("device profile '/nonexistent/x.json': cannot open", 0), 0u)
      << missing;
  // Read as a bounded input: an endless one is refused, not read until
  // memory runs out.
  std::string endless = errorOf(DeviceProfile::load("/dev/zero"));
  EXPECT_EQ(endless.rfind("device profile '/dev/zero': is a device, not a "
                          "regular file",
                          0),
            0u)
      << endless;
}

} // namespace

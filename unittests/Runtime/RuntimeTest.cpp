//===- RuntimeTest.cpp - The runtime without a GPU
//-------------------------===//
//
// Dry-run mode validates and counts every call without a device, so the
// arena bookkeeping, the argument checks and their messages, the sticky
// error model and the hashing are all testable on a CPU-only machine.
//
//===----------------------------------------------------------------------===//

#include "lethe-c/Runtime.h"
#include "lethe/Runtime/Hash.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kMiB = 1 << 20;

class DryRun : public ::testing::Test {
protected:
  void SetUp() override {
    LetheRtConfig config;
    letheRtConfigInit(&config);
    config.mode = LETHE_MODE_DRY_RUN;
    config.deviceArenaBytes = 16 * kMiB;
    config.hostArenaBytes = 4 * kMiB;
    config.numEvents = 3;
    ASSERT_EQ(letheRtCreate(&config, &rt), LETHE_RT_OK);
  }
  void TearDown() override { letheRtDestroy(rt); }

  std::string message() const { return letheRtGetErrorMessage(rt); }
  LetheRtStats stats() const {
    LetheRtStats s;
    letheRtGetStats(rt, &s);
    return s;
  }

  LetheRt *rt = nullptr;
};

TEST(RuntimeConfig, Defaults) {
  LetheRtConfig config;
  std::memset(&config, 0x5a, sizeof(config));
  letheRtConfigInit(&config);
  EXPECT_EQ(config.device, -1);
  EXPECT_EQ(config.mode, LETHE_MODE_TIMING);
  EXPECT_EQ(config.gemmWorkspaceBytes, 32 * kMiB);
  EXPECT_EQ(config.deviceArenaBytes, 0u);
  EXPECT_EQ(config.replayGemms, 0);
}

TEST(RuntimeCreate, NoDeviceIsAnErrorWithAMessage) {
  LetheRtConfig config;
  letheRtConfigInit(&config);
  config.deviceArenaBytes = kMiB;
  LetheRt *rt = nullptr;
  LetheRtStatus status = letheRtCreate(&config, &rt);
  ASSERT_NE(rt, nullptr);
  if (status == LETHE_RT_OK) {
    letheRtDestroy(rt);
    GTEST_SKIP() << "a CUDA device is present";
  }
  EXPECT_EQ(status, LETHE_RT_NO_DEVICE);
  EXPECT_EQ(letheRtGetStatus(rt), LETHE_RT_NO_DEVICE);
  std::string msg = letheRtGetErrorMessage(rt);
  EXPECT_EQ(msg.rfind("letheRtCreate: cudaGetDeviceCount failed: ", 0), 0u)
      << msg;
  EXPECT_NE(msg.find("no usable CUDA device or driver"), std::string::npos);
  // Every later call reports the same failure instead of touching a device.
  EXPECT_EQ(letheRtStepBegin(rt), LETHE_RT_NO_DEVICE);
  EXPECT_EQ(letheRtClearInvalidArgument(rt), LETHE_RT_NO_DEVICE);
  letheRtDestroy(rt);
}

TEST(RuntimeCreate, UnknownModeIsRefused) {
  LetheRtConfig config;
  letheRtConfigInit(&config);
  config.mode = (LetheRtMode)7;
  LetheRt *rt = nullptr;
  EXPECT_EQ(letheRtCreate(&config, &rt), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_STREQ(letheRtGetErrorMessage(rt), "letheRtCreate: unknown mode 7");
  letheRtDestroy(rt);
}

TEST_F(DryRun, CountsWhatAProgramEnqueues) {
  LetheRtBuf x = {0, 4 * kMiB}, y = {4 * kMiB, 4 * kMiB};
  ASSERT_EQ(letheRtStepBegin(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtReplay(rt, "gelu", 12.5, {x}, {y}), LETHE_RT_OK);
  ASSERT_EQ(letheRtGemm(rt, "mm", 30.0,
                        {LETHE_DTYPE_BF16,
                         0,
                         0,
                         1,
                         1024,
                         1024,
                         2048,
                         x,
                         x,
                         {0, 0},
                         {8 * kMiB, 2 * kMiB}}),
            LETHE_RT_OK);
  ASSERT_EQ(letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0), LETHE_RT_OK);
  ASSERT_EQ(letheRtWait(rt, LETHE_STREAM_D2H, 0), LETHE_RT_OK);
  ASSERT_EQ(letheRtCopyD2H(rt, y.offset, kMiB, 3 * kMiB), LETHE_RT_OK);
  ASSERT_EQ(letheRtCopyH2D(rt, 0, 12 * kMiB, kMiB), LETHE_RT_OK);
  ASSERT_EQ(letheRtRelease(rt, LETHE_STREAM_COMPUTE, x), LETHE_RT_OK);
  ASSERT_EQ(letheRtStepEnd(rt), LETHE_RT_OK);

  LetheRtStats s = stats();
  EXPECT_EQ(s.opsPerStream[LETHE_STREAM_COMPUTE], 2u);
  EXPECT_EQ(s.opsPerStream[LETHE_STREAM_D2H], 1u);
  EXPECT_EQ(s.opsPerStream[LETHE_STREAM_H2D], 1u);
  EXPECT_EQ(s.bytesD2H, 3 * kMiB);
  EXPECT_EQ(s.bytesH2D, kMiB);
  EXPECT_EQ(s.gemms, 1u);
  EXPECT_EQ(s.replays, 1u);
  EXPECT_EQ(s.records, 1u);
  EXPECT_EQ(s.waits, 1u);
  EXPECT_EQ(s.releases, 1u);
  EXPECT_DOUBLE_EQ(s.gemmFlops, 2.0 * 1024 * 1024 * 2048);
  EXPECT_DOUBLE_EQ(s.kernelUs, 42.5);
  EXPECT_EQ(s.deviceHighWater, 13 * kMiB);
  EXPECT_EQ(s.hostHighWater, 4 * kMiB);

  letheRtResetStats(rt);
  EXPECT_EQ(stats().replays, 0u);
  EXPECT_EQ(letheRtDevicePointer(rt, 0), nullptr);
  EXPECT_EQ(letheRtHostPointer(rt, 0), nullptr);
}

TEST_F(DryRun, SlotPastTheArenaIsRefused) {
  LetheRtBuf in = {0, 16}, out = {15 * kMiB, 2 * kMiB};
  EXPECT_EQ(letheRtReplay(rt, "aten.relu %4", 1.0, {in}, {out}),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtReplay 'aten.relu %4': output 0 [15728640, "
                       "+2097152) lies outside the device arena (16777216 "
                       "bytes)");
  EXPECT_EQ(stats().replays, 0u);
}

TEST_F(DryRun, OffsetOverflowIsRefused) {
  LetheRtBuf huge = {UINT64_MAX - 8, 16};
  EXPECT_EQ(letheRtFill(rt, huge, LETHE_DTYPE_F32, 1),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_NE(message().find("lies outside the device arena"), std::string::npos);
}

TEST_F(DryRun, KernelOperandsMustBeAligned) {
  LetheRtBuf in = {8, 16}, out = {64, 16};
  EXPECT_EQ(letheRtReplay(rt, "add", 1.0, {in}, {out}),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtReplay 'add': input 0 offset 8 is not a multiple of 16");
}

TEST_F(DryRun, CopiesNeedNoAlignmentButMustFitBothArenas) {
  EXPECT_EQ(letheRtCopyD2H(rt, 3, 5, 7), LETHE_RT_OK);
  EXPECT_EQ(letheRtCopyH2D(rt, 3 * kMiB, 0, 2 * kMiB),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtCopyH2D: host range [3145728, +2097152) lies "
                       "outside the host arena (4194304 bytes)");
}

TEST_F(DryRun, ErrorsAreStickyUntilCleared) {
  EXPECT_EQ(letheRtRecord(rt, LETHE_STREAM_COMPUTE, 9),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtRecord(compute, event 9): the program has 3 events");
  // Later calls return the first error and do nothing.
  EXPECT_EQ(letheRtCopyD2H(rt, 0, 0, 16), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(stats().bytesD2H, 0u);
  EXPECT_EQ(message(),
            "letheRtRecord(compute, event 9): the program has 3 events");
  EXPECT_EQ(letheRtClearInvalidArgument(rt), LETHE_RT_OK);
  EXPECT_EQ(letheRtCopyD2H(rt, 0, 0, 16), LETHE_RT_OK);
}

TEST_F(DryRun, WaitMustFollowARecordInTheSameStep) {
  ASSERT_EQ(letheRtStepBegin(rt), LETHE_RT_OK);
  EXPECT_EQ(letheRtWait(rt, LETHE_STREAM_H2D, 1), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtWait(h2d, event 1): event 1 was not recorded "
                       "in this step, so the wait would not wait for anything");
  letheRtClearInvalidArgument(rt);
  ASSERT_EQ(letheRtRecord(rt, LETHE_STREAM_COMPUTE, 1), LETHE_RT_OK);
  EXPECT_EQ(letheRtWait(rt, LETHE_STREAM_H2D, 1), LETHE_RT_OK);
  // A new step forgets the old records.
  ASSERT_EQ(letheRtStepBegin(rt), LETHE_RT_OK);
  EXPECT_EQ(letheRtWait(rt, LETHE_STREAM_H2D, 1), LETHE_RT_INVALID_ARGUMENT);
}

TEST_F(DryRun, StreamsAreChecked) {
  EXPECT_EQ(letheRtRelease(rt, (LetheRtStream)4, {0, 16}),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtRelease(invalid): stream 4 is not one of "
                       "compute, d2h, h2d, comm");
}

TEST_F(DryRun, ReplayArgumentsAreChecked) {
  EXPECT_EQ(letheRtReplay(rt, "t", NAN, nullptr, 0, nullptr, 0),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_NE(message().find("is not a finite, non-negative number"),
            std::string::npos);
  letheRtClearInvalidArgument(rt);
  EXPECT_EQ(letheRtReplay(rt, "t", 1.0, nullptr, 2, nullptr, 0),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtReplay 't': a buffer list is null but its count is not 0");
  letheRtClearInvalidArgument(rt);
  std::vector<LetheRtBuf> many(65, LetheRtBuf{0, 16});
  EXPECT_EQ(letheRtReplay(rt, "cat", 1.0, many.data(), 65, many.data(), 0),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtReplay 'cat': 65 buffers; a kernel takes at most 64");
  letheRtClearInvalidArgument(rt);
  // Zero buffers: a pure delay is fine.
  EXPECT_EQ(letheRtReplay(rt, "sleep", 5.0, nullptr, 0, nullptr, 0),
            LETHE_RT_OK);
}

TEST_F(DryRun, GemmOperandsMustHoldTheirShape) {
  LetheRtGemm g = {
      LETHE_DTYPE_BF16, 0, 1, 2, 512, 256, 128, {0, kMiB}, {kMiB, kMiB}, {0, 0},
      {2 * kMiB, kMiB}};
  EXPECT_EQ(letheRtGemm(rt, "aten.bmm %7", 1.0, &g), LETHE_RT_OK);
  g.c.bytes = 1000;
  EXPECT_EQ(letheRtGemm(rt, "aten.bmm %7", 1.0, &g), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtGemm 'aten.bmm %7': c holds 1000 bytes, but "
                       "batch 2 of m x n bf16 needs 524288");
  letheRtClearInvalidArgument(rt);
  g.c.bytes = kMiB;
  g.bias = {3 * kMiB, 100};
  EXPECT_EQ(letheRtGemm(rt, "addmm", 1.0, &g), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtGemm 'addmm': bias holds 100 bytes, but n bf16 needs 512");
  letheRtClearInvalidArgument(rt);
  g.bias = {0, 0};
  g.k = 0;
  EXPECT_EQ(letheRtGemm(rt, "mm", 1.0, &g), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtGemm 'mm': batch 2, m 512, n 256, k 0: each "
                       "must be in [1, 2^31)");
  letheRtClearInvalidArgument(rt);
  g.k = 128;
  g.dtype = LETHE_DTYPE_RAW;
  EXPECT_EQ(letheRtGemm(rt, "mm", 1.0, &g), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtGemm 'mm': dtype 3 is not f32, f16 or bf16");
}

TEST_F(DryRun, ChecksumsAreNamed) {
  EXPECT_EQ(letheRtChecksum(rt, "", {0, 16}), LETHE_RT_INVALID_ARGUMENT);
  letheRtClearInvalidArgument(rt);
  EXPECT_EQ(letheRtChecksum(rt, "dW0", {0, 16}), LETHE_RT_OK);
  EXPECT_EQ(letheRtChecksum(rt, "dW1", {16, 16}), LETHE_RT_OK);
  EXPECT_EQ(letheRtChecksum(rt, "dW0", {32, 16}), LETHE_RT_OK);
  ASSERT_EQ(letheRtNumChecksums(rt), 2u);
  const char *name = nullptr;
  uint64_t value = 1;
  EXPECT_EQ(letheRtGetChecksum(rt, 1, &name, &value), LETHE_RT_OK);
  EXPECT_STREQ(name, "dW1");
  EXPECT_EQ(value, 0u);
  EXPECT_EQ(letheRtGetChecksum(rt, 2, &name, &value),
            LETHE_RT_INVALID_ARGUMENT);
}

TEST_F(DryRun, CollectivesNeedACommunicator) {
  LetheRtBuf a = {0, kMiB}, b = {kMiB, 2 * kMiB};
  EXPECT_EQ(letheRtAllGather(rt, "ag", a, b, LETHE_DTYPE_BF16),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtAllGather 'ag': no communicator (call "
                       "letheRtCommInit first)");
  letheRtClearInvalidArgument(rt);
  LetheRtStatus s = letheRtCommInit(rt, 2, 1, "/nonexistent/id");
  if (s == LETHE_RT_UNSUPPORTED)
    GTEST_SKIP() << message();
  ASSERT_EQ(s, LETHE_RT_OK) << message();
  EXPECT_EQ(letheRtAllGather(rt, "ag", a, b, LETHE_DTYPE_BF16), LETHE_RT_OK);
  EXPECT_EQ(letheRtReduceScatter(rt, "rs", b, a, LETHE_DTYPE_BF16),
            LETHE_RT_OK);
  EXPECT_EQ(letheRtAllReduce(rt, "ar", a, a, LETHE_DTYPE_F32), LETHE_RT_OK);
  EXPECT_EQ(stats().collectives, 3u);
  EXPECT_EQ(letheRtAllGather(rt, "ag", a, a, LETHE_DTYPE_BF16),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtAllGather 'ag': send holds 1048576 bytes and "
                       "recv 1048576; over 2 ranks recv needs 2097152");
}

TEST_F(DryRun, CopiesYieldInChunks) {
  EXPECT_STREQ(letheRtCopyYieldMechanism(rt), "none (dry run)");
  // Off by default: copies go whole.
  ASSERT_EQ(letheRtCopyD2H(rt, 0, 0, 3 * kMiB), LETHE_RT_OK);
  EXPECT_EQ(stats().yieldingCopies, 0u);
  EXPECT_EQ(stats().copyChunks, 0u);

  ASSERT_EQ(letheRtSetCopyYield(rt, kMiB), LETHE_RT_OK);
  ASSERT_EQ(letheRtCopyD2H(rt, 0, 0, 3 * kMiB + 1), LETHE_RT_OK);
  ASSERT_EQ(letheRtCopyH2D(rt, 0, 0, kMiB), LETHE_RT_OK);
  ASSERT_EQ(letheRtCopyH2D(rt, 0, 0, 0), LETHE_RT_OK);
  LetheRtStats s = stats();
  EXPECT_EQ(s.yieldingCopies, 2u);
  EXPECT_EQ(s.copyChunks, 5u); // 4 + 1; an empty copy has none
  EXPECT_EQ(s.opsPerStream[LETHE_STREAM_D2H], 2u);

  ASSERT_EQ(letheRtSetCopyYield(rt, 0), LETHE_RT_OK);
  ASSERT_EQ(letheRtCopyD2H(rt, 0, 0, 3 * kMiB), LETHE_RT_OK);
  EXPECT_EQ(stats().copyChunks, 5u);
}

TEST_F(DryRun, CopyYieldChunkIsChecked) {
  EXPECT_EQ(letheRtSetCopyYield(rt, 4096), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtSetCopyYield: chunk of 4096 bytes; 0 (off) or "
                       "at least 65536");
}

TEST_F(DryRun, CollectiveWindowsNestAndOpenOnlyWhenYielding) {
  // Not yielding: windows are tracked but raise nothing.
  ASSERT_EQ(letheRtCollectiveWindowBegin(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtCollectiveWindowEnd(rt), LETHE_RT_OK);
  EXPECT_EQ(stats().collectiveWindows, 0u);
  ASSERT_EQ(letheRtSetCopyYield(rt, 8 * kMiB), LETHE_RT_OK);
  ASSERT_EQ(letheRtCollectiveWindowBegin(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtCollectiveWindowBegin(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtCollectiveWindowEnd(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtCollectiveWindowEnd(rt), LETHE_RT_OK);
  EXPECT_EQ(stats().collectiveWindows, 1u);
  EXPECT_EQ(letheRtCollectiveWindowEnd(rt), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtCollectiveWindowEnd: no collective window is open");
}

TEST_F(DryRun, CollectivesOpenWindowsWhenYielding) {
  LetheRtStatus s = letheRtCommInit(rt, 2, 0, "/nonexistent/id");
  if (s == LETHE_RT_UNSUPPORTED)
    GTEST_SKIP() << message();
  ASSERT_EQ(s, LETHE_RT_OK) << message();
  LetheRtBuf a = {0, kMiB}, b = {kMiB, 2 * kMiB};
  ASSERT_EQ(letheRtAllGather(rt, "ag", a, b, LETHE_DTYPE_BF16), LETHE_RT_OK);
  EXPECT_EQ(stats().collectiveWindows, 0u);
  ASSERT_EQ(letheRtSetCopyYield(rt, 4 * kMiB), LETHE_RT_OK);
  ASSERT_EQ(letheRtAllGather(rt, "ag", a, b, LETHE_DTYPE_BF16), LETHE_RT_OK);
  ASSERT_EQ(letheRtReduceScatter(rt, "rs", b, a, LETHE_DTYPE_BF16),
            LETHE_RT_OK);
  EXPECT_EQ(stats().collectiveWindows, 2u);
  // A hand-opened window holds the collectives inside it.
  ASSERT_EQ(letheRtCollectiveWindowBegin(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtAllGather(rt, "ag", a, b, LETHE_DTYPE_BF16), LETHE_RT_OK);
  ASSERT_EQ(letheRtAllGather(rt, "ag", a, b, LETHE_DTYPE_BF16), LETHE_RT_OK);
  ASSERT_EQ(letheRtCollectiveWindowEnd(rt), LETHE_RT_OK);
  EXPECT_EQ(stats().collectiveWindows, 3u);
}

TEST_F(DryRun, PointToPointTransfersOpenNoWindow) {
  // A posted receive waits for its peer; pausing copies for it can deadlock
  // a pipeline pair (see pointToPoint), so transfers never raise the flag.
  LetheRtStatus s = letheRtCommInit(rt, 2, 0, "/nonexistent/id");
  if (s == LETHE_RT_UNSUPPORTED)
    GTEST_SKIP() << message();
  ASSERT_EQ(s, LETHE_RT_OK) << message();
  ASSERT_EQ(letheRtSetCopyYield(rt, 4 * kMiB), LETHE_RT_OK);
  LetheRtBuf a = {0, kMiB}, b = {kMiB, kMiB};
  ASSERT_EQ(letheRtSend(rt, "s", a, LETHE_DTYPE_BF16, 1), LETHE_RT_OK);
  ASSERT_EQ(letheRtGroupStart(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtSend(rt, "gs", a, LETHE_DTYPE_BF16, 1), LETHE_RT_OK);
  ASSERT_EQ(letheRtRecv(rt, "gr", b, LETHE_DTYPE_BF16, 1), LETHE_RT_OK);
  ASSERT_EQ(letheRtGroupEnd(rt), LETHE_RT_OK) << message();
  ASSERT_EQ(letheRtRecv(rt, "r", b, LETHE_DTYPE_BF16, 1), LETHE_RT_OK);
  EXPECT_EQ(stats().collectiveWindows, 0u);
  ASSERT_EQ(letheRtAllGather(rt, "ag", a, {kMiB, 2 * kMiB}, LETHE_DTYPE_BF16),
            LETHE_RT_OK);
  EXPECT_EQ(stats().collectiveWindows, 1u);
}

class CopyYieldEnv : public ::testing::Test {
protected:
  void TearDown() override { unsetenv("LETHE_COPY_YIELD"); }
  LetheRt *create() {
    LetheRtConfig config;
    letheRtConfigInit(&config);
    config.mode = LETHE_MODE_DRY_RUN;
    config.deviceArenaBytes = 16 * kMiB;
    config.hostArenaBytes = 16 * kMiB;
    LetheRt *rt = nullptr;
    letheRtCreate(&config, &rt);
    return rt;
  }
  uint64_t chunksOf(LetheRt *rt, uint64_t bytes) {
    letheRtResetStats(rt);
    EXPECT_EQ(letheRtCopyD2H(rt, 0, 0, bytes), LETHE_RT_OK);
    LetheRtStats s;
    letheRtGetStats(rt, &s);
    return s.copyChunks;
  }
};

TEST_F(CopyYieldEnv, OverridesTheProgram) {
  setenv("LETHE_COPY_YIELD", "off", 1);
  LetheRt *off = create();
  ASSERT_EQ(letheRtGetStatus(off), LETHE_RT_OK);
  ASSERT_EQ(letheRtSetCopyYield(off, kMiB), LETHE_RT_OK);
  EXPECT_EQ(chunksOf(off, 8 * kMiB), 0u);
  letheRtDestroy(off);

  setenv("LETHE_COPY_YIELD", "2M", 1);
  LetheRt *forced = create();
  ASSERT_EQ(letheRtGetStatus(forced), LETHE_RT_OK);
  EXPECT_EQ(chunksOf(forced, 8 * kMiB), 4u);
  ASSERT_EQ(letheRtSetCopyYield(forced, 0), LETHE_RT_OK);
  EXPECT_EQ(chunksOf(forced, 8 * kMiB), 4u);
  letheRtDestroy(forced);

  setenv("LETHE_COPY_YIELD", "12x", 1);
  LetheRt *bad = create();
  EXPECT_EQ(letheRtGetStatus(bad), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(letheRtGetErrorMessage(bad))
                .find("$LETHE_COPY_YIELD is '12x'"),
            std::string::npos);
  letheRtDestroy(bad);
}

TEST_F(DryRun, SendAndRecvPairWithAPeer) {
  LetheRtBuf a = {0, kMiB}, b = {kMiB, kMiB};
  EXPECT_EQ(letheRtSend(rt, "s", a, LETHE_DTYPE_BF16, 1),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtSend 's': no communicator (call letheRtCommInit first)");
  letheRtClearInvalidArgument(rt);
  LetheRtStatus s = letheRtCommInit(rt, 2, 0, "/nonexistent/id");
  if (s == LETHE_RT_UNSUPPORTED)
    GTEST_SKIP() << message();
  ASSERT_EQ(s, LETHE_RT_OK) << message();
  EXPECT_EQ(letheRtSend(rt, "s0", a, LETHE_DTYPE_BF16, 1), LETHE_RT_OK);
  EXPECT_EQ(letheRtRecv(rt, "r0", b, LETHE_DTYPE_F32, 1), LETHE_RT_OK);
  LetheRtStats st = stats();
  EXPECT_EQ(st.collectives, 2u);
  EXPECT_EQ(st.opsPerStream[LETHE_STREAM_COMM], 2u);
  EXPECT_EQ(st.bytesCollective, 2 * kMiB);
  EXPECT_EQ(st.deviceHighWater, 2 * kMiB);

  // The peer is another rank of the communicator.
  EXPECT_EQ(letheRtSend(rt, "self", a, LETHE_DTYPE_BF16, 0),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtSend 'self': peer 0 is not another rank of the "
                       "communicator (rank 0 of 2)");
  letheRtClearInvalidArgument(rt);
  EXPECT_EQ(letheRtRecv(rt, "far", b, LETHE_DTYPE_BF16, 2),
            LETHE_RT_INVALID_ARGUMENT);
  letheRtClearInvalidArgument(rt);
  // Buffers are checked like a kernel's.
  EXPECT_EQ(letheRtRecv(rt, "out", {16 * kMiB - 8, 16}, LETHE_DTYPE_BF16, 1),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtRecv 'out': receive buffer [16777208, +16) lies "
                       "outside the device arena (16777216 bytes)");
  letheRtClearInvalidArgument(rt);
  EXPECT_EQ(letheRtSend(rt, "odd", {8, 16}, LETHE_DTYPE_BF16, 1),
            LETHE_RT_INVALID_ARGUMENT);
  letheRtClearInvalidArgument(rt);

  // The log: only the calls that were issued, in order, ungrouped.
  ASSERT_EQ(letheRtNumP2P(rt), 2u);
  LetheRtP2P p;
  ASSERT_EQ(letheRtGetP2P(rt, 0, &p), LETHE_RT_OK);
  EXPECT_STREQ(p.op, "s0");
  EXPECT_EQ(p.isSend, 1);
  EXPECT_EQ(p.peer, 1);
  EXPECT_EQ(p.bytes, kMiB);
  EXPECT_EQ(p.group, -1);
  ASSERT_EQ(letheRtGetP2P(rt, 1, &p), LETHE_RT_OK);
  EXPECT_EQ(p.isSend, 0);
  EXPECT_EQ(letheRtGetP2P(rt, 2, &p), LETHE_RT_INVALID_ARGUMENT);
  letheRtResetStats(rt);
  EXPECT_EQ(letheRtNumP2P(rt), 0u);
}

TEST_F(DryRun, GroupsGatherSendsAndRecvs) {
  LetheRtBuf a = {0, kMiB}, b = {kMiB, kMiB}, c = {2 * kMiB, 2 * kMiB};
  EXPECT_EQ(letheRtGroupStart(rt), LETHE_RT_INVALID_ARGUMENT);
  letheRtClearInvalidArgument(rt);
  LetheRtStatus s = letheRtCommInit(rt, 2, 1, "/nonexistent/id");
  if (s == LETHE_RT_UNSUPPORTED)
    GTEST_SKIP() << message();
  ASSERT_EQ(s, LETHE_RT_OK) << message();
  ASSERT_EQ(letheRtStepBegin(rt), LETHE_RT_OK);
  ASSERT_EQ(letheRtRecord(rt, LETHE_STREAM_COMPUTE, 0), LETHE_RT_OK);

  EXPECT_EQ(letheRtGroupEnd(rt), LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtGroupEnd: no group is open (call "
                       "letheRtGroupStart first)");
  letheRtClearInvalidArgument(rt);
  ASSERT_EQ(letheRtGroupStart(rt), LETHE_RT_OK);
  EXPECT_EQ(letheRtGroupStart(rt), LETHE_RT_INVALID_ARGUMENT);
  letheRtClearInvalidArgument(rt);
  // Waits on comm precede the group; other streams carry on.
  EXPECT_EQ(letheRtWait(rt, LETHE_STREAM_COMM, 0), LETHE_RT_OK);
  EXPECT_EQ(letheRtSend(rt, "s", a, LETHE_DTYPE_BF16, 0), LETHE_RT_OK);
  EXPECT_EQ(letheRtRecv(rt, "r", b, LETHE_DTYPE_BF16, 0), LETHE_RT_OK);
  EXPECT_EQ(letheRtRecord(rt, LETHE_STREAM_COMPUTE, 1), LETHE_RT_OK);
  // A record on comm would complete before the group's transfers start.
  EXPECT_EQ(letheRtRecord(rt, LETHE_STREAM_COMM, 2),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(),
            "letheRtRecord(comm, event 2): inside a point-to-point group the "
            "comm stream's transfers start only at letheRtGroupEnd, so the "
            "event would not follow them");
  letheRtClearInvalidArgument(rt);
  EXPECT_EQ(letheRtAllReduce(rt, "ar", a, a, LETHE_DTYPE_F32),
            LETHE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(message(), "letheRtAllReduce 'ar': inside a point-to-point group "
                       "(call letheRtGroupEnd first)");
  letheRtClearInvalidArgument(rt);
  EXPECT_EQ(letheRtStepEnd(rt), LETHE_RT_INVALID_ARGUMENT);
  letheRtClearInvalidArgument(rt);
  EXPECT_EQ(letheRtSynchronize(rt), LETHE_RT_INVALID_ARGUMENT);
  letheRtClearInvalidArgument(rt);
  ASSERT_EQ(letheRtGroupEnd(rt), LETHE_RT_OK);
  EXPECT_EQ(letheRtRecord(rt, LETHE_STREAM_COMM, 2), LETHE_RT_OK);

  ASSERT_EQ(letheRtGroupStart(rt), LETHE_RT_OK);
  EXPECT_EQ(letheRtSend(rt, "s2", c, LETHE_DTYPE_F32, 0), LETHE_RT_OK);
  ASSERT_EQ(letheRtGroupEnd(rt), LETHE_RT_OK);
  EXPECT_EQ(letheRtRecv(rt, "alone", a, LETHE_DTYPE_F32, 0), LETHE_RT_OK);
  EXPECT_EQ(letheRtStepEnd(rt), LETHE_RT_OK);

  std::vector<int> groups;
  for (uint32_t i = 0; i < letheRtNumP2P(rt); ++i) {
    LetheRtP2P p;
    ASSERT_EQ(letheRtGetP2P(rt, i, &p), LETHE_RT_OK);
    groups.push_back(p.group);
  }
  EXPECT_EQ(groups, (std::vector<int>{0, 0, 1, -1}));
  EXPECT_EQ(stats().bytesCollective, 5 * kMiB);
}

TEST(RuntimeRegistry, MatmulLikeOpsGetGemms) {
  EXPECT_EQ(letheRtKernelForOp("aten.mm.default"), LETHE_KERNEL_GEMM);
  EXPECT_EQ(letheRtKernelForOp("aten.addmm.default"), LETHE_KERNEL_GEMM);
  EXPECT_EQ(letheRtKernelForOp("aten.bmm"), LETHE_KERNEL_GEMM);
  EXPECT_EQ(letheRtKernelForOp("linear"), LETHE_KERNEL_GEMM);
  EXPECT_EQ(letheRtKernelForOp("aten.gelu.default"), LETHE_KERNEL_REPLAY);
  EXPECT_EQ(letheRtKernelForOp("aten.mmx"), LETHE_KERNEL_REPLAY);
  EXPECT_EQ(letheRtKernelForOp(nullptr), LETHE_KERNEL_REPLAY);
  EXPECT_STREQ(letheRtStatusName(LETHE_RT_NCCL_ERROR), "NCCL error");
}

TEST(RuntimeHash, DigestSeesEveryByteAndItsPosition) {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = (unsigned char)(i * 7);
  uint64_t base = lethe::rt::hostDigest(data.data(), data.size());
  for (size_t i : {0, 7, 8, 999}) {
    std::vector<unsigned char> changed = data;
    changed[i] ^= 1;
    EXPECT_NE(lethe::rt::hostDigest(changed.data(), changed.size()), base);
  }
  // Swapping two words changes it (the sum is position-sensitive).
  std::vector<unsigned char> swapped = data;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
  EXPECT_NE(lethe::rt::hostDigest(swapped.data(), swapped.size()), base);
  // Trailing zero bytes change the length, so the digest.
  unsigned char zeros[2] = {0, 0};
  EXPECT_NE(lethe::rt::hostDigest(zeros, 1), lethe::rt::hostDigest(zeros, 2));
  // Folding is order-sensitive: op(a, b) != op(b, a).
  uint64_t s = lethe::rt::seedStart(2);
  EXPECT_NE(lethe::rt::foldDigest(lethe::rt::foldDigest(s, 1), 2),
            lethe::rt::foldDigest(lethe::rt::foldDigest(s, 2), 1));
}

} // namespace

//===- WatchdogTest.cpp - The bound on blocking calls, without a GPU ------===//
//
// The watchdog (lib/Runtime/Watchdog.cpp) needs no device to be tested: a
// call that ends in time is not disturbed, and one that overruns with no
// communicator to abort ends the process with status 1 and the cause on
// stderr, never a hang. (Aborting a communicator needs two GPUs:
// scripts/gpu-fault-tests.sh.)
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include "gtest/gtest.h"

#include <chrono>
#include <thread>

using namespace lethe::rt;

namespace {

/// A runtime with no device and a watchdog of `timeoutS`.
struct Watched {
  explicit Watched(double timeoutS) {
    rt.timeoutS = timeoutS;
    EXPECT_EQ(startWatchdog(&rt), LETHE_RT_OK);
  }
  LetheRt rt;
};

TEST(Watchdog, CallsWithinTheTimeoutPass) {
  Watched w(5.0);
  for (int i = 0; i < 3; ++i) {
    BlockingCall call(&w.rt, "letheRtSynchronize(compute)",
                      "cudaStreamSynchronize");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(call.finish(), LETHE_RT_OK);
  }
  EXPECT_FALSE(watchdogFired(&w.rt));
  EXPECT_EQ(w.rt.status, LETHE_RT_OK);
}

TEST(Watchdog, TimeBetweenCallsDoesNotCount) {
  // Only armed time counts: idling past the timeout between calls is fine.
  Watched w(0.2);
  { BlockingCall call(&w.rt, "a", "b"); }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  BlockingCall call(&w.rt, "a", "b");
  EXPECT_EQ(call.finish(), LETHE_RT_OK);
  EXPECT_FALSE(watchdogFired(&w.rt));
}

TEST(WatchdogDeathTest, AnOverrunWithNothingToAbortEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watched w(0.25);
        BlockingCall call(&w.rt, "letheRtSynchronize(comm)",
                          "cudaStreamSynchronize");
        // The call "hangs": far longer than the timeout.
        std::this_thread::sleep_for(std::chrono::seconds(20));
        std::exit(0);
      },
      testing::ExitedWithCode(1),
      "lethe runtime: letheRtSynchronize\\(comm\\): cudaStreamSynchronize "
      "did not finish within 0.25 s \\(\\$LETHE_RT_TIMEOUT_S\\): the device "
      "hung; no communicator to abort, the call cannot return: exiting");
}

} // namespace

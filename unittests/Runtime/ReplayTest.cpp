//===- ReplayTest.cpp - Replay kernels' spin, without a GPU ---------------===//
//
// A replay kernel stands in for an op: it spins for the op's time less the
// floor the runtime measured at creation (lib/Runtime/Lifetime.cpp); which
// floor is a pure function of the runtime's state.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include "gtest/gtest.h"

using namespace lethe::rt;

namespace {

// A replay spins for its op's time less how long an empty replay kernel
// occupies the stream in the mode it runs in, so that it takes the op's time
// eagerly and inside a CUDA graph alike (the graph floor is the shorter).
TEST(ReplaySpin, SubtractsTheFloorOfTheModeItIsEnqueuedIn) {
  LetheRt rt;
  rt.cyclesPerUs = 2000; // a 2 GHz SM clock
  rt.replayFloorUs = 1.5;
  rt.graphReplayFloorUs = 0.7;
  EXPECT_EQ(spinCyclesFor(&rt, 10.0), 17000u);
  rt.capturing = true;
  EXPECT_EQ(spinCyclesFor(&rt, 10.0), 18600u);
  // An op shorter than the floor does not spin.
  EXPECT_EQ(spinCyclesFor(&rt, 0.5), 0u);
}

} // namespace

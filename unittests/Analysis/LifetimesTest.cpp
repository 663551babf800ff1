//===- LifetimesTest.cpp - lifetimes and the memory profile ---------------===//

#include "lethe/Analysis/Lifetimes.h"

#include <gtest/gtest.h>

#include <random>

using namespace lethe;

namespace {

TEST(LifetimesTest, ViewExtendsItsBaseAndInputsAreResident) {
  TrainingGraph g;
  ValueId w = g.addInput(100, InputKind::Param);
  NodeId a = g.addNode("aten.mm.default", Phase::Fwd, 1, {w}, {10});
  NodeId v = g.addNode("aten.view.default", Phase::Fwd, 1,
                       {g.getNode(a).results[0]}, {10}, {0});
  NodeId b = g.addNode("aten.relu.default", Phase::Fwd, 1, {w}, {20});
  NodeId c = g.addNode("aten.mm.default", Phase::Bwd, 1,
                       {g.getNode(v).results[0]}, {5});
  g.addOutput(g.getNode(c).results[0]);
  Lifetimes lifetimes(g);
  const LiveInterval &mm = lifetimes.getInterval(g.getNode(a).results[0]);
  EXPECT_EQ(mm.begin, a);
  EXPECT_EQ(mm.end, c);
  EXPECT_TRUE(mm.savedForBackward);
  EXPECT_FALSE(lifetimes.getInterval(g.getNode(b).results[0]).savedForBackward);
  MemoryProfile profile = MemoryProfile::compute(lifetimes);
  EXPECT_EQ(profile.residentBytes, 100);
  EXPECT_EQ(profile.liveBytes, (std::vector<int64_t>{10, 10, 30, 15}));
  EXPECT_EQ(profile.peakBytes, 30);
  EXPECT_EQ(profile.peakNode, b);
  EXPECT_EQ(profile.activationBytes, 10);
  EXPECT_EQ(profile.forwardEndBytes, 30);
  ASSERT_EQ(profile.liveAtPeak.size(), 2u);
  EXPECT_EQ(profile.liveAtPeak[0], g.getNode(b).results[0]);
}

/// The profile from intervals equals a brute-force count over random graphs
/// with views, multi-result nodes and outputs.
TEST(LifetimesTest, ProfileMatchesBruteForceOnRandomGraphs) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    TrainingGraph g;
    std::vector<ValueId> pool;
    for (int i = 0; i < 3; ++i)
      pool.push_back(g.addInput(1 + rng() % 50, InputKind::Param));
    int numNodes = 5 + rng() % 40;
    for (int n = 0; n < numNodes; ++n) {
      Phase phase = n < numNodes / 2 ? Phase::Fwd : Phase::Bwd;
      std::vector<ValueId> operands;
      for (int k = 0, e = 1 + rng() % 3; k < e; ++k)
        operands.push_back(pool[rng() % pool.size()]);
      std::vector<int64_t> bytes, aliases;
      for (int r = 0, e = 1 + rng() % 2; r < e; ++r) {
        bytes.push_back(1 + rng() % 100);
        aliases.push_back(rng() % 4 == 0 ? 0 : -1);
      }
      NodeId node = g.addNode("op", phase, 1.0, operands, bytes, aliases);
      for (ValueId result : g.getNode(node).results)
        pool.push_back(result);
    }
    g.addOutput(pool.back());
    Lifetimes lifetimes(g);
    MemoryProfile profile = MemoryProfile::compute(lifetimes);
    // Brute force: a storage is live at i if produced at or before i and
    // read (through any alias) at or after i, or returned.
    for (int i = 0; i < numNodes; ++i) {
      int64_t live = 0;
      for (ValueId s = 0; s < static_cast<ValueId>(g.numValues()); ++s) {
        const GraphValue &storage = g.getValue(s);
        if (storage.isInput() || g.isAlias(s))
          continue;
        bool before = storage.producer <= i, after = storage.producer == i;
        for (ValueId v = 0; v < static_cast<ValueId>(g.numValues()); ++v) {
          if (g.getValue(v).storage != s)
            continue;
          if (g.getValue(v).isOutput)
            after = true;
          for (NodeId user : g.getValue(v).users)
            after |= user >= i;
        }
        if (before && after)
          live += storage.bytes;
      }
      ASSERT_EQ(profile.liveBytes[i], live) << "trial " << trial << " node "
                                            << i;
    }
  }
}

TEST(LifetimesTest, FormatBytes) {
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(int64_t(3) << 30), "3.00 GiB");
}

} // namespace

//===- IntervalPackingTest.cpp - Arena packing properties -----------------===//

#include "lethe/Support/IntervalPacking.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

using namespace lethe;

namespace {

void expectValid(llvm::ArrayRef<PackInterval> intervals,
                 const PackResult &result, int64_t alignment) {
  ASSERT_EQ(result.offsets.size(), intervals.size());
  auto [a, b] = findOverlap(intervals, result.offsets, alignment);
  EXPECT_EQ(a, -1) << "intervals " << a << " and " << b << " overlap";
  EXPECT_GE(result.arenaBytes, result.maxLiveBytes);
  EXPECT_EQ(result.maxLiveBytes, computeMaxLive(intervals, alignment));
  for (auto [index, offset] : llvm::enumerate(result.offsets)) {
    EXPECT_EQ(offset % alignment, 0);
    EXPECT_LE(offset + alignBytes(intervals[index].bytes, alignment),
              result.arenaBytes);
  }
}

/// `order` packs `intervals` at their max-live, `maxLive`, where each of
/// `others` needs at least `othersAtLeast`, and the packer keeps it.
void expectOnlyOrderMeetsMaxLive(llvm::ArrayRef<PackInterval> intervals,
                                 llvm::ArrayRef<PackOrder> others,
                                 int64_t othersAtLeast, PackOrder order,
                                 int64_t maxLive) {
  for (PackOrder other : others)
    EXPECT_GE(packIntervals(intervals, 256, other).arenaBytes, othersAtLeast)
        << stringifyPackOrder(other).str();
  PackResult alone = packIntervals(intervals, 256, order);
  expectValid(intervals, alone, 256);
  EXPECT_EQ(alone.arenaBytes, maxLive);
  PackResult best = packIntervals(intervals, 256);
  expectValid(intervals, best, 256);
  EXPECT_EQ(best.arenaBytes, maxLive);
  EXPECT_EQ(best.maxLiveBytes, maxLive);
  EXPECT_EQ(best.order, order);
}

/// A training step's memory: L layers of forward activations (some saved
/// for backward, some freed at once), then backward layers in reverse that
/// free the saved ones, with gradient temporaries in between.
std::vector<PackInterval> layeredWorkload(std::mt19937_64 &rng, int layers,
                                          int perLayer) {
  std::vector<PackInterval> intervals;
  std::uniform_int_distribution<int> kind(0, 3);
  std::bernoulli_distribution saved(0.6);
  const int64_t hidden = 1 << 20;
  auto sizeOf = [&](int k) {
    switch (k) {
    case 0:
      return hidden;
    case 1:
      return 4 * hidden;
    case 2:
      return 2 * hidden;
    default:
      return hidden / 64;
    }
  };
  // Same layer shapes repeat, as in transformer stacks.
  std::vector<std::pair<int64_t, bool>> layerShape;
  for (int i = 0; i < perLayer; ++i)
    layerShape.push_back({sizeOf(kind(rng)), saved(rng)});

  int64_t position = 0;
  std::vector<std::vector<size_t>> savedByLayer(layers);
  for (int layer = 0; layer < layers; ++layer) {
    for (auto [bytes, isSaved] : layerShape) {
      intervals.push_back({position, position + 2, bytes});
      if (isSaved)
        savedByLayer[layer].push_back(intervals.size() - 1);
      ++position;
    }
  }
  for (int layer = layers - 1; layer >= 0; --layer) {
    for (auto [bytes, isSaved] : layerShape) {
      intervals.push_back({position, position + 3, bytes});
      ++position;
    }
    for (size_t index : savedByLayer[layer])
      intervals[index].end = position;
    ++position;
  }
  return intervals;
}

TEST(IntervalPackingTest, EmptyAndZeroSized) {
  PackResult result = packIntervals({}, 256);
  EXPECT_EQ(result.arenaBytes, 0);
  std::vector<PackInterval> zero = {{0, 4, 0}, {1, 1, 100}};
  result = packIntervals(zero, 256);
  EXPECT_EQ(result.arenaBytes, 0);
  EXPECT_EQ(result.maxLiveBytes, 0);
}

TEST(IntervalPackingTest, DisjointLifetimesShareMemory) {
  std::vector<PackInterval> intervals = {
      {0, 2, 1000}, {2, 4, 1000}, {4, 6, 1000}};
  PackResult result = packIntervals(intervals, 256);
  EXPECT_EQ(result.arenaBytes, 1024);
  EXPECT_EQ(result.maxLiveBytes, 1024);
  expectValid(intervals, result, 256);
}

TEST(IntervalPackingTest, StackIsPackedExactly) {
  // Nested lifetimes (a stack) pack to exactly max-live.
  std::vector<PackInterval> intervals;
  for (int i = 0; i < 50; ++i)
    intervals.push_back({i, 100 - i, 256 * (1 + i % 7)});
  PackResult result = packIntervals(intervals, 256);
  expectValid(intervals, result, 256);
  EXPECT_EQ(result.arenaBytes, result.maxLiveBytes);
}

TEST(IntervalPackingTest, EveryOrderIsValidOnRandomSets) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::uniform_int_distribution<int> count(1, 120);
    std::uniform_int_distribution<int64_t> position(0, 200);
    std::uniform_int_distribution<int64_t> length(1, 60);
    std::uniform_int_distribution<int64_t> bytes(1, 1 << 16);
    std::vector<PackInterval> intervals;
    for (int i = 0, n = count(rng); i < n; ++i) {
      int64_t begin = position(rng);
      intervals.push_back({begin, begin + length(rng), bytes(rng)});
    }
    for (int64_t alignment : {1, 256}) {
      PackResult best = packIntervals(intervals, alignment);
      expectValid(intervals, best, alignment);
      for (PackOrder order :
           {PackOrder::BySize, PackOrder::ByLifetime, PackOrder::ByArea,
            PackOrder::ByBegin, PackOrder::Skyline, PackOrder::PeakOutward}) {
        SCOPED_TRACE(std::string(stringifyPackOrder(order)));
        PackResult one = packIntervals(intervals, alignment, order);
        expectValid(intervals, one, alignment);
        // The packer keeps the best of the orders it tries.
        EXPECT_LE(best.arenaBytes, one.arenaBytes);
      }
      // Within a small factor of the bound even on unstructured sets.
      EXPECT_LE(best.arenaBytes, best.maxLiveBytes * 3 / 2);
    }
  }
}

TEST(IntervalPackingTest, SkylineFillsBesideTallBuffers) {
  // Nine buffers, one allocation or release per position (a program's
  // shape). Placed one by one in any of the fixed orders, the long-lived
  // 256-byte buffer [1, 13) or the 1024-byte ones leave a 256-byte gap
  // (arena 3584 or 3840; the packer before the skyline kept 3584, +7.7%).
  // Best-fit on the skyline fills each lowest segment with the largest
  // buffer living inside it and meets max-live, 3328.
  std::vector<PackInterval> intervals = {
      {4, 8, 768},  {2, 10, 1024}, {11, 16, 768}, {5, 7, 256}, {6, 14, 1024},
      {0, 3, 1024}, {9, 15, 768},  {12, 17, 512}, {1, 13, 256}};
  expectOnlyOrderMeetsMaxLive(intervals,
                              {PackOrder::BySize, PackOrder::ByLifetime,
                               PackOrder::ByArea, PackOrder::ByBegin},
                              3584, PackOrder::Skyline, 3328);
}

TEST(IntervalPackingTest, PeakOutwardFillsAroundThePeak) {
  // Max-live, 2816, is first reached at position 8 by [4, 9) 1024,
  // [8, 10) 1024 and [6, 11) 768; an arena at max-live puts these side by
  // side and the others in the room they leave. By size, [1, 6) takes
  // offset 0 and pushes [4, 9) to 1024, [9, 12) then takes 0 and [8, 10)
  // and [6, 11) go above them (3840, +36%); by lifetime, area or
  // allocation order, or on the skyline, the arena is 3072 or more. Placed
  // from the peak outwards (bytes / (1 + distance)^4), the peak's three
  // go in first and the rest fit around them.
  std::vector<PackInterval> intervals = {{6, 7, 768},   {4, 9, 1024},
                                         {1, 6, 1024},  {9, 12, 1024},
                                         {8, 10, 1024}, {6, 11, 768}};
  expectOnlyOrderMeetsMaxLive(intervals,
                              {PackOrder::BySize, PackOrder::ByLifetime,
                               PackOrder::ByArea, PackOrder::ByBegin,
                               PackOrder::Skyline},
                              3072, PackOrder::PeakOutward, 2816);
}

/// Many tensors of a few equal sizes whose lifetimes interleave (a
/// state-space model's scan: each step's big tensors live a few steps),
/// with small long-lived ones among them.
std::vector<PackInterval> interleavedWorkload(std::mt19937_64 &rng, int count) {
  std::vector<PackInterval> intervals;
  std::uniform_int_distribution<int> span(1, 12);
  std::uniform_int_distribution<int> kind(0, 9);
  const int64_t big = 96 << 20;
  for (int i = 0; i < count; ++i) {
    int k = kind(rng);
    int64_t bytes = k < 6 ? big : (k < 9 ? big / 128 : big / 32);
    int64_t length = k == 9 ? 8 * span(rng) : span(rng);
    intervals.push_back({i, i + length, bytes});
  }
  return intervals;
}

TEST(IntervalPackingTest, InterleavedWorkloadsNeverWorseThanFixedOrders) {
  // The property the skyline was added for, on random interleaved sets:
  // valid, at least max-live, and never above any single order's arena.
  std::mt19937_64 rng(11);
  int skylineWins = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::uniform_int_distribution<int> count(20, 400);
    std::vector<PackInterval> intervals = interleavedWorkload(rng, count(rng));
    PackResult best = packIntervals(intervals, 256);
    expectValid(intervals, best, 256);
    int64_t fixed = std::numeric_limits<int64_t>::max();
    for (PackOrder order : {PackOrder::BySize, PackOrder::ByLifetime,
                            PackOrder::ByArea, PackOrder::ByBegin})
      fixed = std::min(fixed, packIntervals(intervals, 256, order).arenaBytes);
    PackResult peak = packIntervals(intervals, 256, PackOrder::PeakOutward);
    expectValid(intervals, peak, 256);
    EXPECT_LE(best.arenaBytes, peak.arenaBytes) << "trial " << trial;
    PackResult skyline = packIntervals(intervals, 256, PackOrder::Skyline);
    expectValid(intervals, skyline, 256);
    EXPECT_LE(best.arenaBytes, std::min(fixed, skyline.arenaBytes))
        << "trial " << trial;
    skylineWins += skyline.arenaBytes < fixed;
  }
  // Not a tuning target: the skyline must matter on this shape at all.
  EXPECT_GT(skylineWins, 0);
}

TEST(IntervalPackingTest, LayeredWorkloadsNearMaxLive) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    std::uniform_int_distribution<int> layers(2, 48);
    std::uniform_int_distribution<int> perLayer(3, 30);
    std::vector<PackInterval> intervals =
        layeredWorkload(rng, layers(rng), perLayer(rng));
    PackResult result = packIntervals(intervals, 256);
    expectValid(intervals, result, 256);
    EXPECT_LE(static_cast<double>(result.arenaBytes),
              1.03 * static_cast<double>(result.maxLiveBytes))
        << "trial " << trial << " via "
        << stringifyPackOrder(result.order).str();
  }
}

/// A random set of one of three shapes by `trial`: uniform random lifetimes
/// (few or many distinct positions, some empty or zero-sized), training
/// steps' layers, interleaved scans.
std::vector<PackInterval> randomWorkload(std::mt19937_64 &rng, int trial) {
  std::vector<PackInterval> intervals;
  switch (trial % 3) {
  case 0: {
    std::uniform_int_distribution<int> count(0, 400);
    // Spans of a few positions too (every begin taken, in a tree of
    // exactly that many leaves), and lifetimes up to all of it.
    int64_t span = std::uniform_int_distribution<int64_t>(
        1, int64_t(1) << std::uniform_int_distribution<int>(0, 9)(rng))(rng);
    std::uniform_int_distribution<int64_t> position(0, span);
    std::uniform_int_distribution<int64_t> length(0, trial % 2 ? span / 2 + 1
                                                               : 2 * span);
    std::uniform_int_distribution<int64_t> bytes(0, 1 << 12);
    for (int i = 0, n = count(rng); i < n; ++i) {
      int64_t begin = position(rng);
      intervals.push_back({begin, begin + length(rng), bytes(rng)});
    }
    break;
  }
  case 1:
    intervals =
        layeredWorkload(rng, std::uniform_int_distribution<int>(1, 24)(rng),
                        std::uniform_int_distribution<int>(1, 20)(rng));
    break;
  default:
    intervals = interleavedWorkload(
        rng, std::uniform_int_distribution<int>(1, 400)(rng));
    break;
  }
  return intervals;
}

TEST(IntervalPackingTest, IndexedPlacementEqualsScan) {
  // The index of placed buffers by lifetime must place every buffer where
  // the scan of all placed ones does, in any order, on sets of every shape:
  // uniform random lifetimes (few or many distinct positions, some empty or
  // zero-sized), training steps' layers, interleaved scans.
  std::mt19937_64 rng(20);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<PackInterval> intervals = randomWorkload(rng, trial);
    std::vector<int> order(intervals.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t alignment : {1, 256}) {
      for (bool bestFit : {true, false}) {
        SCOPED_TRACE("trial " + std::to_string(trial) + ", alignment " +
                     std::to_string(alignment) +
                     (bestFit ? ", best-fit" : ", first-fit"));
        std::vector<int64_t> indexed, scanned;
        int64_t arena = placeInOrder(intervals, order, alignment, bestFit,
                                     indexed, PlacedLookup::Index);
        EXPECT_EQ(arena, placeInOrder(intervals, order, alignment, bestFit,
                                      scanned, PlacedLookup::Scan));
        EXPECT_EQ(indexed, scanned);
        auto [a, b] = findOverlap(intervals, indexed, alignment);
        EXPECT_EQ(a, -1) << "intervals " << a << " and " << b << " overlap";
      }
    }
  }
}

TEST(IntervalPackingTest, SweepEqualsPlacementInAllocationOrder) {
  // The sweep must place every buffer where best-fit placement in
  // allocation order does: its live set is the placed buffers a new one
  // meets, its gaps by size the best fit.
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<PackInterval> intervals = randomWorkload(rng, trial);
    for (int64_t alignment : {1, 256}) {
      SCOPED_TRACE("trial " + std::to_string(trial) + ", alignment " +
                   std::to_string(alignment));
      std::vector<int64_t> swept, placed;
      int64_t arena = placeByBeginBestFit(intervals, alignment, swept);
      EXPECT_EQ(arena,
                placeInOrder(intervals, orderFor(intervals, PackOrder::ByBegin),
                             alignment, /*bestFit=*/true, placed,
                             PlacedLookup::Scan));
      EXPECT_EQ(swept, placed);
    }
  }
}

TEST(IntervalPackingTest, SweepBoundsPackIntervals) {
  // `lethe plan`'s feasibility check takes the sweep's arena where it fits
  // the budget: packIntervals, which lethe-assign-buffers packs with, must
  // never pack into more, also past the size where its placements' bound
  // skips allocation order (the last trials).
  std::mt19937_64 rng(18);
  int atMaxLive = 0, over = 0;
  for (int trial = 0; trial < 154; ++trial) {
    std::vector<PackInterval> intervals =
        trial < 150 ? randomWorkload(rng, trial)
                    : interleavedWorkload(rng, 11000 + trial);
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::vector<int64_t> swept;
    int64_t sweep = placeByBeginBestFit(intervals, 256, swept);
    PackResult packed = packIntervals(intervals, 256);
    EXPECT_LE(packed.arenaBytes, sweep);
    (sweep == packed.maxLiveBytes ? atMaxLive : over)++;
  }
  EXPECT_GT(atMaxLive, 0);
  EXPECT_GT(over, 0);
}

TEST(IntervalPackingTest, Deterministic) {
  std::mt19937_64 rng(3);
  std::vector<PackInterval> intervals = layeredWorkload(rng, 12, 17);
  PackResult first = packIntervals(intervals, 256);
  PackResult second = packIntervals(intervals, 256);
  EXPECT_EQ(first.offsets, second.offsets);
}

} // namespace

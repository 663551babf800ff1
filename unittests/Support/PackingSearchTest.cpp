//===- PackingSearchTest.cpp - Packing into a capacity by search ----------===//

#include "lethe/Support/IntervalPacking.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <limits>
#include <random>

using namespace lethe;

namespace {

constexpr int64_t kAlignment = 256;

/// Cuts [t0, t1) x [a0, a1) into buffers, in time or in bytes, at random:
/// a packing with no gap, so every position is at the arena and max-live
/// is the arena. The greedy orders often miss it (a cut in bytes puts two
/// buffers side by side that an order places apart).
void tile(std::mt19937_64 &rng, int64_t t0, int64_t t1, int64_t a0, int64_t a1,
          int depth, std::vector<PackInterval> &out) {
  std::uniform_real_distribution<double> unit(0, 1);
  bool inTime = t1 - t0 >= 2, inBytes = a1 - a0 >= 2 * kAlignment;
  if ((depth > 0 && unit(rng) < 0.05 * depth) || (!inTime && !inBytes)) {
    out.push_back({t0, t1, a1 - a0});
    return;
  }
  if (inTime && (!inBytes || unit(rng) < 0.5)) {
    int64_t cut = std::uniform_int_distribution<int64_t>(t0 + 1, t1 - 1)(rng);
    tile(rng, t0, cut, a0, a1, depth + 1, out);
    tile(rng, cut, t1, a0, a1, depth + 1, out);
    return;
  }
  int64_t cut = a0 + kAlignment * std::uniform_int_distribution<int64_t>(
                                      1, (a1 - a0) / kAlignment - 1)(rng);
  tile(rng, t0, t1, a0, cut, depth + 1, out);
  tile(rng, t0, t1, cut, a1, depth + 1, out);
}

std::vector<PackInterval> tiling(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<PackInterval> intervals;
  tile(rng, 0, 60, 0, 64 * kAlignment, 0, intervals);
  std::shuffle(intervals.begin(), intervals.end(), rng);
  return intervals;
}

int64_t arenaOf(llvm::ArrayRef<PackInterval> intervals,
                llvm::ArrayRef<int64_t> offsets) {
  int64_t arena = 0;
  for (auto [in, offset] : llvm::zip_equal(intervals, offsets))
    if (in.bytes > 0 && in.begin < in.end)
      arena = std::max(arena, offset + alignBytes(in.bytes, kAlignment));
  return arena;
}

TEST(PackingSearchTest, FindsGaplessPackingsTheOrdersMiss) {
  int found = 0, ordersMiss = 0, foundWhereOrdersMiss = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<PackInterval> intervals = tiling(seed);
    int64_t maxLive = computeMaxLive(intervals, kAlignment);
    ASSERT_EQ(maxLive, 64 * kAlignment);
    int64_t byOrders = std::numeric_limits<int64_t>::max();
    for (PackOrder order :
         {PackOrder::BySize, PackOrder::ByLifetime, PackOrder::ByArea,
          PackOrder::ByBegin, PackOrder::Skyline, PackOrder::PeakOutward})
      byOrders = std::min(
          byOrders, packIntervals(intervals, kAlignment, order).arenaBytes);
    ordersMiss += byOrders > maxLive;
    std::optional<std::vector<int64_t>> offsets =
        searchPacking(intervals, kAlignment, maxLive, 1e7);
    if (!offsets)
      continue;
    ++found;
    foundWhereOrdersMiss += byOrders > maxLive;
    auto [a, b] = findOverlap(intervals, *offsets, kAlignment);
    EXPECT_EQ(a, -1) << "seed " << seed << ": " << a << " and " << b;
    EXPECT_LE(arenaOf(intervals, *offsets), maxLive) << "seed " << seed;
  }
  // When written: found on 14 of 20, the orders miss max-live on 11, and
  // the search finds 5 of those.
  EXPECT_GE(ordersMiss, 8);
  EXPECT_GE(found, 12);
  EXPECT_GE(foundWhereOrdersMiss, 4);
}

TEST(PackingSearchTest, NothingBelowMaxLive) {
  std::vector<PackInterval> intervals = tiling(1);
  int64_t maxLive = computeMaxLive(intervals, kAlignment);
  EXPECT_FALSE(searchPacking(intervals, kAlignment, maxLive - 1, 1e7));
  // Two buffers live together cannot share a capacity of one: the whole
  // tree is searched and the search says so without spending its work.
  std::vector<PackInterval> two = {{0, 2, 256}, {1, 3, 256}, {0, 1, 256}};
  EXPECT_FALSE(searchPacking(two, kAlignment, 256, 1e12));
  std::optional<std::vector<int64_t>> fits =
      searchPacking(two, kAlignment, 512, 1e7);
  ASSERT_TRUE(fits);
  EXPECT_EQ(findOverlap(two, *fits, kAlignment).first, -1);
}

TEST(PackingSearchTest, PackerClosesGapsTheOrdersLeave) {
  int ordersMiss = 0, closed = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    std::vector<PackInterval> intervals = tiling(seed);
    PackResult best = packIntervals(intervals, kAlignment);
    EXPECT_EQ(findOverlap(intervals, best.offsets, kAlignment).first, -1);
    EXPECT_EQ(best.arenaBytes, arenaOf(intervals, best.offsets));
    if (best.order != PackOrder::Search && best.arenaBytes == best.maxLiveBytes)
      continue;
    ++ordersMiss;
    closed += best.arenaBytes == best.maxLiveBytes;
  }
  // When written: the orders miss max-live on 13 of 30, the search closes
  // 7 of those (and lowers others).
  EXPECT_GE(ordersMiss, 10);
  EXPECT_GE(closed, 5);
}

TEST(PackingSearchTest, Deterministic) {
  std::vector<PackInterval> intervals = tiling(3);
  int64_t maxLive = computeMaxLive(intervals, kAlignment);
  EXPECT_EQ(searchPacking(intervals, kAlignment, maxLive, 1e7),
            searchPacking(intervals, kAlignment, maxLive, 1e7));
}

} // namespace

//===- IntervalPacking.cpp - Static offsets for buffers with lifetimes ----===//

#include "lethe/Support/IntervalPacking.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

using namespace lethe;

llvm::StringRef lethe::stringifyPackOrder(PackOrder order) {
  switch (order) {
  case PackOrder::BySize:
    return "by-size";
  case PackOrder::ByLifetime:
    return "by-lifetime";
  case PackOrder::ByArea:
    return "by-area";
  case PackOrder::ByBegin:
    return "by-begin";
  case PackOrder::Perturbed:
    return "perturbed";
  }
  return "unknown";
}

int64_t lethe::alignBytes(int64_t bytes, int64_t alignment) {
  if (alignment <= 1)
    return bytes;
  return (bytes + alignment - 1) / alignment * alignment;
}

int64_t lethe::computeMaxLive(llvm::ArrayRef<PackInterval> intervals,
                              int64_t alignment) {
  // Frees at a position happen before allocations at it: [begin, end).
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * intervals.size());
  for (const PackInterval &interval : intervals) {
    if (interval.bytes <= 0 || interval.begin >= interval.end)
      continue;
    int64_t bytes = alignBytes(interval.bytes, alignment);
    events.push_back({interval.begin, bytes});
    events.push_back({interval.end, -bytes});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (auto [position, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

static std::vector<int> orderFor(llvm::ArrayRef<PackInterval> intervals,
                                 PackOrder order) {
  std::vector<int> indices(intervals.size());
  std::iota(indices.begin(), indices.end(), 0);
  auto length = [&](int i) { return intervals[i].end - intervals[i].begin; };
  auto key = [&](int i) -> std::tuple<double, int64_t, int64_t> {
    const PackInterval &in = intervals[i];
    switch (order) {
    case PackOrder::BySize:
      return {-static_cast<double>(in.bytes), -length(i), in.begin};
    case PackOrder::ByLifetime:
      return {-static_cast<double>(length(i)), -in.bytes, in.begin};
    case PackOrder::ByArea:
      return {-static_cast<double>(in.bytes) * static_cast<double>(length(i)),
              -in.bytes, in.begin};
    case PackOrder::ByBegin:
    case PackOrder::Perturbed:
      return {static_cast<double>(in.begin), -length(i), -in.bytes};
    }
    return {0.0, 0, 0};
  };
  std::stable_sort(indices.begin(), indices.end(),
                   [&](int a, int b) { return key(a) < key(b); });
  return indices;
}

/// Greedy placement in `order`: each buffer goes in the smallest gap (or,
/// with `bestFit` false, the lowest gap) that fits among the buffers it
/// meets in time, else on top of them.
static int64_t place(llvm::ArrayRef<PackInterval> intervals,
                     llvm::ArrayRef<int> order, int64_t alignment, bool bestFit,
                     std::vector<int64_t> &offsets) {
  // Lifetimes kept beside offsets: the scan below touches nothing else.
  struct Placed {
    int64_t offset;
    int64_t end;
    int64_t begin;
    int64_t finish;
  };
  std::vector<Placed> placed;
  placed.reserve(intervals.size());
  offsets.assign(intervals.size(), 0);
  int64_t arena = 0;
  for (int index : order) {
    const PackInterval &in = intervals[index];
    if (in.bytes <= 0 || in.begin >= in.end)
      continue;
    int64_t bytes = alignBytes(in.bytes, alignment);
    int64_t top = 0;
    int64_t bestOffset = -1;
    int64_t bestGap = std::numeric_limits<int64_t>::max();
    for (const Placed &other : placed) {
      if (!(other.begin < in.end && in.begin < other.finish))
        continue;
      int64_t gap = other.offset - top;
      if (gap >= bytes && gap < bestGap) {
        bestGap = gap;
        bestOffset = top;
        if (!bestFit)
          break;
      }
      top = std::max(top, other.end);
    }
    int64_t offset = bestOffset >= 0 ? bestOffset : top;
    offsets[index] = offset;
    Placed entry{offset, offset + bytes, in.begin, in.end};
    auto position = std::upper_bound(
        placed.begin(), placed.end(), entry,
        [](const Placed &a, const Placed &b) { return a.offset < b.offset; });
    placed.insert(position, entry);
    arena = std::max(arena, offset + bytes);
  }
  return arena;
}

PackResult lethe::packIntervals(llvm::ArrayRef<PackInterval> intervals,
                                int64_t alignment, PackOrder order) {
  PackResult result;
  result.order = order;
  result.maxLiveBytes = computeMaxLive(intervals, alignment);
  result.arenaBytes = place(intervals, orderFor(intervals, order), alignment,
                            /*bestFit=*/true, result.offsets);
  return result;
}

/// splitmix64: a fixed, portable PRNG, so packing is the same everywhere.
static uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

PackResult lethe::packIntervals(llvm::ArrayRef<PackInterval> intervals,
                                int64_t alignment) {
  PackResult best;
  best.maxLiveBytes = computeMaxLive(intervals, alignment);
  best.arenaBytes = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> offsets;
  // A placement costs about n^2/2 overlap checks: bound the work (about a
  // second on 20,000 buffers), keeping at least the first four placements.
  size_t n = intervals.size();
  double cost = 0.5 * static_cast<double>(n) * static_cast<double>(n);
  int placements =
      static_cast<int>(std::max(4.0, std::min(1e6, 4e8 / std::max(cost, 1.0))));
  auto consider = [&](llvm::ArrayRef<int> order, PackOrder kind) {
    for (bool bestFit : {true, false}) {
      if (placements-- <= 0)
        return true;
      int64_t arena = place(intervals, order, alignment, bestFit, offsets);
      if (arena < best.arenaBytes) {
        best.arenaBytes = arena;
        best.offsets = offsets;
        best.order = kind;
      }
      if (best.arenaBytes == best.maxLiveBytes)
        return true;
    }
    return false;
  };
  for (PackOrder order : {PackOrder::BySize, PackOrder::ByLifetime,
                          PackOrder::ByArea, PackOrder::ByBegin})
    if (consider(orderFor(intervals, order), order))
      return best;

  // Perturbed orders: the size, lifetime and area keys with random weight,
  // which often closes the last few percent.
  const int tries = 48;
  uint64_t state = 0x1e7e;
  std::vector<double> key(n);
  std::vector<int> order(n);
  for (int attempt = 0; attempt < tries; ++attempt) {
    for (size_t i = 0; i < n; ++i) {
      const PackInterval &in = intervals[i];
      double noise = static_cast<double>(nextRandom(state) >> 11) * 0x1.0p-53;
      double bytes = static_cast<double>(in.bytes);
      double length = static_cast<double>(in.end - in.begin);
      switch (attempt % 3) {
      case 0:
        key[i] = -bytes * (1.0 + 0.3 * noise);
        break;
      case 1:
        key[i] = -length * (1.0 + 0.3 * noise);
        break;
      default:
        key[i] = -bytes * length * (1.0 + 0.5 * noise);
        break;
      }
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return key[a] < key[b]; });
    if (consider(order, PackOrder::Perturbed))
      break;
  }
  return best;
}

std::pair<int, int> lethe::findOverlap(llvm::ArrayRef<PackInterval> intervals,
                                       llvm::ArrayRef<int64_t> offsets,
                                       int64_t alignment) {
  // Sweep positions; keep the live buffers by offset.
  std::vector<int> byBegin;
  for (int i = 0, e = intervals.size(); i < e; ++i)
    if (intervals[i].bytes > 0 && intervals[i].begin < intervals[i].end)
      byBegin.push_back(i);
  std::sort(byBegin.begin(), byBegin.end(), [&](int a, int b) {
    return intervals[a].begin < intervals[b].begin;
  });
  std::multimap<int64_t, int> ending; // end position -> index
  std::map<int64_t, int> live;        // offset -> index
  for (int index : byBegin) {
    const PackInterval &in = intervals[index];
    while (!ending.empty() && ending.begin()->first <= in.begin) {
      int done = ending.begin()->second;
      auto it = live.find(offsets[done]);
      if (it != live.end() && it->second == done)
        live.erase(it);
      ending.erase(ending.begin());
    }
    int64_t offset = offsets[index];
    int64_t end = offset + alignBytes(in.bytes, alignment);
    auto next = live.lower_bound(offset);
    if (next != live.end() && next->first < end)
      return {next->second, index};
    if (next != live.begin()) {
      auto prev = std::prev(next);
      if (prev->first + alignBytes(intervals[prev->second].bytes, alignment) >
          offset)
        return {prev->second, index};
    }
    live[offset] = index;
    ending.insert({in.end, index});
  }
  return {-1, -1};
}

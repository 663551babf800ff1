//===- PackingSweep.cpp - Best-fit placement in allocation order ----------===//
//
// Placing buffers in order of their begin, the placed buffers a new one
// meets in time are exactly those still live at its begin: an allocator's
// state. Kept as the live ranges by offset and their free gaps by size, a
// best-fit placement is a few ordered-set operations instead of a walk over
// the union of every placed buffer it meets.
//
//===----------------------------------------------------------------------===//

#include "lethe/Support/IntervalPacking.h"

#include <functional>
#include <map>
#include <queue>
#include <set>

using namespace lethe;

namespace {
/// The live ranges of an arena and the free gaps below their top.
class LiveArena {
public:
  /// The best-fit offset for `bytes`: the smallest gap that holds it
  /// (lowest on ties), else the top of the live ranges.
  int64_t place(int64_t bytes) {
    auto gap = gaps.lower_bound({bytes, 0});
    if (gap == gaps.end()) {
      int64_t top = ranges.empty() ? 0 : ranges.rbegin()->second;
      ranges.emplace_hint(ranges.end(), top, top + bytes);
      return top;
    }
    auto [size, offset] = *gap;
    gaps.erase(gap);
    if (size > bytes)
      gaps.insert({size - bytes, offset + bytes});
    ranges.emplace(offset, offset + bytes);
    return offset;
  }

  /// Frees the live range at `offset`, joining the free space around it.
  void release(int64_t offset) {
    auto range = ranges.find(offset);
    int64_t end = range->second;
    int64_t below = range == ranges.begin() ? 0 : std::prev(range)->second;
    auto next = std::next(range);
    if (below < offset)
      gaps.erase({offset - below, below});
    if (next == ranges.end()) {
      // The top range: the space below it is no gap any more.
      ranges.erase(range);
      return;
    }
    if (end < next->first)
      gaps.erase({next->first - end, end});
    gaps.insert({next->first - below, below});
    ranges.erase(range);
  }

private:
  std::map<int64_t, int64_t> ranges;          // offset -> end, disjoint
  std::set<std::pair<int64_t, int64_t>> gaps; // (size, offset), non-empty
};
} // namespace

int64_t lethe::placeByBeginBestFit(llvm::ArrayRef<PackInterval> intervals,
                                   int64_t alignment,
                                   std::vector<int64_t> &offsets) {
  offsets.assign(intervals.size(), 0);
  LiveArena live;
  // (end, index) of the live buffers, soonest end first.
  using Ending = std::pair<int64_t, int>;
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> ending;
  int64_t arena = 0;
  for (int index : orderFor(intervals, PackOrder::ByBegin)) {
    const PackInterval &in = intervals[index];
    if (in.bytes <= 0 || in.begin >= in.end)
      continue;
    // Lifetimes are [begin, end): one ending at this begin is not met.
    while (!ending.empty() && ending.top().first <= in.begin) {
      live.release(offsets[ending.top().second]);
      ending.pop();
    }
    int64_t bytes = alignBytes(in.bytes, alignment);
    int64_t offset = live.place(bytes);
    offsets[index] = offset;
    ending.push({in.end, index});
    arena = std::max(arena, offset + bytes);
  }
  return arena;
}

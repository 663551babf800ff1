//===- PackingSearch.cpp - Packing into a capacity by bounded search -----===//
//
// The greedy orders of IntervalPacking.cpp place each buffer once and never
// revisit it; where a training step's largest buffers must sit side by side
// at several peaks, one early choice (which of three equal buffers takes
// which column) decides whether a long-lived buffer later finds a column,
// and no fixed order gets it right (MobileNet-V3's least plan: +4.4% over
// max-live by every order; a packing at max-live exists).
//
// This is a depth-first search over skyline placements (the skyline packer's
// moves, with backtracking), in the spirit of MiniMalloc (Moffitt, ASPLOS
// 2023): the lowest, leftmost segment of the skyline takes a buffer that
// lives inside it, or is raised to its lower neighbour (its space wasted).
// Every packing can be dropped until each buffer rests on another or on the
// floor, and such a packing is reached by these moves, so the search is
// complete; it is pruned by the bytes still to place: at each position the
// skyline plus the unplaced bytes live there must fit the capacity (placing
// a buffer keeps that sum; only a raise grows it, and is checked), and a
// pit that no unplaced buffer fits must be raised at once (checked before
// the placement that leaves it). Runs restart with seeded random weights on
// the candidates' order (few runs need to backtrack far), within a bound
// on the work, so the result is deterministic.
//
//===----------------------------------------------------------------------===//

#include "lethe/Support/IntervalPacking.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>
#include <numeric>

using namespace lethe;

namespace {

class SkylineSearch {
public:
  SkylineSearch(llvm::ArrayRef<PackInterval> intervals, int64_t alignment,
                int64_t capacity)
      : capacity(capacity) {
    for (const PackInterval &in : intervals)
      if (in.bytes > 0 && in.begin < in.end) {
        points.push_back(in.begin);
        points.push_back(in.end);
      }
    llvm::sort(points);
    points.erase(std::unique(points.begin(), points.end()), points.end());
    slots = points.empty() ? 0 : static_cast<int>(points.size()) - 1;
    unplacedBytes.assign(slots, 0);
    byBegin.assign(slots, {});
    auto slot = [&](int64_t position) {
      return static_cast<int>(llvm::lower_bound(points, position) -
                              points.begin());
    };
    for (auto [index, in] : llvm::enumerate(intervals)) {
      if (in.bytes <= 0 || in.begin >= in.end)
        continue;
      Buffer buffer{static_cast<int>(index), slot(in.begin), slot(in.end),
                    alignBytes(in.bytes, alignment),
                    static_cast<double>(in.bytes) *
                        static_cast<double>(in.end - in.begin)};
      for (int t = buffer.begin; t < buffer.end; ++t)
        unplacedBytes[t] += buffer.bytes;
      byBegin[buffer.begin].push_back(buffers.size());
      buffers.push_back(buffer);
    }
    placed.assign(buffers.size(), false);
    offsets.assign(intervals.size(), 0);
    frames.resize(3 * buffers.size() + 2);
  }

  /// Whether the capacity can hold the buffers at some position at all.
  bool possible() const {
    return llvm::all_of(unplacedBytes,
                        [&](int64_t bytes) { return bytes <= capacity; });
  }

  /// Restarted runs, each of at most `runNodes` nodes, until one packs or
  /// `work` is spent. The first run takes the candidates by area, largest
  /// first (the skyline packer's choice); the others weigh each by a
  /// seeded random factor in [1, 1 + kNoise).
  bool run(double work, int64_t runNodes) {
    workLeft = work;
    if (slots == 0)
      return true;
    const std::vector<int64_t> unplacedAtStart = unplacedBytes;
    random = 0x5eed;
    for (int attempt = 0; workLeft > 0; ++attempt) {
      noise = attempt ? kNoise : 0.0;
      nodesLeft = runNodes;
      left = buffers.size();
      placed.assign(buffers.size(), false);
      unplacedBytes = unplacedAtStart;
      depth = 0;
      unplacedBegins.assign(slots, 0);
      for (const Buffer &buffer : buffers)
        ++unplacedBegins[buffer.begin];
      skyline.assign(1, {0, slots, 0});
      switch (search()) {
      case Outcome::Packed:
        return true;
      case Outcome::Failed: // the whole tree searched: no packing exists
        return false;
      case Outcome::OutOfWork:
        break;
      }
    }
    return false;
  }

  std::vector<int64_t> offsets;

private:
  /// Weight of the random factor on a candidate's area: 2 lets a candidate
  /// of a third of another's area go first (tried on MobileNet-V3's least
  /// plan: 0.5 rarely leaves the greedy's choices, 4 loses the order).
  static constexpr double kNoise = 2.0;
  /// A node's fixed cost in steps (allocations): with it a step is about
  /// a nanosecond on the corpus's least plans.
  static constexpr double kNodeSteps = 100.0;

  struct Buffer {
    int index;
    int begin, end; // slots
    int64_t bytes;
    double area;
  };
  struct Segment {
    int begin, end;
    int64_t height;
  };
  struct Frame {
    std::vector<std::pair<double, int>> candidates;
    std::vector<Segment> saved;
  };
  enum class Outcome { Packed, Failed, OutOfWork };

  /// The candidates of [begin, end) at `height`: unplaced buffers living
  /// inside it that fit under the capacity there.
  template <typename Visit>
  bool forEachInside(int begin, int end, int64_t height, Visit visit) {
    for (int t = begin; t < end; ++t) {
      workLeft -= 1;
      if (!unplacedBegins[t])
        continue;
      workLeft -= static_cast<double>(byBegin[t].size());
      for (int b : byBegin[t])
        if (!placed[b] && buffers[b].end <= end &&
            height + buffers[b].bytes <= capacity && !visit(b))
          return false;
    }
    return true;
  }

  /// Whether the slots [begin, end), raised to `height`, still leave room
  /// for the bytes unplaced there.
  bool roomAbove(int begin, int end, int64_t height) {
    workLeft -= end - begin;
    for (int t = begin; t < end; ++t)
      if (height + unplacedBytes[t] > capacity)
        return false;
    return true;
  }

  /// A pit [begin, end) at `height` between higher neighbours `low` apart
  /// from the lower of them: if no buffer fits inside, it is raised to
  /// `raise` first thing, which must leave room.
  bool pitFillable(int begin, int end, int64_t height, int64_t raise) {
    if (begin >= end)
      return true;
    bool any = !forEachInside(begin, end, height, [](int) { return false; });
    return any || roomAbove(begin, end, raise);
  }

  Outcome search() {
    if (!left)
      return Outcome::Packed;
    if (--nodesLeft < 0 || workLeft <= 0)
      return Outcome::OutOfWork;
    // The node's own upkeep (its lists, the skyline's copy), in steps.
    workLeft -= kNodeSteps + 2.0 * static_cast<double>(skyline.size());
    size_t low = 0;
    for (size_t k = 1; k < skyline.size(); ++k)
      if (skyline[k].height < skyline[low].height)
        low = k;
    const Segment segment = skyline[low];
    const int64_t lowNeighbour = std::min(
        low > 0 ? skyline[low - 1].height : std::numeric_limits<int64_t>::max(),
        low + 1 < skyline.size() ? skyline[low + 1].height
                                 : std::numeric_limits<int64_t>::max());

    // Each depth's lists are kept between nodes: allocating them per node
    // was most of a node's time.
    Frame &frame = frames[depth];
    std::vector<std::pair<double, int>> &candidates = frame.candidates;
    candidates.clear();
    forEachInside(segment.begin, segment.end, segment.height, [&](int b) {
      double weight = buffers[b].area;
      if (noise > 0) {
        weight *=
            1.0 + noise * static_cast<double>(nextPackingRandom(random) >> 11) *
                      0x1.0p-53;
      }
      candidates.push_back({-weight, b});
      return true;
    });
    llvm::sort(candidates);
    workLeft -= 4.0 * static_cast<double>(candidates.size());
    std::vector<Segment> &saved = frame.saved;
    saved = skyline;
    for (auto [weight, b] : candidates) {
      const Buffer &buffer = buffers[b];
      int64_t top = segment.height + buffer.bytes;
      // The pieces left beside it are pits: their neighbours are higher.
      if (!pitFillable(
              segment.begin, buffer.begin, segment.height,
              std::min(low > 0 ? skyline[low - 1].height : top, top)) ||
          !pitFillable(
              buffer.end, segment.end, segment.height,
              std::min(low + 1 < skyline.size() ? skyline[low + 1].height : top,
                       top)))
        continue;
      place(b, +1);
      offsets[buffer.index] = segment.height;
      llvm::SmallVector<Segment, 3> pieces;
      if (segment.begin < buffer.begin)
        pieces.push_back({segment.begin, buffer.begin, segment.height});
      pieces.push_back({buffer.begin, buffer.end, top});
      if (buffer.end < segment.end)
        pieces.push_back({buffer.end, segment.end, segment.height});
      skyline.erase(skyline.begin() + low);
      skyline.insert(skyline.begin() + low, pieces.begin(), pieces.end());
      merge();
      ++depth;
      Outcome outcome = search();
      --depth;
      if (outcome != Outcome::Failed)
        return outcome;
      skyline = saved;
      place(b, -1);
    }
    // Nothing sits at its height: raise it to its lower neighbour.
    if (lowNeighbour == std::numeric_limits<int64_t>::max() ||
        !roomAbove(segment.begin, segment.end, lowNeighbour))
      return Outcome::Failed;
    skyline[low].height = lowNeighbour;
    merge();
    ++depth;
    Outcome outcome = search();
    --depth;
    if (outcome == Outcome::Failed)
      skyline = saved;
    return outcome;
  }

  void place(int b, int sign) {
    const Buffer &buffer = buffers[b];
    placed[b] = sign > 0;
    left -= sign;
    unplacedBegins[buffer.begin] -= sign;
    workLeft -= buffer.end - buffer.begin;
    for (int t = buffer.begin; t < buffer.end; ++t)
      unplacedBytes[t] -= sign * buffer.bytes;
  }

  /// Neighbours of equal height are one segment.
  void merge() { mergeEqualHeights(skyline); }

  int64_t capacity;
  int slots = 0;
  std::vector<Buffer> buffers;
  /// The positions where a buffer begins or ends, ascending: slot k is
  /// [points[k], points[k + 1]).
  std::vector<int64_t> points;
  std::vector<std::vector<int>> byBegin;
  std::vector<int64_t> unplacedBytes;
  std::vector<bool> placed;
  std::vector<Segment> skyline;
  /// One per depth: a node places a buffer or raises a segment (which
  /// merges two), so the depth is at most 3 per buffer.
  std::vector<Frame> frames;
  size_t depth = 0;
  /// Unplaced buffers beginning at each slot.
  std::vector<int> unplacedBegins;
  size_t left = 0;
  double noise = 0, workLeft = 0;
  int64_t nodesLeft = 0;
  uint64_t random = 0;
};

} // namespace

std::optional<std::vector<int64_t>>
lethe::searchPacking(llvm::ArrayRef<PackInterval> intervals, int64_t alignment,
                     int64_t capacity, double work) {
  SkylineSearch search(intervals, alignment, capacity);
  if (!search.possible())
    return std::nullopt;
  // A run may backtrack over a few placements per buffer before the next
  // starts afresh: runs of 8 nodes per buffer found MobileNet-V3's packing
  // at max-live where one long run did not.
  int64_t runNodes = 8 * static_cast<int64_t>(intervals.size()) + 64;
  if (!search.run(work, runNodes))
    return std::nullopt;
  return std::move(search.offsets);
}

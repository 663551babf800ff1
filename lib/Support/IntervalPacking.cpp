//===- IntervalPacking.cpp - Static offsets for buffers with lifetimes ----===//

#include "lethe/Support/IntervalPacking.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

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
  case PackOrder::Skyline:
    return "skyline";
  case PackOrder::PeakOutward:
    return "peak-outward";
  case PackOrder::Search:
    return "search";
  }
  return "unknown";
}

int64_t lethe::alignBytes(int64_t bytes, int64_t alignment) {
  if (alignment <= 1)
    return bytes;
  return (bytes + alignment - 1) / alignment * alignment;
}

/// The (aligned) bytes live at each position where a buffer begins or
/// ends, after all of that position's frees and allocations, ascending.
static std::vector<std::pair<int64_t, int64_t>>
liveProfile(llvm::ArrayRef<PackInterval> intervals, int64_t alignment) {
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
  std::vector<std::pair<int64_t, int64_t>> profile;
  int64_t live = 0;
  for (auto [position, delta] : events) {
    live += delta;
    if (!profile.empty() && profile.back().first == position)
      profile.back().second = live;
    else
      profile.push_back({position, live});
  }
  return profile;
}

int64_t lethe::computeMaxLive(llvm::ArrayRef<PackInterval> intervals,
                              int64_t alignment) {
  int64_t peak = 0;
  for (auto [position, live] : liveProfile(intervals, alignment))
    peak = std::max(peak, live);
  return peak;
}

std::vector<int> lethe::orderFor(llvm::ArrayRef<PackInterval> intervals,
                                 PackOrder order) {
  using Key = std::tuple<double, int64_t, int64_t>;
  auto keyOf = [&](const PackInterval &in) -> Key {
    int64_t length = in.end - in.begin;
    switch (order) {
    case PackOrder::BySize:
      return {-static_cast<double>(in.bytes), -length, in.begin};
    case PackOrder::ByLifetime:
      return {-static_cast<double>(length), -in.bytes, in.begin};
    case PackOrder::ByArea:
      return {-static_cast<double>(in.bytes) * static_cast<double>(length),
              -in.bytes, in.begin};
    case PackOrder::ByBegin:
    case PackOrder::Perturbed:
    case PackOrder::Skyline:
    case PackOrder::PeakOutward:
    case PackOrder::Search:
      return {static_cast<double>(in.begin), -length, -in.bytes};
    }
    return {0.0, 0, 0};
  };
  // Each key made once, not at every comparison (~8% of packing a training
  // step's 86,000 buffers by size).
  std::vector<Key> keys;
  keys.reserve(intervals.size());
  for (const PackInterval &in : intervals)
    keys.push_back(keyOf(in));
  std::vector<int> indices(intervals.size());
  std::iota(indices.begin(), indices.end(), 0);
  std::stable_sort(indices.begin(), indices.end(),
                   [&](int a, int b) { return keys[a] < keys[b]; });
  return indices;
}

/// The buffers live where the arena is fullest first, then outwards in
/// time: by bytes / (1 + d)^exponent, d the positions between the buffer's
/// lifetime and the nearest position where at least `fraction` of max-live
/// is live (0 for the buffers live at one).
/// An arena at max-live puts the buffers live at the peak side by side
/// with nothing else between them; the buffers around it must then fit in
/// the columns the big ones leave free while they are not yet (or no
/// longer) live. Placing by size alone puts a large buffer far from the
/// peak before the ones live there and blocks a column; by time alone puts
/// the small ones first and scatters them. The exponent weighs the two.
static std::vector<int> peakOutwardOrder(llvm::ArrayRef<PackInterval> intervals,
                                         int64_t alignment, double exponent,
                                         double fraction) {
  std::vector<std::pair<int64_t, int64_t>> profile =
      liveProfile(intervals, alignment);
  int64_t peak = 0;
  for (auto [position, live] : profile)
    peak = std::max(peak, live);
  std::vector<int64_t> peaks; // ascending
  for (auto [position, live] : profile)
    if (static_cast<double>(live) >= fraction * static_cast<double>(peak))
      peaks.push_back(position);
  std::vector<double> key(intervals.size());
  for (auto [index, in] : llvm::enumerate(intervals)) {
    // The first peak at or after the buffer's begin, and the one before.
    auto next = std::lower_bound(peaks.begin(), peaks.end(), in.begin);
    int64_t distance = std::numeric_limits<int64_t>::max();
    if (next != peaks.end())
      distance = *next < in.end ? 0 : *next - in.end + 1;
    if (next != peaks.begin())
      distance = std::min(distance, in.begin - *std::prev(next));
    key[index] = -static_cast<double>(in.bytes) /
                 std::pow(1.0 + static_cast<double>(distance), exponent);
  }
  std::vector<int> indices(intervals.size());
  std::iota(indices.begin(), indices.end(), 0);
  std::stable_sort(indices.begin(), indices.end(),
                   [&](int a, int b) { return key[a] < key[b]; });
  return indices;
}

/// The exponents of the peak-outward orders the packer tries, most weight
/// on the distance first: at 4 a buffer two positions from the peak goes
/// before one live there only if 81 times larger; at 1, three times (a
/// large buffer a little further out still goes before a small one).
static constexpr double kPeakExponents[] = {4.0, 2.0, 1.0};
/// What counts as the peak for them: the positions at max-live, or those
/// within 5% of it (a step has several near-peaks, the forward's end and
/// each backward layer's, and a gap left at any of them raises the arena).
static constexpr double kPeakFractions[] = {1.0, 0.95};

namespace {
/// An arena range [first, second) taken by placed buffers.
using Run = std::pair<int64_t, int64_t>;
using Runs = std::vector<Run>;

/// Arena ranges as sorted, disjoint runs, touching ones merged: placement
/// needs only the union of the ranges it meets. The runs live in memory of
/// the index's allocator, never freed one by one: an index holds four sets
/// per buffer, most of a run or two, and allocating and freeing each one's
/// was ~10% of placing a training step's 86,000 buffers.
class RunSet {
public:
  void insert(int64_t begin, int64_t end, llvm::BumpPtrAllocator &memory) {
    // The first run ending at or after `begin` is the first it touches.
    Run *first = std::partition_point(
        data, data + size, [&](const Run &run) { return run.second < begin; });
    Run *last = first;
    while (last != data + size && last->first <= end) {
      begin = std::min(begin, last->first);
      end = std::max(end, last->second);
      ++last;
    }
    if (first == last) {
      size_t at = first - data;
      if (size == capacity) {
        // Doubling: what the old block held stays in the allocator, at most
        // as much again as the sets hold.
        capacity = capacity ? 2 * capacity : 1;
        Run *grown = memory.Allocate<Run>(capacity);
        std::copy(data, data + at, grown);
        std::copy(data + at, data + size, grown + at + 1);
        data = grown;
      } else {
        std::copy_backward(data + at, data + size, data + size + 1);
      }
      data[at] = {begin, end};
      ++size;
      return;
    }
    *first = {begin, end};
    if (first + 1 != last) {
      std::copy(last, data + size, first + 1);
      size -= static_cast<uint32_t>(last - first - 1);
    }
  }
  llvm::ArrayRef<Run> get() const { return llvm::ArrayRef<Run>(data, size); }

private:
  Run *data = nullptr;
  uint32_t size = 0, capacity = 0;
};

/// The first run of [run, end) ending after `at`. Galloping: in a union of
/// many sets, one set's long run often covers many of another's.
const Run *skipCovered(const Run *run, const Run *end, int64_t at) {
  const Run *probe = run;
  for (size_t step = 1; probe != end && probe->second <= at; step *= 2) {
    run = probe + 1;
    probe = static_cast<size_t>(end - probe) <= step ? end : probe + step;
  }
  return std::partition_point(run, probe,
                              [&](const Run &r) { return r.second <= at; });
}

/// Appends the union of two sorted lists of disjoint runs to `out`.
void unite(const Run *a, const Run *aEnd, const Run *b, const Run *bEnd,
           Runs &out) {
  while (a != aEnd && b != bEnd) {
    Run run = a->first <= b->first ? *a++ : *b++;
    // Extended over every run of either list that starts inside it.
    while (true) {
      a = skipCovered(a, aEnd, run.second);
      b = skipCovered(b, bEnd, run.second);
      if (a != aEnd && a->first <= run.second)
        run.second = (a++)->second;
      else if (b != bEnd && b->first <= run.second)
        run.second = (b++)->second;
      else
        break;
    }
    out.push_back(run);
  }
  out.insert(out.end(), a, aEnd);
  out.insert(out.end(), b, bEnd);
}

/// The arena ranges of the placed buffers, by lifetime: the union of those
/// that meet a new buffer's lifetime without looking at the others (a scan
/// of every placed buffer for each new one made placement quadratic: 4 s
/// for 86,000 buffers).
///
/// A segment tree over the distinct begins: a lifetime [b, e) is the leaves
/// of the begins in it, and a placed buffer meets it iff the buffer is live
/// at b or begins in it. A placed buffer's range is in `live` at the nodes
/// that partition its leaves (one of them is on the path from b's leaf to
/// the root when it is live at b) and in `begun` at its first leaf and the
/// nodes above it (at the node of b's partition that holds its first leaf
/// when it begins in [b, e)). No buffer is in two of the sets a lifetime
/// looks at but those beginning at b.
class PlacedIndex {
public:
  explicit PlacedIndex(llvm::ArrayRef<PackInterval> intervals) {
    for (const PackInterval &in : intervals)
      if (in.bytes > 0 && in.begin < in.end)
        begins.push_back(in.begin);
    llvm::sort(begins);
    begins.erase(std::unique(begins.begin(), begins.end()), begins.end());
    leaves = llvm::PowerOf2Ceil(std::max<size_t>(begins.size(), 1));
    live.resize(2 * leaves);
    begun.resize(2 * leaves);
  }

  void add(const PackInterval &in, int64_t offset, int64_t end) {
    auto [first, last] = leafRange(in);
    for (size_t node = first + leaves; node; node /= 2)
      begun[node].insert(offset, end, memory);
    for (size_t l = first + leaves, r = last + leaves; l < r; l /= 2, r /= 2) {
      if (l & 1)
        live[l++].insert(offset, end, memory);
      if (r & 1)
        live[--r].insert(offset, end, memory);
    }
  }

  /// Calls `visit(begin, end)` for each run of the union of the ranges of
  /// the placed buffers meeting `in`, by offset, until it returns false.
  template <typename Visit>
  void forEachMeeting(const PackInterval &in, Visit visit) {
    collect(in, taken);
    for (auto [begin, end] : taken)
      if (!visit(begin, end))
        return;
  }

private:
  /// The union of the ranges of the placed buffers meeting `in`, as sorted
  /// disjoint runs (touching ones merged), in `runs`.
  void collect(const PackInterval &in, Runs &runs) {
    spans.clear();
    auto append = [&](const RunSet &set) {
      if (!set.get().empty())
        spans.push_back({set.get().begin(), set.get().end()});
    };
    auto [first, last] = leafRange(in);
    for (size_t node = first + leaves; node; node /= 2)
      append(live[node]);
    for (size_t l = first + leaves, r = last + leaves; l < r; l /= 2, r /= 2) {
      if (l & 1)
        append(begun[l++]);
      if (r & 1)
        append(begun[--r]);
    }
    // United pairwise, as in a merge sort: from the sets into `runs`, then
    // between `runs` and `scratch`, `bounds` marking where each list ends.
    runs.clear();
    bounds.assign(1, 0);
    for (size_t k = 0; k < spans.size(); k += 2) {
      if (k + 1 < spans.size())
        unite(spans[k].first, spans[k].second, spans[k + 1].first,
              spans[k + 1].second, runs);
      else
        runs.insert(runs.end(), spans[k].first, spans[k].second);
      bounds.push_back(runs.size());
    }
    while (bounds.size() > 2) {
      scratch.clear();
      size_t kept = 1;
      const Run *data = runs.data();
      for (size_t k = 0; k + 1 < bounds.size(); k += 2) {
        if (k + 2 < bounds.size())
          unite(data + bounds[k], data + bounds[k + 1], data + bounds[k + 1],
                data + bounds[k + 2], scratch);
        else
          scratch.insert(scratch.end(), data + bounds[k], data + bounds[k + 1]);
        bounds[kept++] = scratch.size();
      }
      bounds.resize(kept);
      std::swap(runs, scratch);
    }
  }

  /// The leaves of the begins in [in.begin, in.end): never none, as
  /// in.begin is one.
  std::pair<size_t, size_t> leafRange(const PackInterval &in) const {
    auto first = llvm::lower_bound(begins, in.begin);
    auto last = std::lower_bound(first, begins.end(), in.end);
    return {first - begins.begin(), last - begins.begin()};
  }

  std::vector<int64_t> begins;
  size_t leaves;
  /// The runs of `live` and `begun`.
  llvm::BumpPtrAllocator memory;
  std::vector<RunSet> live, begun;
  // Working space of collect.
  std::vector<std::pair<const Run *, const Run *>> spans;
  std::vector<size_t> bounds;
  Runs taken, scratch;
};
} // namespace

/// The placed buffers sorted by offset, all scanned for each new one: for
/// small sets, where it is cheaper than keeping the index up.
class PlacedScan {
public:
  void add(const PackInterval &in, int64_t offset, int64_t end) {
    Placed entry{offset, end, in.begin, in.end};
    placed.insert(llvm::upper_bound(placed, entry,
                                    [](const Placed &a, const Placed &b) {
                                      return a.offset < b.offset;
                                    }),
                  entry);
  }

  /// Calls `visit(offset, end)` for each placed buffer meeting `in`, by
  /// offset, until it returns false.
  template <typename Visit>
  void forEachMeeting(const PackInterval &in, Visit visit) const {
    for (const Placed &other : placed)
      if (other.begin < in.end && in.begin < other.finish &&
          !visit(other.offset, other.end))
        return;
  }

private:
  // Lifetimes kept beside offsets: the scan touches nothing else.
  struct Placed {
    int64_t offset, end, begin, finish;
  };
  std::vector<Placed> placed;
};

template <typename Lookup>
static int64_t placeWith(Lookup &placed, llvm::ArrayRef<PackInterval> intervals,
                         llvm::ArrayRef<int> order, int64_t alignment,
                         bool bestFit, std::vector<int64_t> &offsets) {
  offsets.assign(intervals.size(), 0);
  int64_t arena = 0;
  for (int index : order) {
    const PackInterval &in = intervals[index];
    if (in.bytes <= 0 || in.begin >= in.end)
      continue;
    int64_t bytes = alignBytes(in.bytes, alignment);
    // The gaps below and between the taken ranges met, lowest first; else
    // on top of them.
    int64_t top = 0;
    int64_t bestOffset = -1;
    int64_t bestGap = std::numeric_limits<int64_t>::max();
    placed.forEachMeeting(in, [&](int64_t begin, int64_t end) {
      int64_t gap = begin - top;
      if (gap >= bytes && gap < bestGap) {
        bestGap = gap;
        bestOffset = top;
        // No gap fits closer than an exact one, and ties keep the lowest.
        if (!bestFit || gap == bytes)
          return false;
      }
      top = std::max(top, end);
      return true;
    });
    int64_t offset = bestOffset >= 0 ? bestOffset : top;
    offsets[index] = offset;
    placed.add(in, offset, offset + bytes);
    arena = std::max(arena, offset + bytes);
  }
  return arena;
}

/// From this many buffers on, placement uses the index. Below it a scan of
/// every placed buffer costs under ~10 ms a placement and the index's
/// upkeep does not pay: on random sets of 300-3,000 buffers, whose free
/// space is fragmented, the index took 1.4-2.2x the scan's time; on
/// training steps' 8,600 and 86,000 buffers, 0.4x and 0.05x by size.
static constexpr size_t kIndexedFrom = 4096;

int64_t lethe::placeInOrder(llvm::ArrayRef<PackInterval> intervals,
                            llvm::ArrayRef<int> order, int64_t alignment,
                            bool bestFit, std::vector<int64_t> &offsets,
                            PlacedLookup lookup) {
  if (lookup == PlacedLookup::Auto)
    lookup = intervals.size() >= kIndexedFrom ? PlacedLookup::Index
                                              : PlacedLookup::Scan;
  if (lookup == PlacedLookup::Scan) {
    PlacedScan placed;
    return placeWith(placed, intervals, order, alignment, bestFit, offsets);
  }
  PlacedIndex placed(intervals);
  return placeWith(placed, intervals, order, alignment, bestFit, offsets);
}

/// Best-fit on the skyline (Sekiyama et al., "Profile-guided memory
/// optimization for deep neural networks", 2018): the skyline is the top of
/// the placed buffers over time; repeatedly take its lowest segment and put
/// there the unplaced buffer of largest area (bytes x lifetime) whose
/// lifetime lies inside the segment, else raise the segment to its lower
/// neighbour. It fills the space beside a tall buffer with the buffers that
/// live there, where a placement in one fixed order leaves a gap (many
/// equal-sized tensors whose lifetimes interleave). Returns the order of
/// the offsets it chose, which first-fit placement packs into no more, or
/// nothing once `work` steps (segments and candidates looked at) are spent.
static std::optional<std::vector<int>>
skylineOrder(llvm::ArrayRef<PackInterval> intervals, int64_t alignment,
             double work) {
  struct Segment {
    int64_t begin, end, height;
  };
  std::map<int64_t, std::vector<int>> byBegin; // unplaced, by begin
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  size_t left = 0;
  std::vector<int> order;
  for (int i = 0, e = intervals.size(); i < e; ++i) {
    const PackInterval &in = intervals[i];
    if (in.bytes <= 0 || in.begin >= in.end) {
      order.push_back(i);
      continue;
    }
    byBegin[in.begin].push_back(i);
    first = std::min(first, in.begin);
    last = std::max(last, in.end);
    ++left;
  }
  if (!left)
    return order;
  auto area = [&](int i) {
    return static_cast<double>(intervals[i].bytes) *
           static_cast<double>(intervals[i].end - intervals[i].begin);
  };
  std::vector<std::pair<int64_t, int>> chosen; // (offset, index)
  std::vector<Segment> skyline{{first, last, 0}};
  while (left) {
    work -= static_cast<double>(skyline.size());
    if (work < 0)
      return std::nullopt;
    size_t low = 0;
    for (size_t k = 1; k < skyline.size(); ++k)
      if (skyline[k].height < skyline[low].height)
        low = k;
    Segment segment = skyline[low];
    int best = -1;
    auto bestBucket = byBegin.end();
    size_t bestSlot = 0;
    for (auto it = byBegin.lower_bound(segment.begin);
         it != byBegin.end() && it->first < segment.end; ++it) {
      work -= static_cast<double>(it->second.size());
      for (auto [slot, index] : llvm::enumerate(it->second))
        if (intervals[index].end <= segment.end &&
            (best < 0 || area(index) > area(best))) {
          best = index;
          bestBucket = it;
          bestSlot = slot;
        }
    }
    if (best < 0) {
      // Nothing fits: the segment is wasted up to its lower neighbour.
      int64_t raise = std::numeric_limits<int64_t>::max();
      if (low > 0)
        raise = skyline[low - 1].height;
      if (low + 1 < skyline.size())
        raise = std::min(raise, skyline[low + 1].height);
      skyline[low].height = raise;
    } else {
      std::vector<int> &bucket = bestBucket->second;
      bucket.erase(bucket.begin() + bestSlot);
      if (bucket.empty())
        byBegin.erase(bestBucket);
      --left;
      const PackInterval &in = intervals[best];
      chosen.push_back({segment.height, best});
      llvm::SmallVector<Segment, 3> pieces;
      if (segment.begin < in.begin)
        pieces.push_back({segment.begin, in.begin, segment.height});
      pieces.push_back(
          {in.begin, in.end, segment.height + alignBytes(in.bytes, alignment)});
      if (in.end < segment.end)
        pieces.push_back({in.end, segment.end, segment.height});
      skyline.erase(skyline.begin() + low);
      skyline.insert(skyline.begin() + low, pieces.begin(), pieces.end());
    }
    mergeEqualHeights(skyline);
  }
  std::stable_sort(chosen.begin(), chosen.end(),
                   [](auto &a, auto &b) { return a.first < b.first; });
  for (auto [offset, index] : chosen)
    order.push_back(index);
  return order;
}

static void searchBelow(llvm::ArrayRef<PackInterval> intervals,
                        int64_t alignment, PackResult &best);

PackResult lethe::packIntervals(llvm::ArrayRef<PackInterval> intervals,
                                int64_t alignment, PackOrder order) {
  PackResult result;
  result.order = order;
  result.maxLiveBytes = computeMaxLive(intervals, alignment);
  if (order == PackOrder::PeakOutward)
    result.arenaBytes =
        placeInOrder(intervals,
                     peakOutwardOrder(intervals, alignment, kPeakExponents[0],
                                      kPeakFractions[0]),
                     alignment, /*bestFit=*/true, result.offsets);
  else if (order == PackOrder::Skyline || order == PackOrder::Search)
    result.arenaBytes =
        placeInOrder(intervals,
                     *skylineOrder(intervals, alignment,
                                   std::numeric_limits<double>::infinity()),
                     alignment, /*bestFit=*/false, result.offsets);
  else
    result.arenaBytes =
        placeInOrder(intervals, orderFor(intervals, order), alignment,
                     /*bestFit=*/true, result.offsets);
  if (order == PackOrder::Search) {
    result.order = PackOrder::Skyline;
    searchBelow(intervals, alignment, result);
  }
  return result;
}

uint64_t lethe::nextPackingRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The search's share of packing: the buffers it takes on, and its work
/// for one capacity (a step is about a nanosecond: ~0.1 s, about what the
/// orders take on a training step of a thousand buffers).
static constexpr size_t kSearchUpTo = 4096;
static constexpr double kSearchWorkPerCapacity = 1e8;
/// The capacities it tries, as fractions of the gap between max-live and
/// the best order's arena. First a quarter of the gap: where that is not
/// met, a tighter one seldom is, and the search stops at one share of
/// work. Then from max-live up, until one is met: a run succeeds or not by
/// the luck of its random weights, and a capacity a little over max-live
/// is often met where max-live was not (on MobileNet-V3's least plan, one
/// share met max-live, +0.1%, +0.15%, +0.2%, +0.3%, +0.6%, +1%, +2% but
/// not +0.07% or +0.4%), so several near it are tried.
static constexpr double kSearchProbeFraction = 1.0 / 4;
static constexpr double kSearchGapFractions[] = {0.0, 1.0 / 256, 1.0 / 64,
                                                 1.0 / 16};

/// Offsets packing into `capacity` by searchPacking, if it finds them.
static bool searchInto(llvm::ArrayRef<PackInterval> intervals,
                       int64_t alignment, int64_t capacity, PackResult &best) {
  if (capacity >= best.arenaBytes)
    return false;
  std::optional<std::vector<int64_t>> offsets =
      searchPacking(intervals, alignment, capacity, kSearchWorkPerCapacity);
  if (!offsets)
    return false;
  best.offsets = std::move(*offsets);
  best.arenaBytes = 0;
  for (auto [in, offset] : llvm::zip_equal(intervals, best.offsets))
    if (in.bytes > 0 && in.begin < in.end)
      best.arenaBytes =
          std::max(best.arenaBytes, offset + alignBytes(in.bytes, alignment));
  best.order = PackOrder::Search;
  return true;
}

/// Replaces `best` with a searched packing into less where one is found.
static void searchBelow(llvm::ArrayRef<PackInterval> intervals,
                        int64_t alignment, PackResult &best) {
  if (best.arenaBytes <= best.maxLiveBytes || intervals.size() > kSearchUpTo)
    return;
  const int64_t maxLive = best.maxLiveBytes;
  const double gap = static_cast<double>(best.arenaBytes - maxLive);
  if (!searchInto(intervals, alignment,
                  maxLive + static_cast<int64_t>(kSearchProbeFraction * gap),
                  best))
    return;
  for (double fraction : kSearchGapFractions)
    if (searchInto(intervals, alignment,
                   maxLive + static_cast<int64_t>(fraction * gap), best))
      return;
}

/// The best of the orders packIntervals tries.
static PackResult packByOrders(llvm::ArrayRef<PackInterval> intervals,
                               int64_t alignment) {
  PackResult best;
  best.maxLiveBytes = computeMaxLive(intervals, alignment);
  best.arenaBytes = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> offsets;
  // A placement looks at the gaps among the placed buffers each new one
  // meets: about n^2/2 steps at worst, where the free space is fragmented
  // (a training step's 86,000 buffers by lifetime: 2 s), n log n where it is
  // not (the same by size: 0.2 s). Bound the worst case's work, keeping at
  // least the first four placements.
  size_t n = intervals.size();
  double cost = 0.5 * static_cast<double>(n) * static_cast<double>(n);
  int placements =
      static_cast<int>(std::max(4.0, std::min(1e6, 4e8 / std::max(cost, 1.0))));
  auto tryOne = [&](llvm::ArrayRef<int> order, PackOrder kind, bool bestFit) {
    int64_t arena = placeInOrder(intervals, order, alignment, bestFit, offsets);
    if (arena >= best.arenaBytes)
      return false;
    best.arenaBytes = arena;
    best.offsets = offsets;
    best.order = kind;
    return true;
  };
  auto consider = [&](llvm::ArrayRef<int> order, PackOrder kind) {
    for (bool bestFit : {true, false}) {
      if (placements-- <= 0)
        return true;
      tryOne(order, kind, bestFit);
      if (best.arenaBytes == best.maxLiveBytes)
        return true;
    }
    return false;
  };
  auto done = [&] { return best.arenaBytes == best.maxLiveBytes; };
  for (PackOrder order : {PackOrder::BySize, PackOrder::ByLifetime,
                          PackOrder::ByArea, PackOrder::ByBegin})
    if (consider(orderFor(intervals, order), order))
      return best;
  // The skyline's offsets, dropped first-fit in their order (never higher),
  // with a work bound of its own: it takes about one placement's time on a
  // training step (0.1 s on Mamba's 10,000 buffers), but its steps grow
  // with the segments and candidates (90 s on 50,000 random long-lived
  // ones), so it gives up past a second's worth.
  if (std::optional<std::vector<int>> order =
          skylineOrder(intervals, alignment, /*work=*/4e8))
    if (tryOne(*order, PackOrder::Skyline, /*bestFit=*/false) && done())
      return best;
  // Peak-outward orders, under the placements' bound (after the skyline,
  // which has its own, so that no arena that had the skyline loses it).
  for (double exponent : kPeakExponents)
    for (double fraction : kPeakFractions)
      if (consider(peakOutwardOrder(intervals, alignment, exponent, fraction),
                   PackOrder::PeakOutward))
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
      double noise =
          static_cast<double>(nextPackingRandom(state) >> 11) * 0x1.0p-53;
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

PackResult lethe::packIntervals(llvm::ArrayRef<PackInterval> intervals,
                                int64_t alignment) {
  PackResult best = packByOrders(intervals, alignment);
  // Cheap (n log n), and never more than the best so far: so that
  // placeByBeginBestFit's arena bounds this one (the feasibility check of
  // `lethe plan` reads only that bound where it fits the budget).
  if (best.arenaBytes > best.maxLiveBytes) {
    std::vector<int64_t> offsets;
    int64_t arena = placeByBeginBestFit(intervals, alignment, offsets);
    if (arena < best.arenaBytes) {
      best.arenaBytes = arena;
      best.offsets = std::move(offsets);
      best.order = PackOrder::ByBegin;
    }
  }
  searchBelow(intervals, alignment, best);
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

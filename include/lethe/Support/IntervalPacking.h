//===- IntervalPacking.h - Static offsets for buffers with lifetimes -*- C++
//-*-===//
//
// Dynamic storage allocation with known lifetimes: give every buffer an
// offset in one arena so that buffers whose lifetimes intersect do not
// overlap, keeping the arena small. The most bytes live at one time is a
// lower bound on the arena; the problem is NP-hard, so we run greedy
// placements in several orders and keep the best.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SUPPORT_INTERVALPACKING_H
#define LETHE_SUPPORT_INTERVALPACKING_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace lethe {

/// A buffer of `bytes` live over positions [begin, end).
struct PackInterval {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t bytes = 0;
};

/// The order in which the greedy packer places buffers; each is placed in
/// the smallest gap (lowest offset on ties) left by the already placed
/// buffers whose lifetimes it intersects, or on top of them.
enum class PackOrder {
  /// Largest first, then longest-lived (TFLite's greedy by size).
  BySize,
  /// Longest-lived first, then largest.
  ByLifetime,
  /// Largest area (bytes x lifetime) first.
  ByArea,
  /// In allocation order (a stack for nested lifetimes).
  ByBegin,
  /// Size, lifetime or area with seeded random weights (the fallback when
  /// the fixed orders leave a gap to max-live).
  Perturbed,
  /// The offsets of best-fit on the skyline (the lowest free segment
  /// filled by the buffer of largest area living inside it).
  Skyline,
  /// The buffers live at a position of max-live first, then outwards in
  /// time, larger before smaller at a like distance (bytes / (1 + d)^4).
  PeakOutward,
  /// Not an order: the offsets of searchPacking, where no order packs
  /// at max-live.
  Search,
};

llvm::StringRef stringifyPackOrder(PackOrder order);

struct PackResult {
  /// Offset of each interval, a multiple of the alignment.
  std::vector<int64_t> offsets;
  /// Highest end of any placed buffer.
  int64_t arenaBytes = 0;
  /// Most (aligned) bytes live at one position: the lower bound.
  int64_t maxLiveBytes = 0;
  PackOrder order = PackOrder::BySize;
};

/// Sizes round up to `alignment` (a power of two, >= 1).
int64_t alignBytes(int64_t bytes, int64_t alignment);

/// The most (aligned) bytes live at one position.
int64_t computeMaxLive(llvm::ArrayRef<PackInterval> intervals,
                       int64_t alignment);

/// How placement finds the placed buffers that a new one meets in time.
enum class PlacedLookup {
  /// Every placed buffer looked at: quadratic.
  Scan,
  /// An index of the placed buffers by lifetime, so that only the free
  /// gaps among those meeting it are: n log n where the arena's free space
  /// is in few pieces, at worst quadratic.
  Index,
  /// The scan for small sets, the index from 4,096 buffers on.
  Auto,
};

/// Greedy placement of the buffers in `order` (indices into `intervals`):
/// each goes in the smallest gap (lowest on ties; with `bestFit` false,
/// the lowest gap) that fits among the buffers placed before it that it
/// meets in time, else on top of them. Sets `offsets` (0 for empty
/// buffers) and returns the arena; every lookup gives the same offsets.
int64_t placeInOrder(llvm::ArrayRef<PackInterval> intervals,
                     llvm::ArrayRef<int> order, int64_t alignment, bool bestFit,
                     std::vector<int64_t> &offsets,
                     PlacedLookup lookup = PlacedLookup::Auto);

/// The order of `intervals` that `order` places them in (indices; ties keep
/// the index order). For the fixed orders only (BySize to ByBegin).
std::vector<int> orderFor(llvm::ArrayRef<PackInterval> intervals,
                          PackOrder order);

/// placeInOrder(intervals, orderFor(intervals, ByBegin), alignment,
/// /*bestFit=*/true, offsets) as a sweep over time: in allocation order the
/// placed buffers a new one meets are those live at its begin, so a set of
/// their free gaps by size finds the best fit in O(log n), where
/// placeInOrder reads the union of every placed set it meets (O(n) a
/// placement on a training step). The same offsets and arena, which
/// packIntervals' never exceeds.
int64_t placeByBeginBestFit(llvm::ArrayRef<PackInterval> intervals,
                            int64_t alignment, std::vector<int64_t> &offsets);

/// Packs in one order (best-fit; the skyline's order first-fit;
/// peak-outward with exponent 4; Search: the skyline's, then the search as
/// below).
PackResult packIntervals(llvm::ArrayRef<PackInterval> intervals,
                         int64_t alignment, PackOrder order);

/// Packs in every fixed order, best-fit and first-fit, then by best-fit on
/// the skyline, then in six peak-outward orders (exponents 4, 2, 1; peaks
/// at max-live or within 5% of it) and
/// up to 48 perturbed orders (a fixed seed), until the
/// arena meets max-live or a work bound is spent (placements cost up to
/// n^2/2 steps each: all of them up to ~2,000 buffers, the eight fixed ones
/// at 10,000, four at 20,000; the skyline has a bound of its own and is
/// skipped past it); then, where the arena is still over max-live, up to
/// 4,096 buffers, searchPacking (a work bound of its own per capacity: a
/// quarter of the gap to max-live first, and where that is met, max-live
/// and up, until one is); returns the smallest arena (ties: the first
/// found). Before the search, where the orders leave the arena over
/// max-live, placeByBeginBestFit's offsets where they pack into less (the
/// placements' bound skips allocation order over ~10,000 buffers): so the
/// arena is never more than placeByBeginBestFit's. Deterministic.
PackResult packIntervals(llvm::ArrayRef<PackInterval> intervals,
                         int64_t alignment);

/// Offsets that pack the buffers into `capacity` bytes, found by a search
/// over skyline placements with backtracking and restarts
/// (lib/Support/PackingSearch.cpp), or nothing when it proves there are
/// none or spends `work` (about one step per segment, candidate or
/// position looked at) first. Deterministic.
std::optional<std::vector<int64_t>>
searchPacking(llvm::ArrayRef<PackInterval> intervals, int64_t alignment,
              int64_t capacity, double work);

/// splitmix64: a fixed, portable PRNG, so packing is the same everywhere.
uint64_t nextPackingRandom(uint64_t &state);

/// Joins neighbouring segments of equal height in a skyline (segments with
/// `end` and `height`, in position order), as both skyline packers keep it.
template <typename Segment>
void mergeEqualHeights(std::vector<Segment> &skyline) {
  if (skyline.empty())
    return;
  size_t kept = 0;
  for (size_t k = 1; k < skyline.size(); ++k) {
    if (skyline[k].height == skyline[kept].height)
      skyline[kept].end = skyline[k].end;
    else
      skyline[++kept] = skyline[k];
  }
  skyline.resize(kept + 1);
}

/// Whether two intervals whose lifetimes intersect overlap in the arena
/// (for tests and checks); returns the first such pair's indices or
/// {-1, -1}.
std::pair<int, int> findOverlap(llvm::ArrayRef<PackInterval> intervals,
                                llvm::ArrayRef<int64_t> offsets,
                                int64_t alignment);

} // namespace lethe

#endif // LETHE_SUPPORT_INTERVALPACKING_H

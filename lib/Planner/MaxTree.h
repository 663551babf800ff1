//===- MaxTree.h - Range add, range max (the auto solver's) -----*- C++ -*-===//
//
// Private to lib/Planner: the memory of a schedule's ops, as the greedy of
// `auto` lowers it pick by pick (AutoSolver.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_MAXTREE_H
#define LETHE_LIB_PLANNER_MAXTREE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace lethe::autosolver {

/// Range add, range max with the leftmost argmax. Bottom-up over a power of
/// two of leaves (padding at the minimum): a node holds the max of its
/// children plus its own pending add. The recursive tree it replaces (4n
/// nodes, built and walked by recursion) was ~6% of a 10k-op solve; any
/// such tree answers the same, the max being exact and the argmax the
/// leftmost position that reaches it.
class MaxTree {
public:
  void build(llvm::ArrayRef<int64_t> values) {
    size = std::max<size_t>(1, values.size());
    leaves = llvm::PowerOf2Ceil(size);
    maxv.resize(2 * leaves);
    // Pending adds of the inner nodes only: a leaf's are in its value.
    lazy.assign(leaves, 0);
    arg.resize(2 * leaves);
    for (size_t i = 0; i < leaves; ++i) {
      maxv[leaves + i] =
          i < values.size() ? values[i] : std::numeric_limits<int64_t>::min();
      arg[leaves + i] = static_cast<uint32_t>(i);
    }
    // Level by level, bottom up. A node over padding alone is what pulling
    // it gives (the minimum, its left child's argmax) without the compare:
    // the padding is up to half the leaves (9,528 ops take 16,384).
    for (size_t first = leaves / 2, span = 2; first >= 1;
         first /= 2, span *= 2) {
      const size_t used = (size + span - 1) / span;
      for (size_t node = first + used; node < 2 * first; ++node) {
        maxv[node] = std::numeric_limits<int64_t>::min();
        arg[node] = arg[2 * node];
      }
      for (size_t node = first; node < first + used; ++node)
        pull(node);
    }
  }
  void add(size_t lo, size_t hi, int64_t delta) {
    if (lo > hi || hi >= size)
      return;
    size_t l = lo + leaves, r = hi + leaves + 1;
    for (size_t a = l, b = r; a < b; a >>= 1, b >>= 1) {
      if (a & 1)
        apply(a++, delta);
      if (b & 1)
        apply(--b, delta);
    }
    for (size_t node = l >> 1; node > 0; node >>= 1)
      pull(node);
    for (size_t node = (r - 1) >> 1; node > 0; node >>= 1)
      pull(node);
  }
  int64_t max() const { return maxv[1]; }
  size_t argmax() const { return arg[1]; }
  int64_t maxIn(size_t lo, size_t hi) {
    if (lo > hi || hi >= size)
      return std::numeric_limits<int64_t>::min();
    if (lo == hi) {
      // One position: its leaf and the adds pending above it.
      size_t node = lo + leaves;
      int64_t value = maxv[node];
      for (node >>= 1; node > 0; node >>= 1)
        value += lazy[node];
      return value;
    }
    // The adds pending above the two ends pushed down first, so that the
    // nodes the walk reads hold their whole values.
    size_t l = lo + leaves, r = hi + leaves + 1;
    pushAbove(l);
    pushAbove(r - 1);
    int64_t best = std::numeric_limits<int64_t>::min();
    for (; l < r; l >>= 1, r >>= 1) {
      if (l & 1)
        best = std::max(best, maxv[l++]);
      if (r & 1)
        best = std::max(best, maxv[--r]);
    }
    return best;
  }

private:
  void apply(size_t node, int64_t delta) {
    maxv[node] += delta;
    if (node < leaves)
      lazy[node] += delta;
  }
  void pull(size_t node) {
    size_t l = 2 * node, r = 2 * node + 1;
    if (maxv[l] >= maxv[r]) {
      maxv[node] = maxv[l];
      arg[node] = arg[l];
    } else {
      maxv[node] = maxv[r];
      arg[node] = arg[r];
    }
    maxv[node] += lazy[node];
  }
  /// Moves the pending adds of the ancestors of `leaf` into their children,
  /// root first (a node's max is unchanged by it).
  void pushAbove(size_t leaf) {
    for (unsigned shift = llvm::Log2_64(leaves); shift > 0; --shift) {
      size_t node = leaf >> shift;
      if (int64_t delta = lazy[node]) {
        apply(2 * node, delta);
        apply(2 * node + 1, delta);
        lazy[node] = 0;
      }
    }
  }

  size_t size = 1, leaves = 1;
  std::vector<int64_t> maxv, lazy;
  std::vector<uint32_t> arg;
};

} // namespace lethe::autosolver

#endif // LETHE_LIB_PLANNER_MAXTREE_H

//===- MaxTreeTest.cpp ----------------------------------------------------===//
//
// The auto solver's range-add / range-max tree against a plain array: the
// same max, leftmost argmax and range maxima after any sequence of adds.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Planner/MaxTree.h"

#include <gtest/gtest.h>

#include <random>

using namespace lethe::autosolver;

namespace {

TEST(MaxTreeTest, AnswersAsAnArray) {
  std::mt19937_64 rng(7);
  // Sizes at and around powers of two (the tree pads to one), and empty.
  for (size_t n : {0, 1, 2, 3, 5, 8, 9, 31, 64, 100, 257}) {
    SCOPED_TRACE(n);
    std::vector<int64_t> values(n);
    // Few distinct values, so that ties (the leftmost argmax) are common.
    for (int64_t &v : values)
      v = static_cast<int64_t>(rng() % 5) - 2;
    MaxTree tree;
    tree.build(values);
    for (int step = 0; step < 400; ++step) {
      if (n == 0) {
        EXPECT_EQ(tree.max(), std::numeric_limits<int64_t>::min());
        break;
      }
      size_t lo = rng() % n, hi = rng() % n;
      if (rng() % 3 == 0) {
        // An empty range or one past the end changes nothing.
        int64_t delta = static_cast<int64_t>(rng() % 7) - 3;
        tree.add(lo, hi, delta);
        if (lo <= hi)
          for (size_t i = lo; i <= hi; ++i)
            values[i] += delta;
        tree.add(lo, n, 1000);
      } else {
        int64_t expected = std::numeric_limits<int64_t>::min();
        for (size_t i = lo; i <= hi && lo <= hi; ++i)
          expected = std::max(expected, values[i]);
        EXPECT_EQ(tree.maxIn(lo, hi), expected) << lo << ".." << hi;
        EXPECT_EQ(tree.maxIn(lo, lo), values[lo]);
      }
      auto top = std::max_element(values.begin(), values.end());
      ASSERT_EQ(tree.max(), *top);
      ASSERT_EQ(tree.argmax(), static_cast<size_t>(top - values.begin()));
    }
  }
}

} // namespace

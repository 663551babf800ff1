//===- PrefetchPlacement.h - Hide prefetches, briefly -----------*- C++ -*-===//
//
// Moves every `lethe.prefetch` of a function to the latest point in issue
// order at which, by the predicted compute timeline, its copy still ends
// before its first reader starts: hidden, yet holding its device buffer as
// briefly as it can. Used by lethe-schedule{place-prefetches=true}.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_DIALECT_LETHE_TRANSFORMS_PREFETCHPLACEMENT_H
#define LETHE_LIB_DIALECT_LETHE_TRANSFORMS_PREFETCHPLACEMENT_H

#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <optional>

namespace lethe {

struct PrefetchPlacementStats {
  unsigned moved = 0;
  unsigned earlier = 0;
  /// Prefetches kept later than hidden because the budget would be crossed.
  unsigned limitedByBudget = 0;
};

/// Places the prefetches of `func` (a materialized program, before stream
/// synchronisation is added): copies queue FIFO on the H2D stream, each
/// taking lethe::plannedCopyCosts' H2D time; walking deadlines backwards, each
/// copy ends before its first reader and before the next copy starts, and is
/// issued after the last compute op predicted to end by its start, but never
/// before the release of the device buffer it restores, nor where the bytes
/// live would exceed `budgetBytes`. A prefetch's own `await` is dropped
/// (lethe-schedule adds the waits the new position needs).
PrefetchPlacementStats placePrefetches(mlir::func::FuncOp func,
                                       const DeviceProfile &device,
                                       std::optional<int64_t> budgetBytes);

} // namespace lethe

#endif // LETHE_LIB_DIALECT_LETHE_TRANSFORMS_PREFETCHPLACEMENT_H

//===- PrefetchPlacement.cpp - Hide prefetches, briefly -------------------===//
//
// Works on the function's top-level ops without the prefetches ("slots"):
// a prefetch is issued just before slot k. The predicted compute timeline
// gives each slot a start time; live bytes per slot come from the program's
// buffers.
//
//===----------------------------------------------------------------------===//

#include "PrefetchPlacement.h"

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Simulator/Simulator.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace lethe;

static double computeTimeOf(Operation *op) {
  double total = 0.0;
  op->walk([&](Operation *inner) {
    if (getOpStream(inner) != Stream::Compute)
      return;
    if (auto time = inner->getAttrOfType<FloatAttr>("time_us"))
      total += std::max(0.0, time.getValueAsDouble());
  });
  return total;
}

namespace {
struct Candidate {
  PrefetchOp op;
  /// Slot of the first reader: the prefetch must be issued before it.
  size_t reader = 0;
  /// Earliest slot: after the release of the buffer it restores.
  size_t lower = 0;
  /// Slot it is issued before now.
  size_t current = 0;
  double deadlineUs = 0.0;
  double copyUs = 0.0;
  int64_t bytes = 0;
  size_t target = 0;
};
} // namespace

PrefetchPlacementStats
lethe::placePrefetches(func::FuncOp func, const DeviceProfile &device,
                       std::optional<int64_t> budgetBytes) {
  PrefetchPlacementStats stats;
  // Copies take what the planner placed them by (and the simulator
  // charges): the rank's share of the host link, the fixed cost.
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  if (!copy.canCopy())
    return stats;
  // The waits of the prefetches are re-made for their new places by
  // lethe-schedule; those made for a prefetch alone go with it.
  func.walk([](PrefetchOp prefetch) {
    Value await = prefetch.getAwaitTimepoint();
    if (!await)
      return;
    prefetch.getAwaitTimepointMutable().clear();
    for (Operation *def = await.getDefiningOp();
         def && isa<JoinOp, BarrierOp>(def) && def->use_empty();) {
      Operation *next = nullptr;
      if (auto join = dyn_cast<JoinOp>(def))
        for (Value input : join.getTimepoints())
          if (input.hasOneUse() && input.getDefiningOp<BarrierOp>())
            next = input.getDefiningOp();
      def->erase();
      def = next && next->use_empty() ? next : nullptr;
    }
  });
  FailureOr<ExplicitProgram> program = ExplicitProgram::build(func);
  if (failed(program))
    return stats;

  // Slots: top-level ops other than prefetches, with predicted start times
  // and the most bytes live while each runs.
  Block &block = func.getBody().front();
  std::vector<Operation *> slots;
  DenseMap<Operation *, size_t> slotOf;
  for (Operation &op : block)
    if (!isa<PrefetchOp>(op)) {
      slotOf[&op] = slots.size();
      slots.push_back(&op);
    }
  if (slots.empty())
    return stats;
  std::vector<double> startUs(slots.size() + 1, 0.0);
  for (size_t k = 0; k < slots.size(); ++k)
    startUs[k + 1] = startUs[k] + computeTimeOf(slots[k]);
  // A buffer allocated just before a position meets every buffer live
  // there and every buffer released by it: count both.
  std::vector<int64_t> positionLive = program->liveBytes(/*host=*/false);
  {
    std::vector<int64_t> delta(positionLive.size() + 2, 0);
    for (const ProgramBuffer &buffer : program->getBuffers())
      if (!buffer.host && buffer.release) {
        delta[buffer.endPos] += buffer.bytes;
        delta[buffer.endPos + 1] -= buffer.bytes;
      }
    int64_t releasedHere = 0;
    for (size_t pos = 0; pos < positionLive.size(); ++pos) {
      releasedHere += delta[pos];
      positionLive[pos] += releasedHere;
    }
  }
  std::vector<int64_t> live(slots.size(), 0);
  for (size_t k = 0; k < slots.size(); ++k) {
    unsigned first = program->getPosition(slots[k]);
    unsigned last = k + 1 < slots.size()
                        ? program->getPosition(slots[k + 1])
                        : static_cast<unsigned>(positionLive.size());
    for (unsigned pos = first; pos < last; ++pos)
      live[k] = std::max(live[k], positionLive[pos]);
  }
  // The slot an op belongs to: the top-level op holding it, or for a
  // prefetch the next op that is not one.
  auto slotOfUser = [&](Operation *op) -> size_t {
    while (op->getBlock() != &block)
      op = op->getParentOp();
    while (op && isa<PrefetchOp>(op))
      op = op->getNextNode();
    return op ? slotOf.lookup(op) : slots.size() - 1;
  };

  std::vector<Candidate> candidates;
  for (Operation &op : block) {
    auto prefetch = dyn_cast<PrefetchOp>(op);
    if (!prefetch || prefetch.getResult().use_empty())
      continue;
    Candidate c;
    c.op = prefetch;
    c.current = slotOfUser(prefetch);
    c.reader = slots.size();
    for (Operation *user : prefetch.getResult().getUsers())
      c.reader = std::min(c.reader, slotOfUser(user));
    c.bytes = getTypeBytes(prefetch.getResult().getType());
    c.copyUs = copy.h2dUs(c.bytes);
    c.deadlineUs = startUs[c.reader];
    // Not before the device buffer it restores is released (or, if it is
    // not, before its host copy is issued).
    if (auto offload = prefetch.getSource().getDefiningOp<OffloadOp>()) {
      c.lower = slotOfUser(offload) + 1;
      int32_t buffer = program->getBufferIndex(offload.getSource());
      if (buffer >= 0)
        if (Operation *release = program->getBuffers()[buffer].release)
          c.lower = std::max(c.lower, slotOfUser(release) + 1);
    }
    c.reader = std::min(c.reader, slots.size() - 1);
    c.lower = std::min(c.lower, c.reader);
    candidates.push_back(c);
  }

  // Backward over deadlines: each copy ends by its deadline and before the
  // next copy in the H2D queue starts.
  std::vector<size_t> byDeadline(candidates.size());
  for (size_t i = 0; i < byDeadline.size(); ++i)
    byDeadline[i] = i;
  std::stable_sort(byDeadline.begin(), byDeadline.end(),
                   [&](size_t a, size_t b) {
                     return candidates[a].deadlineUs < candidates[b].deadlineUs;
                   });
  double nextStart = std::numeric_limits<double>::infinity();
  for (size_t i : llvm::reverse(byDeadline)) {
    Candidate &c = candidates[i];
    double copyStart = std::min(c.deadlineUs, nextStart) - c.copyUs;
    nextStart = copyStart;
    // The latest slot starting by then (start times never decrease).
    size_t k = c.lower;
    for (size_t hi = c.reader; hi > c.lower; --hi)
      if (startUs[hi] <= copyStart + 1e-9) {
        k = hi;
        break;
      }
    if (budgetBytes && k < c.current) {
      // Earlier holds the buffer longer: only as far as the budget allows.
      size_t fits = c.current;
      while (fits > k && live[fits - 1] + c.bytes <= *budgetBytes)
        --fits;
      if (fits > k)
        ++stats.limitedByBudget;
      k = fits;
    }
    c.target = k;
    if (k < c.current)
      for (size_t s = k; s < c.current; ++s)
        live[s] += c.bytes;
    else
      for (size_t s = c.current; s < k; ++s)
        live[s] -= c.bytes;
  }

  // Move, earliest deadline first, so prefetches sharing a slot keep the
  // queue's order.
  for (size_t i : byDeadline) {
    Candidate &c = candidates[i];
    if (c.target == c.current)
      continue;
    c.op->moveBefore(slots[c.target]);
    ++stats.moved;
    if (c.target < c.current)
      ++stats.earlier;
  }
  return stats;
}

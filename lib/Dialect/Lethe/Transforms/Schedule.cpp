//===- Schedule.cpp - Streams and explicit cross-stream dependences -------===//
//
// One sweep in issue order with StreamOrder: before each op, every
// dependence on another stream that the clocks do not cover gets a
// timepoint (the other op's own, or a barrier inserted just before this
// op) that this op awaits.
//
//===----------------------------------------------------------------------===//

#include "PrefetchPlacement.h"
#include "lethe/Analysis/Program.h"
#include "lethe/Analysis/StreamOrder.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/MapVector.h"

namespace lethe {
#define GEN_PASS_DEF_SCHEDULEPROGRAM
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

struct Counters {
  unsigned barriers = 0, awaits = 0, contention = 0;
};

class ProgramScheduler {
public:
  ProgramScheduler(const ExplicitProgram &program, bool contended,
                   Counters &counters)
      : order(program), contended(contended), counters(counters) {}

  void run(ArrayRef<Operation *> ops) {
    for (Operation *op : ops)
      schedule(op);
  }

private:
  void schedule(Operation *op);
  /// A timepoint visible at `op` covering the first `count` ops of
  /// `stream`: the last one issued on it, or a new barrier before `op`.
  Value coveringTimepoint(Operation *op, unsigned stream, int32_t count);
  void setStream(Operation *op, unsigned stream) {
    op->setAttr(attrs::kStream,
                StreamAttr::get(op->getContext(), static_cast<Stream>(stream)));
  }

  StreamOrder order;
  bool contended;
  Counters &counters;
};

} // namespace

Value ProgramScheduler::coveringTimepoint(Operation *op, unsigned stream,
                                          int32_t count) {
  auto [covered, timepoint] = order.getLastTimepoint(stream);
  if (timepoint && covered >= count &&
      timepoint.getParentRegion()->isAncestor(op->getParentRegion()))
    return timepoint;
  OpBuilder builder(op);
  auto barrier = BarrierOp::create(builder, op->getLoc());
  setStream(barrier, stream);
  order.issue(barrier, stream);
  ++counters.barriers;
  return barrier.getResult();
}

void ProgramScheduler::schedule(Operation *op) {
  unsigned stream = static_cast<unsigned>(getOpStream(op));
  if (isa<JoinOp>(op)) {
    order.issue(op, stream);
    return;
  }
  if (op->getDialect() && isa<LetheDialect>(op->getDialect()) &&
      !isa<YieldOp>(op))
    setStream(op, stream);

  SmallVector<StreamNeed> needs;
  order.getNeeds(op, stream, contended, needs);
  // The ops of each other stream that must be done: a prefix of it.
  llvm::SmallMapVector<unsigned, int32_t, 4> prefix;
  for (const StreamNeed &need : needs) {
    int32_t &count = prefix[need.stream];
    count = std::max(count, need.index + 1);
    if (need.kind == StreamNeed::Contention)
      ++counters.contention;
  }
  if (prefix.empty()) {
    order.issue(op, stream);
    return;
  }

  SmallVector<Value> timepoints;
  for (auto [other, count] : prefix)
    timepoints.push_back(coveringTimepoint(op, other, count));
  counters.awaits += timepoints.size();

  OpBuilder builder(op);
  auto joined = [&](Value existing) -> Value {
    SmallVector<Value> all;
    if (existing)
      all.push_back(existing);
    all.append(timepoints);
    if (all.size() == 1)
      return all.front();
    auto join = JoinOp::create(builder, op->getLoc(), all);
    order.issue(join, stream);
    return join.getResult();
  };
  if (auto offload = dyn_cast<OffloadOp>(op)) {
    offload.getAwaitTimepointMutable().assign(
        joined(offload.getAwaitTimepoint()));
  } else if (auto prefetch = dyn_cast<PrefetchOp>(op)) {
    prefetch.getAwaitTimepointMutable().assign(
        joined(prefetch.getAwaitTimepoint()));
  } else if (auto release = dyn_cast<ReleaseOp>(op)) {
    release.getAwaitTimepointMutable().assign(
        joined(release.getAwaitTimepoint()));
  } else if (auto timeline = dyn_cast<TestTimelineOp>(op)) {
    timeline.getAwaitsMutable().append(timepoints);
  } else {
    auto await = AwaitOp::create(builder, op->getLoc(), TypeRange{}, timepoints,
                                 ValueRange{});
    setStream(await, stream);
    order.issue(await, stream);
  }
  order.issue(op, stream);
}

namespace {
struct ScheduleProgramPass
    : public lethe::impl::ScheduleProgramBase<ScheduleProgramPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::Expected<DeviceProfile> profile = DeviceProfile::load(device);
    if (!profile) {
      module.emitError("lethe-schedule: ") << toString(profile.takeError());
      return signalPassFailure();
    }
    bool contended;
    StringRef mode = contention;
    if (mode == "on") {
      contended = true;
    } else if (mode == "off") {
      contended = false;
    } else if (mode == "auto") {
      contended =
          profile->collectiveSlowdownWithCopies > contentionThreshold ||
          profile->collectiveSlowdownWithBothCopies > contentionThreshold ||
          profile->copySlowdownWithCollectives * contentionThreshold < 1.0;
    } else {
      module.emitError("lethe-schedule: contention must be auto, on or off, "
                       "got '")
          << contention << "'";
      return signalPassFailure();
    }

    Counters counters;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (placePrefetches) {
        std::optional<int64_t> budget;
        if (auto attr = module->getAttrOfType<IntegerAttr>(attrs::kBudgetBytes))
          budget = attr.getInt();
        PrefetchPlacementStats placed =
            lethe::placePrefetches(func, *profile, budget);
        numPrefetchesMoved += placed.moved;
      }
      FailureOr<ExplicitProgram> program = ExplicitProgram::build(func);
      if (failed(program))
        return signalPassFailure();
      ProgramScheduler(*program, contended, counters).run(program->getOps());
    }
    numBarriers += counters.barriers;
    numAwaits += counters.awaits;
    numContentionWaits += counters.contention;
  }
};
} // namespace

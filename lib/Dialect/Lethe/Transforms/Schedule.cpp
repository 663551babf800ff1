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
#include "lethe/Simulator/ProgramSchedule.h"
#include "lethe/Simulator/Simulator.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Remarks.h"
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
  /// `writeStreams`: write each op's own stream too (the pass option).
  ProgramScheduler(const ExplicitProgram &program, bool contended,
                   bool writeStreams, Counters &counters)
      : order(program), contended(contended), writeStreams(writeStreams),
        counters(counters) {}

  void run(ArrayRef<Operation *> ops) {
    for (Operation *op : ops)
      schedule(op);
  }

private:
  void schedule(Operation *op);
  /// A timepoint visible at `op` covering the first `count` ops of
  /// `stream`: the last one issued on it, or a new barrier before `op`.
  Value coveringTimepoint(Operation *op, unsigned stream, int32_t count);
  /// The helper and the attributes made once, not per op (each is a
  /// lookup in the context's uniquer).
  void setStream(Operation *op, unsigned stream) {
    if (!streamAttr)
      streamAttr.emplace(op->getContext());
    if (stream >= streams.size())
      streams.resize(stream + 1);
    if (!streams[stream])
      streams[stream] =
          StreamAttr::get(op->getContext(), static_cast<Stream>(stream));
    streamAttr->setAttr(op, streams[stream]);
  }

  StreamOrder order;
  bool contended;
  bool writeStreams;
  Counters &counters;
  std::optional<LetheDialect::StreamAttrHelper> streamAttr;
  SmallVector<StreamAttr, 4> streams;
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
  // getOpStream reads back `stream` with or without the attribute: a new
  // dictionary per op (~2.5% of a `lethe plan` at 100k ops) that only the
  // program's readers (lowering, printing) need.
  if (writeStreams && op->getDialect() && isa<LetheDialect>(op->getDialect()) &&
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

using Contention = CopyContention;

/// Whether `func` has host copies and collectives (else contention is moot)
/// and whether every node and collective has a time (else it cannot be
/// simulated).
struct ProgramTraits {
  bool copies = false, collectives = false, timed = true;
};

ProgramTraits getTraits(func::FuncOp func) {
  ProgramTraits traits;
  func.walk([&](Operation *op) {
    if (isa<OffloadOp, PrefetchOp>(op))
      traits.copies = true;
    if (isa<CollectiveOp>(op))
      traits.collectives = true;
    if (isa<NodeOp, CollectiveOp>(op) && !op->hasAttr("time_us"))
      traits.timed = false;
  });
  return traits;
}

struct ScheduleProgramPass
    : public lethe::impl::ScheduleProgramBase<ScheduleProgramPass> {
  using Base::Base;

  /// contention=auto on a profile where copies and collectives contend:
  /// simulates `func`, already scheduled without separation, three ways and
  /// returns the fastest variant whose collectives stay within the
  /// tolerance of their time without copies.
  FailureOr<Contention> chooseBySimulation(func::FuncOp func,
                                           const DeviceProfile &profile,
                                           int64_t &chunkBytes);

  /// The contention choice's remark (--remarks-filter=lethe-schedule).
  remark::RemarkOpts remarkOpts(func::FuncOp func) const {
    return remark::RemarkOpts::name("contention")
        .category(getArgument())
        .function(func.getSymName());
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::Expected<DeviceProfile> profile = DeviceProfile::load(device);
    if (!profile) {
      module.emitError("lethe-schedule: ") << toString(profile.takeError());
      return signalPassFailure();
    }
    StringRef mode = contention;
    std::optional<Contention> fixed;
    if (mode == "on")
      fixed = Contention::Separate;
    else if (mode == "off")
      fixed = Contention::Overlap;
    else if (mode == "yield")
      fixed = Contention::Yield;
    else if (mode != "auto") {
      module.emitError("lethe-schedule: contention must be auto, on, off or "
                       "yield, got '")
          << contention << "'";
      return signalPassFailure();
    }
    if (copyChunkBytes < 65536) {
      module.emitError("lethe-schedule: copy-chunk-bytes must be at least "
                       "65536, got ")
          << static_cast<int64_t>(copyChunkBytes);
      return signalPassFailure();
    }
    bool profileContends =
        copiesContendWithCollectives(*profile, contentionThreshold);

    Counters counters;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (placePrefetches) {
        std::optional<int64_t> budget;
        if (auto attr =
                LetheDialect::BudgetBytesAttrHelper(module->getContext())
                    .getAttr(module))
          budget = attr.getInt();
        PrefetchPlacementStats placed = lethe::placePrefetches(
            func, deviceForFunction(*profile, func), budget);
        numPrefetchesMoved += placed.moved;
      }
      ProgramTraits traits = getTraits(func);
      bool moot = !traits.copies || !traits.collectives;
      Contention chosen = fixed.value_or(
          profileContends ? Contention::Separate : Contention::Overlap);
      // Simulated also where the profile does not contend: yielding copies
      // win near-ties there too (chooseCopyContention says why).
      bool simulate = !fixed && !moot;
      int64_t chunkBytes = copyChunkBytes;
      if (simulate && !traits.timed) {
        if (profileContends)
          remark::missed(func.getLoc(), remarkOpts(func))
              << "contention=auto keeps copies and collectives apart "
                 "(separate): the program has ops without time_us, so the "
                 "variants cannot be simulated";
        simulate = false;
      }
      // Schedule without separation first; separation only adds waits.
      FailureOr<ExplicitProgram> program = ExplicitProgram::build(func);
      if (failed(program))
        return signalPassFailure();
      ProgramScheduler(*program, chosen == Contention::Separate && !simulate,
                       writeStreams, counters)
          .run(program->getOps());
      if (simulate) {
        FailureOr<Contention> choice =
            chooseBySimulation(func, deviceForFunction(*profile, func),
                               chunkBytes);
        if (failed(choice))
          return signalPassFailure();
        chosen = *choice;
        if (chosen == Contention::Separate) {
          FailureOr<ExplicitProgram> scheduled = ExplicitProgram::build(func);
          if (failed(scheduled))
            return signalPassFailure();
          ProgramScheduler(*scheduled, /*contended=*/true, writeStreams,
                           counters)
              .run(scheduled->getOps());
        }
      }
      if (moot)
        continue;
      MLIRContext *ctx = func.getContext();
      LetheDialect::ContentionAttrHelper(func->getContext())
          .setAttr(func, CopyContentionAttr::get(ctx, chosen));
      if (chosen == Contention::Yield)
        LetheDialect::CopyChunkBytesAttrHelper(func->getContext())
            .setAttr(func,
                     IntegerAttr::get(IntegerType::get(ctx, 64), chunkBytes));
      else
        func->removeAttr(LetheDialect::CopyChunkBytesAttrHelper::getNameStr());
    }
    numBarriers += counters.barriers;
    numAwaits += counters.awaits;
    numContentionWaits += counters.contention;
  }
};

FailureOr<Contention>
ScheduleProgramPass::chooseBySimulation(func::FuncOp func,
                                        const DeviceProfile &profile,
                                        int64_t &chunkBytes) {
  FailureOr<ProgramSchedule> built = buildProgramSchedule(func);
  if (failed(built))
    return failure();
  llvm::Expected<CopyContentionChoice> choice =
      chooseCopyContention(built->schedule, profile, collectiveTolerance,
                           copyChunkBytes);
  if (!choice) {
    func.emitError("lethe-schedule: contention=auto cannot simulate the "
                   "program: ")
        << toString(choice.takeError());
    return failure();
  }
  if (remark::detail::InFlightRemark report =
          remark::passed(func.getLoc(), remarkOpts(func)))
    report << "contention=auto " +
                  choice->describe(profile.name, collectiveTolerance);
  chunkBytes = choice->yieldChunkBytes;
  return choice->chosen;
}

} // namespace

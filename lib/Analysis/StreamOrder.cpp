//===- StreamOrder.cpp - Happens-before across streams --------------------===//

#include "lethe/Analysis/StreamOrder.h"

#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"

using namespace mlir;
using namespace lethe;

static void raise(StreamClock &clock, const StreamClock &other) {
  for (unsigned s = 0; s < kNumProgramStreams; ++s)
    clock[s] = std::max(clock[s], other[s]);
}

bool lethe::forwardsOnly(Operation *op) { return isa<AwaitOp, YieldOp>(op); }

bool lethe::isCopy(Operation *op) { return isa<OffloadOp, PrefetchOp>(op); }

SmallVector<Value> StreamOrder::getAwaited(Operation *op) {
  if (auto await = dyn_cast<AwaitOp>(op))
    return llvm::to_vector(await.getTimepoints());
  if (auto timeline = dyn_cast<TestTimelineOp>(op))
    return llvm::to_vector(timeline.getAwaits());
  Value timepoint;
  if (auto offload = dyn_cast<OffloadOp>(op))
    timepoint = offload.getAwaitTimepoint();
  else if (auto prefetch = dyn_cast<PrefetchOp>(op))
    timepoint = prefetch.getAwaitTimepoint();
  else if (auto release = dyn_cast<ReleaseOp>(op))
    timepoint = release.getAwaitTimepoint();
  if (timepoint)
    return {timepoint};
  return {};
}

StreamClock StreamOrder::startClock(Operation *op, unsigned stream) const {
  StreamClock clock = streamClocks[stream];
  for (Value timepoint : getAwaited(op))
    raise(clock, getTimepointClock(timepoint));
  clock[stream] = counts[stream];
  return clock;
}

/// The storage an in-place result of `op` writes, if any.
static SmallVector<Value> inPlaceTargets(Operation *op) {
  SmallVector<Value> targets;
  if (!isInPlaceWriter(op))
    return targets;
  auto node = cast<NodeOp>(op);
  for (OpResult result : op->getResults()) {
    int64_t operand = node.getAliasedOperand(result.getResultNumber());
    if (operand >= 0 && isa<RankedTensorType>(result.getType()))
      targets.push_back(op->getOperand(operand));
  }
  return targets;
}

void StreamOrder::getNeeds(Operation *op, unsigned stream,
                           bool keepCopiesFromCollectives,
                           SmallVectorImpl<StreamNeed> &needs) const {
  if (isa<JoinOp>(op))
    return;
  StreamClock start = startClock(op, stream);
  auto addUncovered = [&](StreamNeed::Kind kind, const StreamAccesses &list,
                          Value value) {
    for (unsigned other = 0; other < kNumProgramStreams; ++other) {
      const Access &access = list[other];
      if (other == stream || access.index < 0 || start[other] > access.index)
        continue;
      needs.push_back({kind, other, access.index, access.op, value});
    }
  };

  if (auto release = dyn_cast<ReleaseOp>(op)) {
    if (const StorageAccesses *record =
            lookup(program.getStorage(release.getValue())))
      addUncovered(StreamNeed::Overwrite, record->accesses, release.getValue());
    return;
  }
  if (!forwardsOnly(op))
    for (Value operand : op->getOperands()) {
      if (!isa<RankedTensorType, HostTensorType>(operand.getType()))
        continue;
      if (const StorageAccesses *record = lookup(program.getStorage(operand)))
        addUncovered(StreamNeed::Read, record->writes, operand);
    }
  for (Value target : inPlaceTargets(op))
    if (const StorageAccesses *record = lookup(program.getStorage(target)))
      addUncovered(StreamNeed::Overwrite, record->accesses, target);

  constexpr unsigned compute = static_cast<unsigned>(Stream::Compute);
  bool allocates = llvm::any_of(op->getResults(), [&](OpResult result) {
    return ExplicitProgram::isAllocatingResult(op, result.getResultNumber());
  });
  if (stream != compute && allocates && lastRelease.index >= 0 &&
      start[compute] <= lastRelease.index)
    needs.push_back(
        {StreamNeed::Reuse, compute, lastRelease.index, lastRelease.op, {}});

  if (!keepCopiesFromCollectives)
    return;
  auto needAllOf = [&](Stream other) {
    unsigned s = static_cast<unsigned>(other);
    if (s != stream && counts[s] > 0 && start[s] < counts[s])
      needs.push_back({StreamNeed::Contention, s, counts[s] - 1, nullptr, {}});
  };
  if (isCopy(op))
    needAllOf(Stream::Comm);
  if (isa<CollectiveOp>(op)) {
    needAllOf(Stream::D2H);
    needAllOf(Stream::H2D);
  }
}

StreamClock StreamOrder::issue(Operation *op, unsigned stream) {
  if (auto join = dyn_cast<JoinOp>(op)) {
    StreamClock clock = {};
    for (Value timepoint : join.getTimepoints())
      raise(clock, getTimepointClock(timepoint));
    timepoints[join.getResult()] = clock;
    return clock;
  }
  for (Value timepoint : getAwaited(op))
    raise(streamClocks[stream], getTimepointClock(timepoint));
  StreamClock start = streamClocks[stream];
  int32_t index = counts[stream]++;
  start[stream] = index;

  if (isa<ReleaseOp>(op)) {
    lastRelease = {index, op};
    return start;
  }
  if (!forwardsOnly(op))
    for (Value operand : op->getOperands()) {
      if (!isa<RankedTensorType, HostTensorType>(operand.getType()))
        continue;
      StorageAccesses &record = this->record(program.getStorage(operand));
      for (unsigned other = 0; other < kNumProgramStreams; ++other)
        if (other != stream && record.writes[other].index >= 0) {
          ++numCrossStreamReads;
          break;
        }
      record.accesses[stream] = {index, op};
    }

  for (Value result : op->getResults()) {
    if (!isa<TimepointType>(result.getType()))
      continue;
    StreamClock clock = start;
    // A barrier covers the ops before it; a copy's timepoint the copy too.
    if (!isa<BarrierOp>(op))
      clock[stream] = index + 1;
    timepoints[result] = clock;
    lastTimepoint[stream] = {clock[stream], result};
  }

  for (OpResult result : op->getResults())
    if (ExplicitProgram::isAllocatingResult(op, result.getResultNumber())) {
      StorageAccesses &record = this->record(result);
      record.writes[stream] = record.accesses[stream] = {index, op};
    }
  for (Value target : inPlaceTargets(op)) {
    StorageAccesses &record = this->record(program.getStorage(target));
    record.writes[stream] = record.accesses[stream] = {index, op};
  }
  return start;
}

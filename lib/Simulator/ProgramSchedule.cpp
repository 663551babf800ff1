//===- ProgramSchedule.cpp - A scheduled program as a Schedule ------------===//

#include "lethe/Simulator/ProgramSchedule.h"

#include "lethe/Analysis/CostModel.h"
#include "lethe/Analysis/Program.h"
#include "lethe/Analysis/StreamOrder.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace lethe;

static double timeOf(Operation *op) {
  if (auto attr = op->getAttrOfType<FloatAttr>("time_us"))
    return std::max(0.0, attr.getValueAsDouble());
  return 0.0;
}

std::string lethe::describeScheduleOp(Operation *op) {
  if (auto node = dyn_cast<NodeOp>(op))
    return node.getKind().str();
  if (auto collective = dyn_cast<CollectiveOp>(op))
    return ("collective." + stringifyCollectiveKind(collective.getKind()))
        .str();
  return op->getName().stripDialect().str();
}

FailureOr<ProgramSchedule> lethe::buildProgramSchedule(func::FuncOp func) {
  FailureOr<ExplicitProgram> program = ExplicitProgram::build(func);
  if (failed(program))
    return failure();
  ProgramSchedule result;
  Schedule &schedule = result.schedule;

  // Ops a timepoint stands for.
  DenseMap<Value, SmallVector<OpIndex, 2>> timepointOps;
  for (const ProgramBuffer &buffer : program->getBuffers())
    schedule.buffers.push_back(
        {-1, buffer.bytes,
         buffer.host ? BufferOrigin::Host : BufferOrigin::Produced});

  for (Operation *op : program->getOps()) {
    if (auto join = dyn_cast<JoinOp>(op)) {
      SmallVector<OpIndex, 2> &ops = timepointOps[join.getResult()];
      for (Value input : join.getTimepoints())
        for (OpIndex dep : timepointOps.lookup(input))
          if (!llvm::is_contained(ops, dep))
            ops.push_back(dep);
      continue;
    }
    if (isa<RecomputeOp, YieldOp, func::ReturnOp>(op))
      continue;

    ScheduleOp entry;
    entry.stream = getOpStream(op);
    if (isa<NodeOp, CollectiveOp, TestTimelineOp>(op)) {
      entry.kind = op->getParentOfType<RecomputeOp>()
                       ? ScheduleOpKind::Recompute
                       : ScheduleOpKind::Node;
      entry.durationUs = timeOf(op);
      entry.kernel = KernelClass::MemoryBound;
      if (auto node = dyn_cast<NodeOp>(op)) {
        if (CostModel::isView(node))
          entry.kernel = KernelClass::None;
        else if (CostModel::computeWork(node))
          entry.kernel = KernelClass::Matrix;
      }
    } else if (isa<OffloadOp, PrefetchOp>(op)) {
      entry.kind = isa<OffloadOp>(op) ? ScheduleOpKind::Offload
                                      : ScheduleOpKind::Prefetch;
      entry.copyBytes = getTypeBytes(op->getOperand(0).getType());
    } else if (isa<ReleaseOp>(op)) {
      entry.kind = ScheduleOpKind::Release;
    } else if (!isa<BarrierOp, AwaitOp>(op) && op->getDialect() &&
               isa<LetheDialect>(op->getDialect())) {
      return op->emitOpError("cannot be simulated");
    }

    OpIndex index = schedule.ops.size();
    for (Value timepoint : StreamOrder::getAwaited(op))
      for (OpIndex dep : timepointOps.lookup(timepoint))
        if (!llvm::is_contained(entry.deps, dep))
          entry.deps.push_back(dep);
    for (Value operand : op->getOperands()) {
      int32_t buffer = program->getBufferIndex(operand);
      if (buffer < 0)
        continue;
      if (isa<ReleaseOp>(op))
        entry.frees.push_back(buffer);
      else if (!isa<AwaitOp>(op) && !llvm::is_contained(entry.reads, buffer))
        entry.reads.push_back(buffer);
    }
    for (OpResult value : op->getResults()) {
      if (isa<TimepointType>(value.getType()))
        timepointOps[value] = {index};
      int32_t buffer = program->getBufferIndex(value);
      if (buffer >= 0 && program->getBuffers()[buffer].value == value)
        entry.allocs.push_back(buffer);
    }
    schedule.ops.push_back(std::move(entry));
    result.irOps.push_back(op);
  }
  return result;
}

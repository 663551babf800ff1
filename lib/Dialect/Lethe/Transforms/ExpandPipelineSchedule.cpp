//===- ExpandPipelineSchedule.cpp - One stage's pipeline program ----------===//
//
// Splits a single-micro-batch training step into pipeline chunks by layer
// and writes out one stage's program over all micro-batches, in the order
// of the 1F1B or interleaved schedule (lethe/Analysis/PipelineSchedule.h),
// with point-to-point transfers between stages. docs/Parallel.md states
// the rules.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/PipelinePartition.h"
#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/NodeIds.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Remarks.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"

#include <map>
#include <numeric>

namespace lethe {
#define GEN_PASS_DEF_EXPANDPIPELINESCHEDULE
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

using OpInfo = PipelinePartition::OpInfo;
using MessageTemplate = PipelinePartition::MessageTemplate;
using DeferredTransfer = PipelinePartition::DeferredTransfer;
using StagePlan = PipelinePartition::StagePlan;

struct ExpandPipelineSchedulePass
    : public lethe::impl::ExpandPipelineScheduleBase<
          ExpandPipelineSchedulePass> {
  using ExpandPipelineScheduleBase::ExpandPipelineScheduleBase;

  void runOnOperation() override;

private:
  LogicalResult emit(func::FuncOp func, func::ReturnOp ret,
                     const StagePlan &plan);
  FailureOr<Value> lookup(Value value, int microbatch, int chunk);
  FailureOr<Operation *> cloneOp(OpInfo &info, int microbatch, int chunk);
  BlockArgument argumentFor(BlockArgument original, int microbatch);
  void remarkPartition(func::FuncOp func);

  /// The step split into chunks (lethe/Analysis/PipelinePartition.h).
  PipelinePartition partition;

  // Emission state.
  OpBuilder *builder = nullptr;
  Block *newBody = nullptr;
  SmallVector<IRMapping> maps;
  std::map<std::pair<unsigned, int>, BlockArgument> newArgs;
  SmallVector<DictionaryAttr> newArgAttrs;
  func::FuncOp function;
};

void ExpandPipelineSchedulePass::runOnOperation() {
  func::FuncOp func = getOperation();
  function = func;
  maps.clear();
  newArgs.clear();
  newArgAttrs.clear();
  if (func.isExternal())
    return;

  std::optional<PipelineScheduleKind> kind =
      symbolizePipelineScheduleKind(schedule);
  if (!kind) {
    emitError(func.getLoc())
        << "lethe-expand-pipeline-schedule: unknown schedule '" << schedule
        << "' (expected 1f1b or interleaved)";
    return signalPassFailure();
  }
  PipelineOptions options =
      PipelineOptions{static_cast<int>(stages), static_cast<int>(microbatches),
                      *kind, static_cast<int>(vpp)};
  if (llvm::Error error = verifyPipelineOptions(options)) {
    emitError(func.getLoc()) << "lethe-expand-pipeline-schedule: "
                             << llvm::toString(std::move(error));
    return signalPassFailure();
  }
  if (stage < 0 || stage >= stages) {
    emitError(func.getLoc())
        << "lethe-expand-pipeline-schedule: stage must be in [0, "
        << static_cast<int64_t>(stages) << "), got "
        << static_cast<int64_t>(stage);
    return signalPassFailure();
  }
  if (ranksPerHost < 0 || ranksPerHost > stages) {
    emitError(func.getLoc())
        << "lethe-expand-pipeline-schedule: ranks-per-host must be in [0, "
        << static_cast<int64_t>(stages) << "] (0: all stages), got "
        << static_cast<int64_t>(ranksPerHost);
    return signalPassFailure();
  }
  if (LetheDialect::PipelineAttrHelper(func->getContext())
          .isAttrPresent(func)) {
    emitError(func.getLoc())
        << "step is already expanded into a pipeline stage ("
        << LetheDialect::PipelineAttrHelper::getNameStr() << " is set)";
    return signalPassFailure();
  }
  if (!func.getBody().hasOneBlock()) {
    emitError(func.getLoc())
        << "lethe-expand-pipeline-schedule expects a step with "
           "one block (the canonical graph form)";
    return signalPassFailure();
  }
  auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (!ret) {
    emitError(func.getLoc()) << "step body must end in func.return";
    return signalPassFailure();
  }
  FailureOr<PipelinePartition> built = PipelinePartition::build(func, options);
  if (failed(built))
    return signalPassFailure();
  partition = std::move(*built);
  // Every stage's transfers are checked against every other's; then ours
  // are emitted.
  FailureOr<SmallVector<StagePlan>> plans = partition.planTransfers(func);
  if (failed(plans))
    return signalPassFailure();
  remarkPartition(func);
  if (failed(emit(func, ret, (*plans)[stage])))
    return signalPassFailure();
  // Each micro-batch's copy of a node is a node of its own for the plan.
  renumberRepeatedNodeIds(func);
}
BlockArgument ExpandPipelineSchedulePass::argumentFor(BlockArgument original,
                                                      int microbatch) {
  unsigned index = original.getArgNumber();
  DictionaryAttr attrs = function.getArgAttrDict(index);
  auto kind = function.getArgAttrOfType<StringAttr>(
      index, LetheDialect::KindAttrHelper::getNameStr());
  // Parameters and buffers are shared by all micro-batches; data and the
  // gradient seed are each micro-batch's own.
  bool shared =
      kind && (kind.getValue() == "param" || kind.getValue() == "buffer");
  int key = shared ? -1 : microbatch;
  auto it = newArgs.find({index, key});
  if (it != newArgs.end())
    return it->second;
  BlockArgument arg =
      newBody->addArgument(original.getType(), original.getLoc());
  NamedAttrList list(attrs);
  if (!shared) {
    list.set(LetheDialect::MbAttrHelper::getNameStr(),
             builder->getI64IntegerAttr(microbatch));
    if (auto name = function.getArgAttrOfType<StringAttr>(
            index, LetheDialect::NameAttrHelper::getNameStr()))
      list.set(
          LetheDialect::NameAttrHelper::getNameStr(),
          builder->getStringAttr(name.getValue() + ".mb" + Twine(microbatch)));
  }
  newArgAttrs.push_back(list.getDictionary(&getContext()));
  newArgs[{index, key}] = arg;
  return arg;
}

FailureOr<Value> ExpandPipelineSchedulePass::lookup(Value value, int microbatch,
                                                    int chunk) {
  IRMapping &map = maps[microbatch];
  if (Value mapped = map.lookupOrNull(value))
    return mapped;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    BlockArgument mapped = argumentFor(arg, microbatch);
    map.map(value, mapped);
    return Value(mapped);
  }
  OpInfo &producer =
      partition.ops[partition.infoIndex.lookup(value.getDefiningOp())];
  if (!producer.replicable)
    return failure();
  if (failed(cloneOp(producer, microbatch, chunk)))
    return failure();
  return map.lookup(value);
}

FailureOr<Operation *>
ExpandPipelineSchedulePass::cloneOp(OpInfo &info, int microbatch, int chunk) {
  for (Value operand : info.op->getOperands()) {
    FailureOr<Value> mapped = lookup(operand, microbatch, chunk);
    if (failed(mapped)) {
      InFlightDiagnostic diag =
          info.op->emitError()
          << "reads a value that stage " << static_cast<int64_t>(stage)
          << " neither computes nor receives before micro-batch " << microbatch
          << " needs it";
      diag.attachNote(operand.getLoc()) << "the value is defined here";
      return failure();
    }
  }
  Operation *clone = builder->clone(*info.op, maps[microbatch]);
  LetheDialect::MbAttrHelper(clone->getContext())
      .setAttr(clone, builder->getI64IntegerAttr(microbatch));
  LetheDialect::ChunkAttrHelper(clone->getContext())
      .setAttr(clone, builder->getI64IntegerAttr(chunk));
  ++numClonedOps;
  return clone;
}

LogicalResult ExpandPipelineSchedulePass::emit(func::FuncOp func,
                                               func::ReturnOp ret,
                                               const StagePlan &plan) {
  MLIRContext *context = &getContext();
  Block *oldBody = &func.getBody().front();
  newBody = new Block();
  func.getBody().push_back(newBody);
  OpBuilder b = OpBuilder::atBlockEnd(newBody);
  builder = &b;
  maps.assign(microbatches, IRMapping());
  SmallVector<int64_t> group = llvm::to_vector(llvm::seq<int64_t>(0, stages));

  // Results: forward outputs per micro-batch; gradients (outputs of the
  // backward) summed over micro-batches into the first one's buffer.
  DenseSet<Value> accumulate;
  for (Value operand : ret.getOperands())
    accumulate.insert(operand);
  for (const OpInfo &info : partition.ops)
    if (info.deferred)
      for (Value operand : info.op->getOperands())
        accumulate.insert(operand);
  DenseMap<Value, Value> accumulated;
  // Sums this pass allocated, which later micro-batches add into in place.
  DenseSet<Value> owned;

  // The sends after a unit and the receives before the next are one NCCL
  // group (numbered by that next unit), as checkPipelineCommunication
  // checked them.
  auto transfer = [&](std::pair<int, int> entry, bool send,
                      int64_t p2pGroup) -> LogicalResult {
    const MessageTemplate &message = partition.messages[entry.first];
    int microbatch = entry.second;
    for (Value value : message.values) {
      Location loc = value.getLoc();
      StringAttr name =
          b.getStringAttr(Twine(send ? "pp.send." : "pp.recv.") +
                          stringifyPhase(message.phase) + ".c" +
                          Twine(message.chunk) + ".mb" + Twine(microbatch));
      auto type = cast<RankedTensorType>(value.getType());
      int peer = send ? message.destination : partition.stageOf(message.chunk);
      CollectiveOp op;
      if (send) {
        Value mapped = maps[microbatch].lookupOrNull(value);
        if (!mapped)
          return emitError(loc)
                 << "internal: sending a value stage "
                 << static_cast<int64_t>(stage) << " has not computed";
        op = CollectiveOp::create(b, loc, Type(), CollectiveKind::Send, mapped,
                                  group, message.phase, nullptr, nullptr, name,
                                  b.getI64IntegerAttr(peer));
        ++numSends;
      } else {
        op = CollectiveOp::create(b, loc, type, CollectiveKind::Recv, Value(),
                                  group, message.phase, nullptr, nullptr, name,
                                  b.getI64IntegerAttr(peer));
        maps[microbatch].map(value, op.getResult());
        ++numRecvs;
      }
      LetheDialect::MbAttrHelper(op->getContext())
          .setAttr(op, b.getI64IntegerAttr(microbatch));
      LetheDialect::ChunkAttrHelper(op->getContext())
          .setAttr(op, b.getI64IntegerAttr(message.chunk));
      LetheDialect::P2pGroupAttrHelper(op->getContext())
          .setAttr(op, b.getI64IntegerAttr(p2pGroup));
    }
    return success();
  };

  size_t next = 0;
  for (size_t unit = 0; unit < plan.receivesBefore.size(); ++unit) {
    if (unit > 0)
      for (auto entry : plan.sendsAfter[unit - 1])
        if (failed(transfer(entry, /*send=*/true, unit)))
          return failure();
    for (auto entry : plan.receivesBefore[unit])
      if (failed(transfer(entry, /*send=*/false, unit)))
        return failure();
    for (; next < plan.steps.size() &&
           plan.steps[next].unit == static_cast<int>(unit);
         ++next) {
      const PipelineStep &step = plan.steps[next];
      int microbatch = step.microbatch;
      for (unsigned index :
           partition.opsOfStep[{static_cast<int>(step.phase), step.chunk}]) {
        OpInfo &info = partition.ops[index];
        FailureOr<Operation *> clone = cloneOp(info, microbatch, step.chunk);
        if (failed(clone))
          return failure();
        if (info.phase != Phase::Bwd)
          continue;
        for (auto [result, cloned] :
             llvm::zip_equal(info.op->getResults(), (*clone)->getResults())) {
          if (!accumulate.contains(result))
            continue;
          auto it = accumulated.find(result);
          if (it == accumulated.end()) {
            accumulated[result] = cloned;
            continue;
          }
          // The first sum allocates (the first micro-batch's gradient may
          // still be read), the others add in place.
          bool first = !owned.contains(it->second);
          auto add = NodeOp::create(
              b, cloned.getLoc(), TypeRange{cloned.getType()},
              first ? "aten.add.Tensor" : "aten.add_.Tensor", Phase::Bwd,
              ValueRange{it->second, cloned}, nullptr,
              first ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr({0}),
              nullptr, b.getStringAttr("pp.grad_accumulate"), nullptr);
          LetheDialect::MbAttrHelper(add->getContext())
              .setAttr(add, b.getI64IntegerAttr(microbatch));
          LetheDialect::ChunkAttrHelper(add->getContext())
              .setAttr(add, b.getI64IntegerAttr(step.chunk));
          it->second = add.getResult(0);
          owned.insert(it->second);
        }
      }
    }
  }
  int64_t lastGroup = plan.receivesBefore.size();
  if (!plan.sendsAfter.empty())
    for (auto entry : plan.sendsAfter.back())
      if (failed(transfer(entry, /*send=*/true, lastGroup)))
        return failure();
  // Partial gradients of cross-stage sums, once, then the sums.
  DenseMap<Value, Value> partials;
  for (const DeferredTransfer &transfer : partition.deferredTransfers) {
    Location loc = transfer.value.getLoc();
    if (transfer.from == stage) {
      auto send = CollectiveOp::create(b, loc, Type(), CollectiveKind::Send,
                                       accumulated.lookup(transfer.value),
                                       group, Phase::Bwd, nullptr, nullptr,
                                       b.getStringAttr("pp.send.partial_grad"),
                                       b.getI64IntegerAttr(transfer.to));
      LetheDialect::P2pGroupAttrHelper(send->getContext())
          .setAttr(send, b.getI64IntegerAttr(lastGroup));
      ++numSends;
    }
    if (transfer.to == stage) {
      auto recv = CollectiveOp::create(b, loc, transfer.value.getType(),
                                       CollectiveKind::Recv, Value(), group,
                                       Phase::Bwd, nullptr, nullptr,
                                       b.getStringAttr("pp.recv.partial_grad"),
                                       b.getI64IntegerAttr(transfer.from));
      LetheDialect::P2pGroupAttrHelper(recv->getContext())
          .setAttr(recv, b.getI64IntegerAttr(lastGroup));
      partials[transfer.value] = recv.getResult();
      ++numRecvs;
    }
  }
  for (const OpInfo &info : partition.ops) {
    if (!info.deferred || partition.stageOf(info.chunk) != stage)
      continue;
    IRMapping mapping;
    for (Value operand : info.op->getOperands())
      mapping.map(operand, partials.count(operand)
                               ? partials.lookup(operand)
                               : accumulated.lookup(operand));
    Operation *sum = b.clone(*info.op, mapping);
    LetheDialect::ChunkAttrHelper(sum->getContext())
        .setAttr(sum, b.getI64IntegerAttr(info.chunk));
    accumulated[info.op->getResult(0)] = sum->getResult(0);
  }

  // The stage returns what it computes of the step's results.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
    Operation *producer = operand.getDefiningOp();
    if (!producer)
      continue;
    const OpInfo &info = partition.ops[partition.infoIndex.lookup(producer)];
    // A floating forward result is returned by the first stage.
    if (partition.stageOf(std::max(info.chunk, 0)) != stage)
      continue;
    DictionaryAttr attrs = func.getResultAttrDict(index);
    if (info.phase == Phase::Bwd) {
      results.push_back(accumulated.lookup(operand));
      resultAttrs.push_back(attrs ? attrs : DictionaryAttr::get(context));
      continue;
    }
    for (int microbatch = 0; microbatch < microbatches; ++microbatch) {
      FailureOr<Value> value = lookup(operand, microbatch, 0);
      if (failed(value))
        return failure();
      results.push_back(*value);
      NamedAttrList list(attrs);
      list.set(LetheDialect::MbAttrHelper::getNameStr(),
               b.getI64IntegerAttr(microbatch));
      resultAttrs.push_back(list.getDictionary(context));
    }
  }
  func::ReturnOp::create(b, ret.getLoc(), results);

  oldBody->dropAllDefinedValueUses();
  oldBody->erase();
  func.setType(FunctionType::get(context, newBody->getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  func.setAllArgAttrs(newArgAttrs);
  func.setAllResultAttrs(resultAttrs);
  LetheDialect::PipelineAttrHelper(func->getContext())
      .setAttr(func, PipelineAttr::get(context, partition.options.kind, stages,
                                       stage, microbatches, vpp));
  LetheDialect::RanksPerHostAttrHelper(func->getContext())
      .setAttr(func,
               b.getI64IntegerAttr(ranksPerHost > 0 ? ranksPerHost : stages));
  builder = nullptr;
  return success();
}

void ExpandPipelineSchedulePass::remarkPartition(func::FuncOp func) {
  // The split is a decision: a `passed` remark, built only when the remark
  // engine wants it (--remarks-filter=lethe-expand-pipeline-schedule).
  remark::detail::InFlightRemark report =
      remark::passed(func.getLoc(), remark::RemarkOpts::name("partition")
                                        .category(getArgument())
                                        .function(func.getSymName()));
  if (!report)
    return;
  SmallVector<double> work(partition.numChunks(), 0.0);
  for (const OpInfo &info : partition.ops)
    work[std::max(info.chunk, 0)] += info.weight;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "pipeline stage " << static_cast<int64_t>(stage) << " of "
     << static_cast<int64_t>(stages) << " ("
     << stringifyPipelineScheduleKind(partition.options.kind) << ", "
     << static_cast<int64_t>(microbatches) << " micro-batches):";
  for (int chunk = static_cast<int>(stage); chunk < partition.numChunks();
       chunk += stages) {
    os << " chunk " << chunk << " = layers "
       << partition.blockNames[partition.chunkStart[chunk]] << " .. "
       << partition.blockNames[partition.chunkStart[chunk + 1] - 1];
    if (chunk == 0)
      os << " + embedding";
    if (chunk == partition.numChunks() - 1)
      os << " + head";
    os << llvm::format(" (%.1f of %.1f per micro-batch)", work[chunk],
                       std::accumulate(work.begin(), work.end(), 0.0));
  }
  os << "; order: "
     << formatPipelineSteps(pipelineSchedule(partition.options, stage),
                            partition.options);
  report << text;
}

} // namespace

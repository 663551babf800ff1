//===- ExpandPipelineSchedule.cpp - One stage's pipeline program ----------===//
//
// Splits a single-micro-batch training step into pipeline chunks by layer
// and writes out one stage's program over all micro-batches, in the order
// of the 1F1B or interleaved schedule (lethe/Analysis/PipelineSchedule.h),
// with point-to-point transfers between stages. docs/Parallel.md states
// the rules.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/PipelineSchedule.h"
#include "lethe/Analysis/Program.h"
#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"

#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace lethe {
#define GEN_PASS_DEF_EXPANDPIPELINESCHEDULE
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

constexpr StringLiteral kPipelineAttr = "lethe.pipeline";
constexpr StringLiteral kMicrobatchAttr = "lethe.mb";
constexpr StringLiteral kChunkAttr = "lethe.chunk";
constexpr StringLiteral kKindAttr = "lethe.kind";
constexpr StringLiteral kNameAttr = "lethe.name";

struct OpInfo {
  Operation *op = nullptr;
  Phase phase = Phase::Fwd;
  /// Layer (block) ordinal from the scope, or -1.
  int block = -1;
  /// The chunk (virtual stage) that runs the op.
  int chunk = 0;
  /// A forward op that depends on no layer's output and draws no random
  /// numbers (masks, position ids): re-run on every stage that needs it
  /// rather than sent.
  bool replicable = false;
  /// Depends on a layer's forward / backward output (program order).
  bool afterFwdBlocks = false;
  bool afterBwdBlocks = false;
  /// A sum of gradients from two stages that the step returns (tied
  /// weights): each stage sums its part over the micro-batches, and the
  /// sum of the parts is taken once, after the last micro-batch.
  bool deferred = false;
  double weight = 0.0;
};

/// A partial gradient sent once after the last micro-batch.
struct DeferredTransfer {
  Value value;
  int from, to;
};

/// The values one step (phase, chunk) sends to one stage, per micro-batch.
struct MessageTemplate {
  Phase phase;
  int chunk;
  int destination;
  SmallVector<Value> values;
  /// The (phase, chunk) steps of the destination that read one of them.
  SmallVector<std::pair<Phase, int>> readers;
};

/// Where a stage's point-to-point ops go: before unit u, receive; after
/// unit u, send. Entries are (template index, micro-batch).
struct StagePlan {
  std::vector<PipelineStep> steps;
  std::vector<SmallVector<std::pair<int, int>>> receivesBefore;
  std::vector<SmallVector<std::pair<int, int>>> sendsAfter;
};

/// The layer a scope belongs to: the prefix up to its first all-digit
/// component (`transformer.h.3.attn` -> `transformer.h.3`), or empty.
StringRef layerKey(StringRef scope) {
  size_t start = 0;
  for (int index = 0; start <= scope.size(); ++index) {
    size_t end = scope.find('.', start);
    if (end == StringRef::npos)
      end = scope.size();
    StringRef part = scope.slice(start, end);
    if (index > 0 && !part.empty() && llvm::all_of(part, llvm::isDigit))
      return scope.take_front(end);
    start = end + 1;
  }
  return {};
}

struct ExpandPipelineSchedulePass
    : public lethe::impl::ExpandPipelineScheduleBase<
          ExpandPipelineSchedulePass> {
  using ExpandPipelineScheduleBase::ExpandPipelineScheduleBase;

  void runOnOperation() override;

private:
  LogicalResult classify(func::FuncOp func);
  LogicalResult partition(func::FuncOp func);
  void assignChunks();
  void deferCrossStageSums(func::ReturnOp ret);
  void collectMessages(func::ReturnOp ret);
  void planSends(StagePlan &plan, int stage);
  void planReceives(StagePlan &plan, int stage, ArrayRef<StagePlan> senders);
  LogicalResult emit(func::FuncOp func, func::ReturnOp ret,
                     const StagePlan &plan);
  FailureOr<Value> lookup(Value value, int microbatch, int chunk);
  FailureOr<Operation *> cloneOp(OpInfo &info, int microbatch, int chunk);
  BlockArgument argumentFor(BlockArgument original, int microbatch);
  void remarkPartition(func::FuncOp func);

  int stageOf(int chunk) const { return chunk % stages; }
  int numChunks() const { return stages * vpp; }

  PipelineOptions options;
  SmallVector<OpInfo> ops;
  DenseMap<Operation *, unsigned> infoIndex;
  SmallVector<std::string> blockNames;
  /// First block of each chunk, and one past the last chunk's last block.
  SmallVector<int> chunkStart;
  std::map<std::pair<int, int>, SmallVector<unsigned>> opsOfStep;
  SmallVector<MessageTemplate> messages;
  SmallVector<DeferredTransfer> deferredTransfers;

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
  ops.clear();
  infoIndex.clear();
  blockNames.clear();
  chunkStart.clear();
  opsOfStep.clear();
  messages.clear();
  deferredTransfers.clear();
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
  options =
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
  if (func->hasAttr(kPipelineAttr)) {
    emitError(func.getLoc())
        << "step is already expanded into a pipeline stage (" << kPipelineAttr
        << " is set)";
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
  if (failed(classify(func)) || failed(partition(func)))
    return signalPassFailure();
  assignChunks();
  deferCrossStageSums(ret);
  collectMessages(ret);

  // Every stage's program must agree with every other's on the order of
  // their transfers; check them all, then emit ours.
  std::vector<PipelineCommGroups> comm(stages);
  SmallVector<StagePlan> plans(stages);
  for (int s = 0; s < stages; ++s)
    planSends(plans[s], s);
  for (int s = 0; s < stages; ++s)
    planReceives(plans[s], s, plans);
  auto id = [&](std::pair<int, int> entry) {
    return static_cast<int64_t>(entry.first) * microbatches + entry.second;
  };
  for (int s = 0; s < stages; ++s) {
    const StagePlan &plan = plans[s];
    for (size_t unit = 0; unit <= plan.receivesBefore.size(); ++unit) {
      std::vector<PipelineCommOp> group;
      if (unit > 0)
        for (auto entry : plan.sendsAfter[unit - 1])
          group.push_back({true, messages[entry.first].destination, id(entry)});
      if (unit < plan.receivesBefore.size())
        for (auto entry : plan.receivesBefore[unit])
          group.push_back(
              {false, stageOf(messages[entry.first].chunk), id(entry)});
      if (unit == plan.receivesBefore.size())
        for (auto [index, transfer] : llvm::enumerate(deferredTransfers)) {
          int64_t message =
              static_cast<int64_t>(messages.size() + index) * microbatches;
          if (transfer.from == s)
            group.push_back({true, transfer.to, message});
          if (transfer.to == s)
            group.push_back({false, transfer.from, message});
        }
      comm[s].push_back(std::move(group));
    }
  }
  StagePlan &ours = plans[stage];
  std::string problem = checkPipelineCommunication(comm);
  if (!problem.empty()) {
    emitError(func.getLoc())
        << "the transfers between pipeline stages of this step "
           "cannot be ordered consistently: "
        << problem;
    return signalPassFailure();
  }
  remarkPartition(func);
  if (failed(emit(func, ret, ours)))
    return signalPassFailure();
}

LogicalResult ExpandPipelineSchedulePass::classify(func::FuncOp func) {
  llvm::StringMap<int> blockIndex;
  bool timed = false;
  for (Operation &op : func.getBody().front().without_terminator()) {
    OpInfo info;
    info.op = &op;
    StringRef scope, kind;
    double time = 0.0;
    if (auto node = dyn_cast<NodeOp>(op)) {
      info.phase = node.getPhase();
      scope = node.getScope().value_or("");
      kind = node.getKind();
      if (FloatAttr t = node.getTimeUsAttr())
        time = t.getValueAsDouble();
    } else if (auto coll = dyn_cast<CollectiveOp>(op)) {
      info.phase = coll.getPhase();
      scope = coll.getScope().value_or("");
      kind = "lethe.collective";
      if (FloatAttr t = coll.getTimeUsAttr())
        time = t.getValueAsDouble();
    } else {
      return op.emitError()
             << "lethe-expand-pipeline-schedule expects the canonical graph "
                "form ('lethe.node' and 'lethe.collective' ops), got '"
             << op.getName() << "'";
    }
    if (info.phase == Phase::Opt)
      return op.emitError()
             << "optimizer ops are not supported: a pipeline runs the "
                "optimizer once after all micro-batches; expand a step "
                "without its optimizer phase";
    timed |= time > 0.0;
    info.weight = time;
    StringRef key = layerKey(scope);
    if (!key.empty()) {
      auto it = blockIndex.find(key);
      if (it != blockIndex.end()) {
        info.block = it->second;
      } else if (info.phase == Phase::Fwd) {
        info.block = blockNames.size();
        blockIndex[key] = info.block;
        blockNames.push_back(key.str());
      }
    }
    uint32_t flags = TrainingGraph::classifyKind(kind);
    bool plain =
        isa<NodeOp>(op) &&
        !(flags & (NodeFlagRandom | NodeFlagCollective | NodeFlagMutates));
    info.replicable = info.phase == Phase::Fwd && info.block < 0 && plain;
    for (Value operand : op.getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer)
        continue;
      const OpInfo &source = ops[infoIndex.lookup(producer)];
      info.afterFwdBlocks |= source.phase == Phase::Fwd &&
                             (source.block >= 0 || source.afterFwdBlocks);
      info.afterBwdBlocks |= source.phase == Phase::Bwd &&
                             (source.block >= 0 || source.afterBwdBlocks);
      info.replicable &= source.replicable;
    }
    info.replicable &= !info.afterFwdBlocks;
    infoIndex[&op] = ops.size();
    ops.push_back(info);
  }
  if (!timed)
    for (OpInfo &info : ops)
      info.weight = 1.0;
  return success();
}

LogicalResult ExpandPipelineSchedulePass::partition(func::FuncOp func) {
  int layers = blockNames.size(), chunks = numChunks();
  if (layers < chunks)
    return emitError(func.getLoc())
           << "cannot split " << layers
           << " layers (scopes with a numeric index, e.g. 'transformer.h.3') "
              "into "
           << chunks << " pipeline chunks (stages=" << options.stages
           << " x vpp=" << options.vpp << ")";
  // Work of each layer; the embedding (forward before the first layer,
  // backward after the last) goes with the first chunk and the head and
  // loss with the last.
  SmallVector<double> work(layers, 0.0);
  double head = 0.0, tail = 0.0;
  for (const OpInfo &info : ops) {
    if (info.block >= 0)
      work[info.block] += info.weight;
    else if (info.phase == Phase::Fwd ? !info.afterFwdBlocks
                                      : info.afterBwdBlocks)
      head += info.weight;
    else
      tail += info.weight;
  }
  work.front() += head;
  work.back() += tail;
  // Contiguous split minimizing the largest chunk: best[c][l] is the least
  // maximum over splits of layers [0, l) into c chunks.
  SmallVector<double> prefix(layers + 1, 0.0);
  for (int l = 0; l < layers; ++l)
    prefix[l + 1] = prefix[l] + work[l];
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(chunks + 1,
                                        std::vector<double>(layers + 1, inf));
  std::vector<std::vector<int>> cut(chunks + 1,
                                    std::vector<int>(layers + 1, 0));
  best[0][0] = 0.0;
  for (int c = 1; c <= chunks; ++c)
    for (int l = c; l <= layers - (chunks - c); ++l)
      for (int k = c - 1; k < l; ++k) {
        double value = std::max(best[c - 1][k], prefix[l] - prefix[k]);
        // Ties keep the earliest cut: deterministic.
        if (value < best[c][l]) {
          best[c][l] = value;
          cut[c][l] = k;
        }
      }
  chunkStart.assign(chunks + 1, layers);
  for (int c = chunks, l = layers; c > 0; --c) {
    chunkStart[c] = l;
    l = cut[c][l];
    chunkStart[c - 1] = l;
  }
  return success();
}

void ExpandPipelineSchedulePass::assignChunks() {
  int chunks = numChunks();
  auto chunkOfBlock = [&](int block) {
    return static_cast<int>(
        llvm::upper_bound(ArrayRef(chunkStart).drop_front(), block) -
        chunkStart.begin() - 1);
  };
  // Replicable ops float: they run wherever they are read. The others are
  // placed by their layer, else by the chunks of the values they read.
  for (OpInfo &info : ops) {
    info.chunk = -1;
    if (info.replicable)
      continue;
    if (info.block >= 0) {
      info.chunk = chunkOfBlock(info.block);
      continue;
    }
    int earliestBwd = chunks, latestFwd = -1;
    for (Value operand : info.op->getOperands())
      if (Operation *producer = operand.getDefiningOp()) {
        const OpInfo &source = ops[infoIndex.lookup(producer)];
        if (source.chunk < 0)
          continue;
        if (source.phase == Phase::Bwd)
          earliestBwd = std::min(earliestBwd, source.chunk);
        else
          latestFwd = std::max(latestFwd, source.chunk);
      }
    if (info.phase == Phase::Fwd)
      // Before the layers: the first chunk; after them: with the latest
      // chunk whose output it reads.
      info.chunk = std::max(latestFwd, 0);
    else if (earliestBwd < chunks)
      // Gradients flow from the last chunk to the first: with the earliest
      // chunk of the backward values it reads.
      info.chunk = earliestBwd;
    else if (latestFwd >= 0)
      info.chunk = latestFwd;
  }
  // A backward op that reads only inputs and floating values (the seed,
  // a view of a parameter) runs with its earliest reader, else last.
  for (OpInfo &info : llvm::reverse(ops)) {
    if (info.replicable || info.chunk >= 0)
      continue;
    info.chunk = chunks;
    for (Operation *user : info.op->getUsers()) {
      auto it = infoIndex.find(user);
      if (it != infoIndex.end() && ops[it->second].chunk >= 0)
        info.chunk = std::min(info.chunk, ops[it->second].chunk);
    }
    if (info.chunk == chunks)
      info.chunk = chunks - 1;
  }
}

void ExpandPipelineSchedulePass::deferCrossStageSums(func::ReturnOp ret) {
  for (OpInfo &info : ops) {
    auto node = dyn_cast<NodeOp>(info.op);
    if (node && node.getKind() == "aten.add.Tensor" &&
        info.phase == Phase::Bwd && node.getNumOperands() == 2 &&
        node.getNumResults() == 1 &&
        llvm::all_of(node->getUsers(),
                     [&](Operation *user) { return user == ret; }) &&
        llvm::all_of(node->getOperands(), [&](Value operand) {
          Operation *producer = operand.getDefiningOp();
          if (!producer || operand.getType() != node.getType(0))
            return false;
          const OpInfo &source = ops[infoIndex.lookup(producer)];
          return source.phase == Phase::Bwd && !source.replicable;
        })) {
      for (Value operand : node->getOperands()) {
        int from =
            stageOf(ops[infoIndex.lookup(operand.getDefiningOp())].chunk);
        if (from != stageOf(info.chunk)) {
          info.deferred = true;
          break;
        }
      }
      if (info.deferred)
        for (Value operand : node->getOperands()) {
          int from =
              stageOf(ops[infoIndex.lookup(operand.getDefiningOp())].chunk);
          if (from != stageOf(info.chunk))
            deferredTransfers.push_back({operand, from, stageOf(info.chunk)});
        }
    }
    if (!info.replicable && !info.deferred)
      opsOfStep[{static_cast<int>(info.phase), info.chunk}].push_back(
          infoIndex.lookup(info.op));
  }
}

void ExpandPipelineSchedulePass::collectMessages(func::ReturnOp ret) {
  std::map<std::tuple<int, int, int>, unsigned> index;
  for (const OpInfo &info : ops) {
    if (info.replicable)
      continue;
    for (Value result : info.op->getResults()) {
      // Destination stages in order, each once.
      SmallVector<int> destinations;
      for (Operation *user : result.getUsers()) {
        if (user == ret.getOperation() || ops[infoIndex.lookup(user)].deferred)
          continue;
        const OpInfo &reader = ops[infoIndex.lookup(user)];
        int destination = stageOf(reader.chunk);
        if (destination == stageOf(info.chunk))
          continue;
        auto key = std::make_tuple(static_cast<int>(info.phase), info.chunk,
                                   destination);
        auto [it, inserted] = index.try_emplace(key, messages.size());
        if (inserted)
          messages.push_back({info.phase, info.chunk, destination, {}, {}});
        MessageTemplate &message = messages[it->second];
        if (!llvm::is_contained(message.values, result))
          message.values.push_back(result);
        std::pair<Phase, int> step{reader.phase, reader.chunk};
        if (!llvm::is_contained(message.readers, step))
          message.readers.push_back(step);
      }
    }
  }
}

void ExpandPipelineSchedulePass::planSends(StagePlan &plan, int s) {
  plan.steps = pipelineSchedule(options, s);
  int units = plan.steps.empty() ? 0 : plan.steps.back().unit + 1;
  plan.receivesBefore.assign(units, {});
  plan.sendsAfter.assign(units, {});
  for (const PipelineStep &step : plan.steps)
    for (auto [index, message] : llvm::enumerate(messages))
      if (message.phase == step.phase && message.chunk == step.chunk)
        plan.sendsAfter[step.unit].push_back(
            {static_cast<int>(index), step.microbatch});
}

void ExpandPipelineSchedulePass::planReceives(StagePlan &plan, int s,
                                              ArrayRef<StagePlan> senders) {
  // NCCL matches a pair's sends and receives in order: a message is
  // received when first needed, together with every message its sender
  // sent before it on the pair (received early, held until needed).
  std::map<int, SmallVector<std::pair<int, int>>> pending; // by sender
  for (int sender = 0; sender < stages; ++sender)
    for (const auto &unit : senders[sender].sendsAfter)
      for (auto entry : unit)
        if (messages[entry.first].destination == s)
          pending[sender].push_back(entry);
  std::map<int, size_t> next; // per sender: first message not received
  std::set<std::pair<int, int>> received;
  for (const PipelineStep &step : plan.steps) {
    for (auto [index, message] : llvm::enumerate(messages)) {
      std::pair<int, int> entry{static_cast<int>(index), step.microbatch};
      if (message.destination != s || received.count(entry) ||
          !llvm::is_contained(message.readers,
                              std::make_pair(step.phase, step.chunk)))
        continue;
      int sender = stageOf(message.chunk);
      auto &queue = pending[sender];
      size_t &at = next[sender];
      while (at < queue.size() && !received.count(entry)) {
        received.insert(queue[at]);
        plan.receivesBefore[step.unit].push_back(queue[at]);
        ++at;
      }
    }
  }
}

BlockArgument ExpandPipelineSchedulePass::argumentFor(BlockArgument original,
                                                      int microbatch) {
  unsigned index = original.getArgNumber();
  DictionaryAttr attrs = function.getArgAttrDict(index);
  auto kind = function.getArgAttrOfType<StringAttr>(index, kKindAttr);
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
    list.set(kMicrobatchAttr, builder->getI64IntegerAttr(microbatch));
    if (auto name = function.getArgAttrOfType<StringAttr>(index, kNameAttr))
      list.set(kNameAttr, builder->getStringAttr(name.getValue() + ".mb" +
                                                 Twine(microbatch)));
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
  OpInfo &producer = ops[infoIndex.lookup(value.getDefiningOp())];
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
  clone->setAttr(kMicrobatchAttr, builder->getI64IntegerAttr(microbatch));
  clone->setAttr(kChunkAttr, builder->getI64IntegerAttr(chunk));
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
  for (const OpInfo &info : ops)
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
    const MessageTemplate &message = messages[entry.first];
    int microbatch = entry.second;
    for (Value value : message.values) {
      Location loc = value.getLoc();
      StringAttr name =
          b.getStringAttr(Twine(send ? "pp.send." : "pp.recv.") +
                          stringifyPhase(message.phase) + ".c" +
                          Twine(message.chunk) + ".mb" + Twine(microbatch));
      auto type = cast<RankedTensorType>(value.getType());
      int peer = send ? message.destination : stageOf(message.chunk);
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
      op->setAttr(kMicrobatchAttr, b.getI64IntegerAttr(microbatch));
      op->setAttr(kChunkAttr, b.getI64IntegerAttr(message.chunk));
      op->setAttr(attrs::kP2PGroup, b.getI64IntegerAttr(p2pGroup));
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
           opsOfStep[{static_cast<int>(step.phase), step.chunk}]) {
        OpInfo &info = ops[index];
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
          add->setAttr(kMicrobatchAttr, b.getI64IntegerAttr(microbatch));
          add->setAttr(kChunkAttr, b.getI64IntegerAttr(step.chunk));
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
  for (const DeferredTransfer &transfer : deferredTransfers) {
    Location loc = transfer.value.getLoc();
    if (transfer.from == stage) {
      auto send = CollectiveOp::create(b, loc, Type(), CollectiveKind::Send,
                                       accumulated.lookup(transfer.value),
                                       group, Phase::Bwd, nullptr, nullptr,
                                       b.getStringAttr("pp.send.partial_grad"),
                                       b.getI64IntegerAttr(transfer.to));
      send->setAttr(attrs::kP2PGroup, b.getI64IntegerAttr(lastGroup));
      ++numSends;
    }
    if (transfer.to == stage) {
      auto recv = CollectiveOp::create(
          b, loc, transfer.value.getType(), CollectiveKind::Recv, Value(),
          group, Phase::Bwd, nullptr, nullptr,
          b.getStringAttr("pp.recv.partial_grad"),
          b.getI64IntegerAttr(transfer.from));
      recv->setAttr(attrs::kP2PGroup, b.getI64IntegerAttr(lastGroup));
      partials[transfer.value] = recv.getResult();
      ++numRecvs;
    }
  }
  for (const OpInfo &info : ops) {
    if (!info.deferred || stageOf(info.chunk) != stage)
      continue;
    IRMapping mapping;
    for (Value operand : info.op->getOperands())
      mapping.map(operand, partials.count(operand)
                               ? partials.lookup(operand)
                               : accumulated.lookup(operand));
    Operation *sum = b.clone(*info.op, mapping);
    sum->setAttr(kChunkAttr, b.getI64IntegerAttr(info.chunk));
    accumulated[info.op->getResult(0)] = sum->getResult(0);
  }

  // The stage returns what it computes of the step's results.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
    Operation *producer = operand.getDefiningOp();
    if (!producer)
      continue;
    const OpInfo &info = ops[infoIndex.lookup(producer)];
    // A floating forward result is returned by the first stage.
    if (stageOf(std::max(info.chunk, 0)) != stage)
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
      list.set(kMicrobatchAttr, b.getI64IntegerAttr(microbatch));
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
  func->setAttr(
      kPipelineAttr,
      b.getDictionaryAttr({
          b.getNamedAttr("microbatches", b.getI64IntegerAttr(microbatches)),
          b.getNamedAttr("schedule", b.getStringAttr(schedule)),
          b.getNamedAttr("stage", b.getI64IntegerAttr(stage)),
          b.getNamedAttr("stages", b.getI64IntegerAttr(stages)),
          b.getNamedAttr("vpp", b.getI64IntegerAttr(vpp)),
      }));
  func->setAttr(attrs::kRanksPerHost,
                b.getI64IntegerAttr(ranksPerHost > 0 ? ranksPerHost : stages));
  builder = nullptr;
  return success();
}

void ExpandPipelineSchedulePass::remarkPartition(func::FuncOp func) {
  SmallVector<double> work(numChunks(), 0.0);
  for (const OpInfo &info : ops)
    work[std::max(info.chunk, 0)] += info.weight;
  InFlightDiagnostic remark = emitRemark(func.getLoc());
  remark << "pipeline stage " << static_cast<int64_t>(stage) << " of "
         << static_cast<int64_t>(stages) << " ("
         << stringifyPipelineScheduleKind(options.kind) << ", "
         << static_cast<int64_t>(microbatches) << " micro-batches):";
  for (int chunk = static_cast<int>(stage); chunk < numChunks();
       chunk += stages) {
    remark << " chunk " << chunk << " = layers "
           << blockNames[chunkStart[chunk]] << " .. "
           << blockNames[chunkStart[chunk + 1] - 1];
    if (chunk == 0)
      remark << " + embedding";
    if (chunk == numChunks() - 1)
      remark << " + head";
    std::string share;
    llvm::raw_string_ostream(share)
        << llvm::format("%.1f of %.1f", work[chunk],
                        std::accumulate(work.begin(), work.end(), 0.0));
    remark << " (" << share << " per micro-batch)";
  }
  remark << "; order: "
         << formatPipelineSteps(pipelineSchedule(options, stage), options);
}

} // namespace

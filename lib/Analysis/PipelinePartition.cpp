//===- PipelinePartition.cpp - A step split into pipeline chunks ----------===//

#include "lethe/Analysis/PipelinePartition.h"
#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <limits>
#include <set>
#include <tuple>

using namespace mlir;
using namespace lethe;

/// The layer a scope belongs to: the prefix up to its first all-digit
/// component (`transformer.h.3.attn` -> `transformer.h.3`), or empty.
static StringRef layerKey(StringRef scope) {
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

FailureOr<PipelinePartition>
PipelinePartition::build(func::FuncOp func, const PipelineOptions &options) {
  PipelinePartition result;
  result.options = options;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (failed(result.classify(func)) || failed(result.partition(func)))
    return failure();
  result.assignChunks();
  result.deferCrossStageSums(ret);
  result.collectMessages(ret);
  return result;
}

FailureOr<SmallVector<PipelinePartition::StagePlan>>
PipelinePartition::planTransfers(func::FuncOp func) const {
  int stages = options.stages;
  int64_t microbatches = options.microbatches;
  // Every stage's program must agree with every other's on the order of
  // their transfers.
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
  std::string problem = checkPipelineCommunication(comm);
  if (!problem.empty())
    return emitError(func.getLoc())
           << "the transfers between pipeline stages of this step "
              "cannot be ordered consistently: "
           << problem;
  return plans;
}

LogicalResult PipelinePartition::classify(func::FuncOp func) {
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
      kind = CollectiveOp::getOperationName();
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

LogicalResult PipelinePartition::partition(func::FuncOp func) {
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

void PipelinePartition::assignChunks() {
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

void PipelinePartition::deferCrossStageSums(func::ReturnOp ret) {
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

void PipelinePartition::collectMessages(func::ReturnOp ret) {
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

void PipelinePartition::planSends(StagePlan &plan, int s) const {
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

void PipelinePartition::planReceives(StagePlan &plan, int s,
                                     ArrayRef<StagePlan> senders) const {
  // NCCL matches a pair's sends and receives in order: a message is
  // received when first needed, together with every message its sender
  // sent before it on the pair (received early, held until needed).
  std::map<int, SmallVector<std::pair<int, int>>> pending; // by sender
  for (int sender = 0; sender < options.stages; ++sender)
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

//===- Materialize.cpp - Decisions to an explicit program -----------------===//
//
// Reads the plan lethe-plan left on the producing ops as the schedule the
// planner simulated (readScheduledPlan, PlanAttributes.h: nodes named by
// their `lethe.node_id`, read under the planner's own options; nothing is
// re-planned, and only decisions the IR leaves unplaced are placed) and
// writes that schedule out as IR, op for op:
// - graph nodes are cloned in the schedule's order, reading the current
//   version of every value (a prefetched or recomputed one after restore);
// - a run of re-run nodes before a restore point becomes one
//   `lethe.recompute` region yielding what later ops read;
// - copies become `lethe.offload` / `lethe.prefetch`, their device and
//   host buffers freed by `lethe.release`;
// - every schedule dependence on another stream becomes an awaited
//   timepoint: a copy's own, a comm barrier after a collective, or a
//   compute barrier just before a copy or collective.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanAttributes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Simulator/Schedule.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Remarks.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace lethe {
#define GEN_PASS_DEF_MATERIALIZE
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

struct Counts {
  unsigned regions = 0, rerun = 0, offloads = 0, prefetches = 0, releases = 0;
  int64_t offloadedBytes = 0;
};

class Materializer {
public:
  /// Writes `schedule` (of `graph`, built from `func`) over `func`'s body,
  /// or, with `into` (the empty entry block of a function of `func`'s
  /// signature), into that block, leaving `func` as it is.
  Materializer(func::FuncOp func, const TrainingGraph &graph,
               const Schedule &schedule, Block *into = nullptr)
      : func(func), graph(graph), schedule(schedule), into(into),
        builder(func.getContext()), currentLoc(func.getLoc()) {}

  LogicalResult run(Counts &counts);

private:
  /// Timepoints `index` waits for (deps on other streams), emitting the
  /// barriers and prefetch awaits they need before the current point.
  SmallVector<Value> dependences(OpIndex index, Stream stream,
                                 ArrayRef<OpIndex> skip = {});
  /// Ends the prefetch of `buffer`: with `forward`, awaits it on compute and
  /// forwards the device value; in any case frees the host copy.
  void awaitPrefetch(BufferId buffer, bool forward = true);
  Value join(ArrayRef<Value> timepoints);
  void awaitOn(Stream stream, ArrayRef<Value> timepoints);
  Operation *cloneNode(NodeId node, OpIndex index);
  void release(BufferId buffer, OpIndex byOp);
  void emitChain(OpIndex first, OpIndex last);
  void setStream(Operation *op, Stream stream) {
    LetheDialect::StreamAttrHelper(op->getContext())
        .setAttr(op, StreamAttr::get(op->getContext(), stream));
  }
  Location loc() const { return currentLoc; }

  func::FuncOp func;
  const TrainingGraph &graph;
  const Schedule &schedule;
  Block *into;
  OpBuilder builder;
  /// New ops take the location of the node they serve (the node run, or
  /// the producer of the storage copied or released).
  Location currentLoc;
  Counts *counts = nullptr;

  /// The IR value of every graph value now (its latest version).
  std::vector<Value> current;
  /// In-place results of each storage (`aten.add_`): the storage itself
  /// under another name, restored with it.
  DenseMap<ValueId, SmallVector<ValueId, 1>> inPlaceAliases;
  void restore(ValueId storage, Value value) {
    current[storage] = value;
    for (ValueId alias : inPlaceAliases.lookup(storage))
      if (current[alias] && current[alias].getType() == value.getType())
        current[alias] = value;
  }
  /// The IR value holding each buffer, to release it, and back.
  std::vector<Value> bufferValue;
  DenseMap<Value, BufferId> bufferOfValue;
  /// A timepoint reached when op i is done (copies, collectives).
  std::vector<Value> opDone;
  /// Ops on other streams that read each buffer (their timepoints).
  std::vector<SmallVector<OpIndex, 2>> foreignReaders;
  /// Prefetched buffers not yet awaited: the prefetch op; and the host
  /// buffer to free once it is.
  DenseMap<BufferId, OpIndex> pendingPrefetch;
  /// The host value of each offloaded storage.
  DenseMap<ValueId, Value> hostOf;
  DenseMap<ValueId, BufferId> hostBufferOf;
  DenseSet<Value> released;
};

} // namespace

Value Materializer::join(ArrayRef<Value> timepoints) {
  if (timepoints.size() == 1)
    return timepoints.front();
  return JoinOp::create(builder, loc(), timepoints).getResult();
}

void Materializer::awaitOn(Stream stream, ArrayRef<Value> timepoints) {
  if (timepoints.empty())
    return;
  auto await =
      AwaitOp::create(builder, loc(), TypeRange{}, timepoints, ValueRange{});
  if (stream != Stream::Compute)
    setStream(await, stream);
}

void Materializer::awaitPrefetch(BufferId buffer, bool forward) {
  auto it = pendingPrefetch.find(buffer);
  if (it == pendingPrefetch.end())
    return;
  OpIndex prefetch = it->second;
  pendingPrefetch.erase(it);
  ValueId storage = schedule.buffers[buffer].storage;
  if (forward) {
    Value device = bufferValue[buffer];
    auto await = AwaitOp::create(builder, loc(), TypeRange{device.getType()},
                                 ValueRange{opDone[prefetch]}, device);
    Value forwarded = await.getResult(0);
    bufferValue[buffer] = forwarded;
    bufferOfValue[forwarded] = buffer;
    if (current[storage] == device)
      restore(storage, forwarded);
  }
  // The host copy is not needed once the prefetch is done.
  if (hostBufferOf.count(storage)) {
    ReleaseOp::create(builder, loc(), hostOf[storage], opDone[prefetch]);
    released.insert(hostOf[storage]);
    ++counts->releases;
  }
}

SmallVector<Value> Materializer::dependences(OpIndex index, Stream stream,
                                             ArrayRef<OpIndex> skip) {
  SmallVector<Value> timepoints;
  Value computeBarrier;
  for (OpIndex dep : schedule.ops[index].deps) {
    if (llvm::is_contained(skip, dep))
      continue;
    const ScheduleOp &other = schedule.ops[dep];
    if (other.stream == stream)
      continue;
    if (other.kind == ScheduleOpKind::Prefetch && stream == Stream::Compute) {
      for (BufferId buffer : other.allocs)
        awaitPrefetch(buffer);
      continue;
    }
    Value timepoint = opDone[dep];
    if (!timepoint) {
      // A compute op another stream waits for: a barrier just before.
      if (!computeBarrier)
        computeBarrier = BarrierOp::create(builder, loc()).getResult();
      timepoint = computeBarrier;
    }
    if (!llvm::is_contained(timepoints, timepoint))
      timepoints.push_back(timepoint);
  }
  return timepoints;
}

Operation *Materializer::cloneNode(NodeId node, OpIndex index) {
  const GraphNode &info = graph.getNode(node);
  Operation *source = info.irOp;
  // The node's op made again from its fields, as Operation::clone makes it,
  // on the current versions of its operands (the graph's, one per operand),
  // without the IRMapping a clone fills (two maps of at least 64 buckets
  // per node). Graph nodes have no regions or successors.
  assert(source->getNumRegions() == 0 && source->getNumSuccessors() == 0 &&
         source->getNumOperands() == info.operands.size() &&
         "a graph node is a plain op");
  SmallVector<Value, 4> operands;
  operands.reserve(info.operands.size());
  for (ValueId value : info.operands)
    operands.push_back(current[value]);
  // The plan's attributes go in one new dictionary, and only where the node
  // has them: each removeAttr copied the op's attributes (~1% of a `lethe
  // plan` at 100k ops).
  StringRef decisionsName = LetheDialect::DecisionsAttrHelper::getNameStr();
  StringRef placementName = LetheDialect::PlacementAttrHelper::getNameStr();
  DictionaryAttr attributes = source->getRawDictionaryAttrs();
  if (attributes.contains(decisionsName) ||
      attributes.contains(placementName)) {
    NamedAttrList kept(attributes);
    kept.erase(decisionsName);
    kept.erase(placementName);
    attributes = kept.getDictionary(source->getContext());
  }
  Operation *clone = builder.insert(Operation::create(
      source->getLoc(), source->getName(), source->getResultTypes(), operands,
      attributes, source->getPropertiesStorage(), /*successors=*/{},
      /*numRegions=*/0));
  const ScheduleOp &op = schedule.ops[index];
  for (BufferId buffer : op.allocs) {
    ValueId storage = schedule.buffers[buffer].storage;
    const GraphValue &value = graph.getValue(storage);
    bufferValue[buffer] = clone->getResult(value.resultIndex);
    bufferOfValue[bufferValue[buffer]] = buffer;
  }
  // Results the schedule throws away at once do not replace the values
  // they re-create; everything else becomes the current version.
  for (auto [result, value] : llvm::zip(clone->getResults(), info.results)) {
    bool thrownAway = false;
    for (BufferId buffer : op.allocs)
      if (schedule.buffers[buffer].storage == value &&
          llvm::is_contained(op.frees, buffer) &&
          op.kind == ScheduleOpKind::Recompute)
        thrownAway = true;
    if (!thrownAway)
      current[value] = result;
  }
  for (BufferId buffer : op.reads)
    if (op.stream != Stream::Compute)
      foreignReaders[buffer].push_back(index);
  return clone;
}

void Materializer::release(BufferId buffer, OpIndex byOp) {
  // Read only on other streams: the host copy goes now, unforwarded.
  awaitPrefetch(buffer, /*forward=*/false);
  SmallVector<Value> timepoints;
  for (OpIndex reader : foreignReaders[buffer])
    if (opDone[reader] && !llvm::is_contained(timepoints, opDone[reader]))
      timepoints.push_back(opDone[reader]);
  Value value = bufferValue[buffer];
  Value await = timepoints.empty() ? Value() : join(timepoints);
  ReleaseOp::create(builder, loc(), value, await);
  released.insert(value);
  ++counts->releases;
}

void Materializer::emitChain(OpIndex first, OpIndex last) {
  ArrayRef<ScheduleOp> ops = schedule.ops;
  SmallVector<OpIndex> members;
  for (OpIndex index = first; index <= last; ++index)
    members.push_back(index);
  // What the chain waits for (prefetched inputs), before the region.
  SmallVector<Value> timepoints;
  for (OpIndex index : members)
    for (Value timepoint : dependences(index, Stream::Compute, members))
      if (!llvm::is_contained(timepoints, timepoint))
        timepoints.push_back(timepoint);
  awaitOn(Stream::Compute, timepoints);

  // Build the body in a detached block; the op's result types follow from
  // what escapes it.
  OpBuilder::InsertPoint outer = builder.saveInsertionPoint();
  auto *body = new Block();
  builder.setInsertionPointToEnd(body);
  SmallVector<std::pair<ValueId, Value>> produced;
  // Results that are no tensor (`none`: an attention op's absent RNG state)
  // hold no storage and never leave the region: later readers keep the
  // value the original node produced, which still dominates them.
  SmallVector<std::pair<ValueId, Value>> untyped;
  for (OpIndex index : members)
    for (ValueId value : graph.getNode(ops[index].node).results)
      if (Value before = current[value];
          before && !isa<RankedTensorType>(before.getType()))
        untyped.push_back({value, before});
  for (OpIndex index : members) {
    Operation *clone = cloneNode(ops[index].node, index);
    for (auto [result, value] :
         llvm::zip(clone->getResults(), graph.getNode(ops[index].node).results))
      if (current[value] == result)
        produced.push_back({value, result});
    for (BufferId buffer : ops[index].frees)
      release(buffer, index);
    ++counts->rerun;
  }
  // Yield every re-created value whose storage is still live.
  SmallVector<Value> yielded;
  SmallVector<ValueId> yieldedIds;
  for (auto [value, result] : produced) {
    if (!isa<RankedTensorType>(result.getType()))
      continue;
    Value storage = current[graph.getValue(value).storage];
    if (released.contains(result) || (storage && released.contains(storage)))
      continue;
    yielded.push_back(result);
    yieldedIds.push_back(value);
  }
  for (auto [value, before] : untyped)
    current[value] = before;
  YieldOp::create(builder, loc(), yielded);
  builder.restoreInsertionPoint(outer);
  auto recompute =
      RecomputeOp::create(builder, loc(), ValueRange(yielded).getTypes());
  recompute.getBody().push_back(body);
  ++counts->regions;
  for (auto [inner, outerValue, value] :
       llvm::zip(yielded, recompute.getResults(), yieldedIds)) {
    current[value] = outerValue;
    auto it = bufferOfValue.find(inner);
    if (it != bufferOfValue.end()) {
      bufferValue[it->second] = outerValue;
      bufferOfValue[outerValue] = it->second;
    }
  }
}

LogicalResult Materializer::run(Counts &counts) {
  this->counts = &counts;
  Block &block = func.getBody().front();
  Operation *terminator = block.getTerminator();
  SmallVector<Operation *> original;
  if (!into)
    for (Operation &op : block.without_terminator())
      original.push_back(&op);

  current.assign(graph.numValues(), Value());
  for (auto [id, value] : llvm::enumerate(graph.getValues()))
    if (graph.isAlias(id) && value.producer >= 0 &&
        graph.getNode(value.producer).hasFlag(NodeFlagMutates))
      inPlaceAliases[value.storage].push_back(id);
  // Inputs are the function's arguments (TrainingGraph::fromFunction).
  for (auto [id, value] : llvm::enumerate(graph.getValues()))
    if (value.isInput())
      current[id] = into ? into->getArgument(
                               cast<BlockArgument>(value.irValue).getArgNumber())
                         : value.irValue;
  bufferValue.assign(schedule.buffers.size(), Value());
  opDone.assign(schedule.ops.size(), Value());
  foreignReaders.assign(schedule.buffers.size(), {});
  if (into)
    builder.setInsertionPointToEnd(into);
  else
    builder.setInsertionPoint(terminator);

  ArrayRef<ScheduleOp> ops = schedule.ops;
  for (OpIndex index = 0, e = ops.size(); index < e; ++index) {
    const ScheduleOp &op = ops[index];
    NodeId anchor = op.node >= 0      ? op.node
                    : op.storage >= 0 ? graph.getValue(op.storage).producer
                                      : -1;
    if (anchor >= 0)
      currentLoc = graph.getNode(anchor).irOp->getLoc();
    switch (op.kind) {
    case ScheduleOpKind::Recompute: {
      OpIndex last = index;
      while (last + 1 < e && ops[last + 1].kind == ScheduleOpKind::Recompute)
        ++last;
      emitChain(index, last);
      index = last;
      continue;
    }
    case ScheduleOpKind::Node: {
      awaitOn(op.stream, dependences(index, op.stream));
      Operation *clone = cloneNode(op.node, index);
      if (op.stream != getOpStream(clone))
        setStream(clone, op.stream);
      if (op.stream != Stream::Compute) {
        auto barrier = BarrierOp::create(builder, loc());
        setStream(barrier, op.stream);
        opDone[index] = barrier.getResult();
      }
      break;
    }
    case ScheduleOpKind::Offload: {
      SmallVector<Value> timepoints = dependences(index, op.stream);
      Value source = current[op.storage];
      // An activation is a ranked tensor: TrainingGraph::fromFunction
      // refuses other shaped values (a graph of memrefs, found by the MLIR
      // fuzzer) and scalars occupy no memory to offload.
      auto offload = OffloadOp::create(
          builder, loc(),
          HostTensorType::get(cast<RankedTensorType>(source.getType())),
          TimepointType::get(builder.getContext()), source,
          timepoints.empty() ? Value() : join(timepoints));
      opDone[index] = offload.getDone();
      hostOf[op.storage] = offload.getResult();
      for (BufferId buffer : op.allocs) {
        bufferValue[buffer] = offload.getResult();
        hostBufferOf[op.storage] = buffer;
      }
      for (BufferId buffer : op.reads)
        foreignReaders[buffer].push_back(index);
      ++counts.offloads;
      counts.offloadedBytes += op.copyBytes;
      break;
    }
    case ScheduleOpKind::Release: {
      SmallVector<Value> timepoints = dependences(index, op.stream);
      for (BufferId buffer : op.frees) {
        Value value = bufferValue[buffer];
        ReleaseOp::create(builder, loc(), value,
                          timepoints.empty() ? Value() : join(timepoints));
        released.insert(value);
        ++counts.releases;
        if (current[op.storage] == value)
          current[op.storage] = Value();
      }
      continue; // its frees are done
    }
    case ScheduleOpKind::Prefetch: {
      SmallVector<Value> timepoints = dependences(index, op.stream);
      Value host = hostOf.lookup(op.storage);
      if (!host)
        return func.emitError("lethe-materialize: value ")
               << describeProgramValue(graph.getValue(op.storage).irValue)
               << " is prefetched before it is offloaded";
      auto prefetch = PrefetchOp::create(
          builder, loc(), cast<HostTensorType>(host.getType()).getTensorType(),
          TimepointType::get(builder.getContext()), host,
          timepoints.empty() ? Value() : join(timepoints));
      opDone[index] = prefetch.getDone();
      for (BufferId buffer : op.allocs) {
        bufferValue[buffer] = prefetch.getResult();
        pendingPrefetch[buffer] = index;
      }
      restore(op.storage, prefetch.getResult());
      ++counts.prefetches;
      continue; // the host buffer is freed once the prefetch is awaited
    }
    }
    for (BufferId buffer : op.frees)
      release(buffer, index);
  }

  // The step ends when every stream is done.
  currentLoc = terminator->getLoc();
  SmallVector<Value> last;
  std::array<Value, kNumStreams> lastOn = {};
  for (auto [index, op] : llvm::enumerate(ops))
    if (opDone[index])
      lastOn[static_cast<unsigned>(op.stream)] = opDone[index];
  for (Value timepoint : lastOn)
    if (timepoint)
      last.push_back(timepoint);
  awaitOn(Stream::Compute, last);
  for (auto [buffer, prefetch] : llvm::to_vector(pendingPrefetch))
    awaitPrefetch(buffer);

  SmallVector<Value> results;
  for (auto [operand, output] :
       llvm::zip(terminator->getOperands(), graph.getOutputs()))
    results.push_back(current[output]);
  if (into) {
    builder.clone(*terminator)->setOperands(results);
    return success();
  }
  terminator->setOperands(results);
  for (Operation *op : llvm::reverse(original))
    op->erase();
  return success();
}

/// A module as `func`'s with `func` alone, the function's body one empty
/// block with its arguments (and their locations).
static std::pair<OwningOpRef<ModuleOp>, func::FuncOp>
emptyProgram(func::FuncOp func) {
  auto module = func->getParentOfType<ModuleOp>();
  OpBuilder builder(func.getContext());
  OwningOpRef<ModuleOp> program =
      cast<ModuleOp>(builder.cloneWithoutRegions(*module));
  program->getBodyRegion().push_back(new Block());
  builder.setInsertionPointToEnd(program->getBody());
  func::FuncOp into;
  for (Operation &op : *module.getBody()) {
    auto other = dyn_cast<func::FuncOp>(op);
    if (!other) {
      builder.clone(op);
    } else if (other.getSymName() == func.getSymName()) {
      into = cast<func::FuncOp>(builder.cloneWithoutRegions(op));
      Block *entry = new Block();
      for (BlockArgument arg : func.getArguments())
        entry->addArgument(arg.getType(), arg.getLoc());
      into.getBody().push_back(entry);
    }
  }
  return {std::move(program), into};
}

OwningOpRef<ModuleOp> lethe::materializePlannedStep(func::FuncOp func,
                                                    const PlannedStep &step,
                                                    bool budgetGiven) {
  // What readScheduledPlan reads back from what writePlannedStep writes:
  // the analysis under planReadOptions (the plan's replay_rng), one
  // decision per activation in its order (retain where the plan has none).
  // The planner's own analysis is that one where its offload threshold
  // excluded nothing (the only other option it reads; ~2.5% of a `lethe
  // plan` at 100k ops).
  std::optional<ActivationAnalysis> built;
  const ActivationAnalysis *planned = step.planned.of(step.graph);
  if (!planned || planned->isOffloadThresholdApplied())
    planned = &built.emplace(step.graph,
                             planReadOptions(step.options.replayRng));
  const ActivationAnalysis &analysis = *planned;
  ArrayRef<ActivationInfo> acts = analysis.getActivations();
  std::vector<ActivationDecision> decisions(acts.size());
  for (auto [index, act] : llvm::enumerate(acts))
    decisions[index].value = act.storage;
  for (const ActivationDecision &d : step.plan.decisions) {
    int32_t a = analysis.activationIndex(d.value);
    if (a < 0 || acts[a].storage != d.value)
      return nullptr;
    bool placed = d.decision == Decision::Retain ||
                  (d.firstBackwardUse >= 0 &&
                   (d.decision != Decision::Offload ||
                    (d.releaseAfter >= 0 && d.prefetchAfter >= 0)));
    if (!placed)
      return nullptr;
    // As much of the decision as the IR holds (PlacementAttr).
    ActivationDecision &read = decisions[a];
    read = ActivationDecision();
    read.value = d.value;
    read.decision = d.decision;
    if (d.decision == Decision::Retain)
      continue;
    read.firstBackwardUse = d.firstBackwardUse;
    read.recomputeNodes = d.recomputeNodes;
    if (d.decision == Decision::Offload) {
      read.releaseAfter = d.releaseAfter;
      read.prefetchAfter = d.prefetchAfter;
    }
  }
  llvm::Expected<Schedule> schedule = buildSchedule(analysis, decisions);
  if (!schedule) {
    llvm::consumeError(schedule.takeError());
    return nullptr;
  }
  auto [program, into] = emptyProgram(func);
  writePlanSummary(into, step, budgetGiven);
  Counts counts;
  if (failed(Materializer(func, step.graph, *schedule, &into.getBody().front())
                 .run(counts)))
    return nullptr;
  return std::move(program);
}

namespace {
struct MaterializePass : public lethe::impl::MaterializeBase<MaterializePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<DeviceProfile> profile;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FailureOr<TrainingGraph> graph = TrainingGraph::fromFunction(func);
      if (failed(graph))
        return signalPassFailure();
      FailureOr<ScheduledPlan> plan = readScheduledPlan(
          func, *graph,
          [&]() -> const DeviceProfile * {
            if (!profile) {
              llvm::Expected<DeviceProfile> loaded =
                  DeviceProfile::load(device);
              if (!loaded) {
                module.emitError("lethe-materialize: ")
                    << toString(loaded.takeError());
                return nullptr;
              }
              profile = std::move(*loaded);
            }
            return &*profile;
          },
          [&](const llvm::Twine &message) {
            func.emitError("lethe-materialize: ") << message;
          });
      if (failed(plan))
        return signalPassFailure();
      Counts counts;
      if (failed(Materializer(func, *graph, plan->schedule).run(counts)))
        return signalPassFailure();
      // An analysis remark (MLIR's remark engine: shown with
      // --remarks-filter=lethe-materialize); the counts are statistics too.
      remark::analysis(func.getLoc(), remark::RemarkOpts::name("materialized")
                                          .category(getArgument())
                                          .function(func.getSymName()))
          << llvm::formatv("materialized {0} decisions: {1} recompute "
                           "regions re-running {2} nodes, {3} offloads, {4} "
                           "prefetches, {5} releases",
                           plan->numPlanned, counts.regions, counts.rerun,
                           counts.offloads, counts.prefetches, counts.releases)
                 .str();
      numDecisions += plan->numPlanned;
      numRecomputeRegions += counts.regions;
      numRerunNodes += counts.rerun;
      numOffloads += counts.offloads;
      numPrefetches += counts.prefetches;
      offloadedBytes += counts.offloadedBytes;
      numReleases += counts.releases;
    }
  }
};
} // namespace

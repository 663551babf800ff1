//===- ScheduleBuilder.cpp - A placed plan written out as a schedule ------===//
//
// Program order: for every node i, first the recompute chain restored
// before i (the union of its targets' nodes, in program order), then node i,
// then the D2H copies issued after i, the releases after i and the
// prefetches issued after i. Buffers are freed when the last op reading them
// ends; an offloaded storage's device buffer by its release instead.
//
// The memory walk (walkMemory's figures) can be read off the buffers' lives
// as they are written, without a pass over the ops' allocations and frees.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Lifetimes.h"
#include "lethe/Planner/Placement.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Compiler.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <tuple>

using namespace lethe;

static llvm::Error buildError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Sorts `list` by its entries' element I (a node), keeping the order of
/// entries with equal ones: a counting sort, linear where llvm::sort of
/// the builder's lists was a twentieth of building. Where that is the
/// entries' own order (their elements compared in turn: the lists'), or
/// with a key that is not a node (checkPlacement and the build report
/// it), and where a few entries meet many nodes, llvm::sort instead.
template <size_t I, typename Entry>
static void stableSortByKey(std::vector<Entry> &list, size_t numNodes,
                            std::vector<int32_t> &count,
                            std::vector<Entry> &scratch) {
  auto inNodes = [&](const Entry &entry) {
    return std::get<I>(entry) >= 0 &&
           static_cast<size_t>(std::get<I>(entry)) < numNodes;
  };
  if (list.size() * 8 < numNodes || !llvm::all_of(list, inNodes)) {
    llvm::sort(list);
    return;
  }
  count.assign(numNodes + 1, 0);
  for (const Entry &entry : list)
    ++count[std::get<I>(entry) + 1];
  for (size_t k = 1; k <= numNodes; ++k)
    count[k] += count[k - 1];
  scratch.resize(list.size());
  for (const Entry &entry : list)
    scratch[count[std::get<I>(entry)]++] = entry;
  list.swap(scratch);
}

namespace {
class Builder {
public:
  Builder(const ActivationAnalysis &analysis,
          llvm::ArrayRef<ActivationDecision> decisions, Schedule &&storage)
      : analysis(analysis), graph(analysis.getGraph()), decisions(decisions),
        schedule(std::move(storage)) {
    // The old ops stay, to be overwritten (begin); the buffers are plain.
    schedule.buffers.clear();
  }

  /// `walk`, where given, gets walkMemory's figures of the schedule.
  llvm::Expected<Schedule> build(MemoryWalk *walk = nullptr);

private:
  llvm::Error checkPlacement();
  /// Makes `op`, the last op, read the current buffers of `operands`.
  /// Inlined (its calls were a tenth of building), its error apart.
  LLVM_ATTRIBUTE_ALWAYS_INLINE llvm::Error
  addReads(ScheduleOp &op, llvm::ArrayRef<int32_t> operands, NodeId node,
           bool recompute);
  LLVM_ATTRIBUTE_NOINLINE llvm::Error
  droppedReadError(NodeId node, bool recompute, int32_t s) const;
  /// A new last op, built in place: an op built apart and then moved in
  /// was read back whole right after its fields were written, a store
  /// the CPU could not forward (a stall per op). The reference is valid
  /// until the next op begins. Inlined, as newBuffer: called once or more
  /// per op, the calls were a tenth of building.
  LLVM_ATTRIBUTE_ALWAYS_INLINE ScheduleOp &begin(ScheduleOpKind kind,
                                                 Stream stream) {
    ScheduleOp &op = numOps < schedule.ops.size()
                         ? resetOp(schedule.ops[numOps])
                         : schedule.ops.emplace_back();
    ++numOps;
    op.kind = kind;
    op.stream = stream;
    opStream.push_back(stream);
    return op;
  }
  /// An op of the storage made as new, keeping its vectors' allocations.
  LLVM_ATTRIBUTE_ALWAYS_INLINE static ScheduleOp &resetOp(ScheduleOp &op) {
    op.node = -1;
    op.storage = -1;
    op.durationUs = 0.0;
    op.kernel = KernelClass::None;
    op.copyBytes = 0;
    op.deps.clear();
    op.allocs.clear();
    op.frees.clear();
    op.reads.clear();
    return op;
  }
  /// The index of the last op, now built (after its reads: a node op
  /// depends on the compute op before it).
  OpIndex finish() {
    OpIndex index = lastIndex();
    if (opStream[index] == Stream::Compute)
      lastCompute = index;
    return index;
  }
  OpIndex lastIndex() const { return static_cast<OpIndex>(numOps) - 1; }
  /// A new buffer of storage `s` (host: of its offloaded copy).
  LLVM_ATTRIBUTE_ALWAYS_INLINE BufferId newBuffer(int32_t s,
                                                  BufferOrigin origin,
                                                  OpIndex producer) {
    const ActivationAnalysis::StorageBrief &brief = analysis.getStorageBrief(s);
    BufferId id = static_cast<BufferId>(schedule.buffers.size());
    schedule.buffers.push_back({brief.storage, brief.bytes, origin});
    // Buffers of returned storages live to the end (a re-created one is
    // only a temporary), host buffers until their prefetch.
    bool freedAtLastRead = origin != BufferOrigin::Host &&
                           (!brief.isOutput ||
                            origin == BufferOrigin::Recomputed);
    buffers.push_back({producer, producer, /*freedBy=*/-1, freedAtLastRead});
    return id;
  }
  /// Freed by the last op (a release or a prefetch), not by its last
  /// reader.
  void freeExplicitly(BufferId buffer) {
    buffers[buffer].freedAtLastRead = false;
    buffers[buffer].freedBy = lastIndex();
  }
  /// Frees each buffer freed by its last reader there, and gives `walk`
  /// (where given) the memory along program order: once every buffer's
  /// life is known.
  void freeAndWalk(MemoryWalk *walk);

  const ActivationAnalysis &analysis;
  const TrainingGraph &graph;
  llvm::ArrayRef<ActivationDecision> decisions;
  Schedule schedule;
  /// Ops begun so far: schedule.ops holds more while a recycled schedule's
  /// ops are overwritten.
  size_t numOps = 0;
  /// Current buffer of every storage (by storage index; buffer -1 when
  /// dropped), with its producer and the producer's stream: a read needs
  /// all three, and loading them through the buffer and then its op was a
  /// chain of dependent loads, a quarter of building (Llama-8l at 40%).
  struct Current {
    BufferId buffer;
    OpIndex producer;
    Stream stream;
  };
  std::vector<Current> current;
  /// Makes `buffer`, made by the last op, storage s's current buffer.
  void setCurrent(int32_t s, BufferId buffer) {
    current[s] = {buffer, lastIndex(), opStream[lastIndex()]};
  }
  void dropCurrent(int32_t s) { current[s].buffer = -1; }
  /// What the walk keeps of each buffer, in one array (one append a
  /// buffer).
  struct BufferState {
    OpIndex producer;
    /// The last op reading it so far (its producer at first).
    OpIndex lastReader;
    /// The op that frees it explicitly (freeExplicitly), or -1.
    OpIndex freedBy;
    /// Freed when its last reader ends.
    bool freedAtLastRead;
  };
  std::vector<BufferState> buffers;
  /// The stream of each op, to tell cross-stream reads without touching
  /// the ops themselves.
  std::vector<Stream> opStream;
  OpIndex lastCompute = -1;
  /// A listed activation's fields the lists' work reads (build).
  struct Listed {
    ValueId storage;
    int32_t s;
    int64_t bytes;
    llvm::ArrayRef<NodeId> chain;
    bool recompute;
  };
  /// Pinned host bytes: they change only at copies (an offload allocates,
  /// its prefetch frees), so the walk's host figure is kept as they are
  /// written.
  int64_t hostNow = 0, hostPeakBytes = 0;
};
} // namespace

llvm::Error Builder::checkPlacement() {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  // Messages name values and nodes by their stable identities.
  auto value = [&](ValueId v) {
    return v >= 0 && static_cast<size_t>(v) < graph.numValues()
               ? describeValue(graph, v)
               : "%" + std::to_string(v);
  };
  auto node = [&](NodeId n) { return describeNode(graph, n); };
  if (decisions.size() != acts.size())
    return buildError(llvm::formatv(
        "expected one decision per activation ({0}), got {1}", acts.size(),
        decisions.size()));
  const NodeId numNodes = static_cast<NodeId>(graph.numNodes());
  // A restored checkpoint no chain reads would be a copy or a re-run whose
  // result nothing reads (nor frees, in a program).
  std::vector<Decision> requested;
  for (const ActivationDecision &d : decisions)
    requested.push_back(d.decision);
  std::vector<Decision> runs = effectiveDecisions(analysis, requested);
  for (auto [a, d] : llvm::enumerate(decisions)) {
    const ActivationInfo &act = acts[a];
    if (d.decision != runs[a])
      return buildError(llvm::formatv(
          "value {0} is a checkpoint no chain of the plan reads: it is "
          "freed after its last forward use and restoring it before {1} "
          "would make a copy nothing reads; retain it",
          value(act.storage), node(d.firstBackwardUse)));
    if (d.value != act.storage)
      return buildError(
          llvm::formatv("decision {0} is for value {1}, expected {2}", a,
                        value(d.value), value(act.storage)));
    if (d.decision == Decision::Retain)
      continue;
    if (d.firstBackwardUse <= act.lastForwardUse ||
        d.firstBackwardUse > act.firstBackwardUse)
      return buildError(llvm::formatv(
          "value {0} is restored before {1}, outside its gap (after {2}, "
          "up to {3})",
          value(act.storage), node(d.firstBackwardUse),
          node(act.lastForwardUse), node(act.firstBackwardUse)));
    if (d.decision == Decision::Recompute && !act.recomputable)
      return buildError(llvm::formatv("value {0} cannot be recomputed: {1}",
                                      value(act.storage),
                                      act.notRecomputableReason));
    if (d.decision != Decision::Offload)
      continue;
    if (!act.offloadable)
      return buildError(llvm::formatv("value {0} cannot be offloaded: {1}",
                                      value(act.storage),
                                      act.notOffloadableReason));
    if (d.releaseAfter < act.lastForwardUse ||
        d.releaseAfter >= d.firstBackwardUse || d.releaseAfter >= numNodes)
      return buildError(llvm::formatv(
          "value {0} is released after {1}; expected a node from its last "
          "forward use ({2}) to before its restore point ({3})",
          value(act.storage), node(d.releaseAfter), node(act.lastForwardUse),
          node(d.firstBackwardUse)));
    if (d.prefetchAfter < d.releaseAfter ||
        d.prefetchAfter >= d.firstBackwardUse)
      return buildError(llvm::formatv(
          "value {0} is prefetched after {1}; expected a node from its "
          "release ({2}) to before its restore point ({3})",
          value(act.storage), node(d.prefetchAfter), node(d.releaseAfter),
          node(d.firstBackwardUse)));
  }
  return llvm::Error::success();
}

llvm::Error Builder::droppedReadError(NodeId node, bool recompute,
                                      int32_t s) const {
  return buildError(llvm::formatv(
      "{0} of {1} reads value {2} while it is dropped (not restored "
      "before this point)",
      recompute ? "the re-run" : "the run", describeNode(graph, node),
      describeValue(graph, analysis.getStorages()[s].storage)));
}

llvm::Error Builder::addReads(ScheduleOp &op, llvm::ArrayRef<int32_t> operands,
                              NodeId node, bool recompute) {
  for (int32_t s : operands) {
    const Current now = current[s];
    BufferId buffer = now.buffer;
    if (buffer < 0)
      return droppedReadError(node, recompute, s);
    if (llvm::is_contained(op.reads, buffer))
      continue;
    op.reads.push_back(buffer);
    // The op being built is the last.
    buffers[buffer].lastReader = lastIndex();
    OpIndex producer = now.producer;
    if (producer >= 0 && now.stream != op.stream &&
        !llvm::is_contained(op.deps, producer))
      op.deps.push_back(producer);
  }
  return llvm::Error::success();
}

void Builder::freeAndWalk(MemoryWalk *walkOut) {
  // One pass over the buffers for both. The frees: a counting sort by the
  // op that frees each buffer, so that appending to the ops in program
  // order touches them sequentially instead of at random. The walk: each
  // device buffer adds its bytes from the op that allocates it to the op
  // that frees it, both included (walkMemory's "allocations, then frees"),
  // a difference array summed in place in program order. (The host's
  // figure was kept as the copies were written.)
  std::vector<int32_t> freeStart(numOps + 1, 0);
  MemoryWalk walk;
  if (walkOut)
    walk.deviceAtOp.assign(numOps, 0);
  int64_t *deviceAtOp = walk.deviceAtOp.data();
  for (auto [id, state] : llvm::enumerate(buffers)) {
    if (state.freedAtLastRead)
      ++freeStart[state.lastReader];
    const ScheduleBuffer &buffer = schedule.buffers[id];
    if (!walkOut || buffer.isHost())
      continue;
    deviceAtOp[state.producer] += buffer.bytes;
    OpIndex freedBy = state.freedAtLastRead ? state.lastReader : state.freedBy;
    if (freedBy >= 0 && static_cast<size_t>(freedBy) + 1 < numOps)
      deviceAtOp[freedBy + 1] -= buffer.bytes;
  }
  // The counts, summed: where each op's frees end; filled backwards from
  // there (buffers in reverse, each op's in increasing order), they become
  // where each op's frees begin.
  for (size_t k = 1; k <= numOps; ++k)
    freeStart[k] += freeStart[k - 1];
  std::vector<BufferId> freed(freeStart[numOps]);
  for (size_t id = buffers.size(); id-- > 0;)
    if (buffers[id].freedAtLastRead)
      freed[--freeStart[buffers[id].lastReader]] = static_cast<BufferId>(id);
  // One append an op (a push_back a buffer checked the capacity each time).
  // The ops were written long before: on a large schedule (40 MB at 200k
  // ops) each is a cache miss, so the ones a few ahead are fetched early.
  constexpr size_t kFetchAhead = 8;
  ScheduleOp *ops = schedule.ops.data();
  for (size_t k = 0; k < numOps; ++k) {
    if (k + kFetchAhead < numOps)
      __builtin_prefetch(&ops[k + kFetchAhead].frees, /*rw=*/1);
    if (freeStart[k] < freeStart[k + 1])
      ops[k].frees.append(freed.begin() + freeStart[k],
                          freed.begin() + freeStart[k + 1]);
  }
  if (!walkOut)
    return;
  // The running figures in locals: as the walk's fields they were stored
  // and loaded again at every op (the stores to deviceAtOp may alias them).
  // The first op is above the initial peak: no test of peakOp in the loop.
  int64_t deviceNow = 0, peakBytes = std::numeric_limits<int64_t>::min();
  OpIndex peakOp = -1;
  for (size_t index = 0; index < numOps; ++index) {
    deviceNow += deviceAtOp[index];
    deviceAtOp[index] = deviceNow;
    if (deviceNow > peakBytes) {
      peakOp = static_cast<OpIndex>(index);
      peakBytes = deviceNow;
    }
  }
  walk.peakBytes = peakOp < 0 ? 0 : peakBytes;
  walk.peakOp = peakOp;
  walk.hostPeakBytes = hostPeakBytes;
  *walkOut = std::move(walk);
}

llvm::Expected<Schedule> Builder::build(MemoryWalk *walkOut) {
  if (llvm::Error err = checkPlacement())
    return std::move(err);
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  llvm::ArrayRef<StorageInfo> storages = analysis.getStorages();
  const size_t numNodes = graph.numNodes();
  current.assign(storages.size(), {-1, -1, Stream::Compute});

  // Per-node work lists, as (node, tie-break, activation) sorted.
  using Entry = std::tuple<NodeId, int32_t, int32_t>;
  std::vector<Entry> restoredList, offloadList, releaseList, prefetchList,
      droppedList;
  // What the lists' work reads of each listed activation, gathered here in
  // activation order: read from its ActivationInfo (248 bytes), the
  // storage index of its value and its decision at the lists' order (by
  // node, at random), the loads were a fifth of building a 200k-node
  // step. Only listed activations' entries are written or read.
  std::unique_ptr<Listed[]> listed(new Listed[acts.size()]);
  for (auto [index, d] : llvm::enumerate(decisions)) {
    int32_t a = static_cast<int32_t>(index);
    if (d.decision == Decision::Retain)
      continue;
    listed[a] = {acts[a].storage, analysis.storageIndex(acts[a].storage),
                 acts[a].bytes, d.recomputeNodes,
                 d.decision == Decision::Recompute};
    restoredList.push_back({d.firstBackwardUse, a, a});
    if (d.decision == Decision::Recompute) {
      droppedList.push_back({acts[a].lastForwardUse, a, a});
      continue;
    }
    offloadList.push_back({acts[a].contentReadyAfter, a, a});
    releaseList.push_back({d.releaseAfter, a, a});
    prefetchList.push_back({d.prefetchAfter, d.firstBackwardUse, a});
  }
  // Each list was made in activation order, the order of its ties but for
  // the prefetches' (restore point first): sorted by their nodes, keeping
  // that order.
  std::vector<Entry> scratch;
  std::vector<int32_t> count;
  for (std::vector<Entry> *list :
       {&restoredList, &offloadList, &releaseList, &droppedList})
    stableSortByKey<0>(*list, numNodes, count, scratch);
  stableSortByKey<1>(prefetchList, numNodes, count, scratch);
  stableSortByKey<0>(prefetchList, numNodes, count, scratch);
  // The activations of `list` at node i, advancing `cursor`: a view of
  // the list, not a vector made for each of the five lists at every node
  // (most nodes have none).
  auto at = [](const std::vector<Entry> &list, size_t &cursor, NodeId i) {
    size_t begin = cursor;
    while (cursor < list.size() && std::get<0>(list[cursor]) == i)
      ++cursor;
    return llvm::map_range(
        llvm::ArrayRef(list).slice(begin, cursor - begin),
        [](const Entry &entry) { return std::get<2>(entry); });
  };
  size_t restoredCursor = 0, offloadCursor = 0, releaseCursor = 0,
         prefetchCursor = 0, droppedCursor = 0;
  // Reserve for every op up front: ScheduleOp's small vectors do not move
  // without copying when the vector grows.
  size_t chainOps = 0;
  for (const ActivationDecision &d : decisions)
    chainOps += d.recomputeNodes.size();
  const size_t maxOps = numNodes + 3 * offloadList.size() + chainOps;
  // Recycled ops that would be copied to grow the array are dropped; a
  // new array has room for plans with more copies or chains than this one
  // (the next plans to be written into it: the greedy's batches add a few
  // each), 1/8 more than this one needs.
  if (schedule.ops.capacity() < maxOps) {
    schedule.ops.clear();
    schedule.ops.reserve(maxOps + maxOps / 8);
  }
  schedule.buffers.reserve(storages.size() + 2 * restoredList.size());
  opStream.reserve(maxOps);
  buffers.reserve(schedule.buffers.capacity());

  std::vector<OpIndex> offloadOp(acts.size(), -1);
  std::vector<BufferId> hostBuffer(acts.size(), -1);
  std::vector<uint8_t> inChain(numNodes, 0);
  std::vector<uint8_t> isTargetHere(storages.size(), 0);
  std::vector<NodeId> chain;

  // The first node the lists after a node's op name from their cursors on:
  // the nodes before it drop and copy nothing (most nodes) and skip them.
  auto nextListed = [&] {
    NodeId next = std::numeric_limits<NodeId>::max();
    for (auto [list, cursor] : {std::pair(&droppedList, droppedCursor),
                                std::pair(&offloadList, offloadCursor),
                                std::pair(&releaseList, releaseCursor),
                                std::pair(&prefetchList, prefetchCursor)})
      if (cursor < list->size())
        next = std::min(next, std::get<0>((*list)[cursor]));
    return next;
  };
  NodeId listedFrom = nextListed();
  // The chain re-run before node i, for the values restored there.
  auto restoreBefore = [&](NodeId i) -> llvm::Error {
    auto restoredAt = at(restoredList, restoredCursor, i);
    chain.clear();
    for (int32_t a : restoredAt) {
      if (listed[a].recompute)
        isTargetHere[listed[a].s] = 1;
      for (NodeId node : listed[a].chain) {
        if (node < 0 || node >= i)
          return buildError(llvm::formatv(
              "value {0} lists {1} to re-run before {2}",
              describeValue(graph, listed[a].storage),
              describeNode(graph, node), describeNode(graph, i)));
        if (!inChain[node]) {
          inChain[node] = 1;
          chain.push_back(node);
        }
      }
    }
    llvm::sort(chain);
    for (NodeId node : chain) {
      inChain[node] = 0;
      const ActivationAnalysis::NodeBrief &n = analysis.getNodeBrief(node);
      if (!analysis.isRecomputableNode(node))
        return buildError(llvm::formatv("{0} may not be re-run",
                                        describeNode(graph, node)));
      ScheduleOp &op = begin(ScheduleOpKind::Recompute, Stream::Compute);
      op.node = node;
      op.durationUs = std::max(0.0, n.timeUs);
      op.kernel = kernelClassOf(n.flags);
      if (llvm::Error err =
              addReads(op, analysis.operandStorages(node), node, true))
        return err;
      OpIndex index = lastIndex();
      for (int32_t s : analysis.resultStorages(node)) {
        BufferId buffer = newBuffer(s, BufferOrigin::Recomputed, index);
        op.allocs.push_back(buffer);
        // The re-created value replaces the dropped one only where it is
        // needed: a target restored here, or a forward temporary the chain
        // reads. Other results are thrown away when the op ends.
        bool keep =
            isTargetHere[s] || analysis.getStorageBrief(s).activation < 0;
        if (keep)
          setCurrent(s, buffer);
      }
      finish();
    }
    for (int32_t a : restoredAt)
      isTargetHere[listed[a].s] = 0;
    return llvm::Error::success();
  };
  for (NodeId i = 0; i < static_cast<NodeId>(numNodes); ++i) {
    // Most nodes restore nothing before them: no chain.
    if (restoredCursor < restoredList.size() &&
        std::get<0>(restoredList[restoredCursor]) == i) {
      if (llvm::Error err = restoreBefore(i))
        return std::move(err);
    }

    // Node i.
    const ActivationAnalysis::NodeBrief &n = analysis.getNodeBrief(i);
    ScheduleOp &op =
        begin(ScheduleOpKind::Node,
              n.hasFlag(NodeFlagCollective) ? Stream::Comm : Stream::Compute);
    op.node = i;
    op.durationUs = std::max(0.0, n.timeUs);
    op.kernel = kernelClassOf(n.flags);
    if (op.stream != Stream::Compute && lastCompute >= 0)
      op.deps.push_back(lastCompute);
    if (llvm::Error err = addReads(op, analysis.operandStorages(i), i, false))
      return std::move(err);
    OpIndex nodeOp = lastIndex();
    for (int32_t s : analysis.resultStorages(i)) {
      BufferId buffer = newBuffer(s, BufferOrigin::Produced, nodeOp);
      op.allocs.push_back(buffer);
      setCurrent(s, buffer);
    }
    finish();
    if (i < listedFrom)
      continue;
    // Recomputed activations are dropped after their last forward use (the
    // buffer itself is freed by that use).
    for (int32_t a : at(droppedList, droppedCursor, i))
      dropCurrent(listed[a].s);

    for (int32_t a : at(offloadList, offloadCursor, i)) {
      ScheduleOp &copy = begin(ScheduleOpKind::Offload, Stream::D2H);
      copy.storage = listed[a].storage;
      copy.copyBytes = listed[a].bytes;
      if (lastCompute >= 0)
        copy.deps.push_back(lastCompute);
      int32_t storage = listed[a].s;
      if (llvm::Error err = addReads(copy, storage, i, false))
        return std::move(err);
      OpIndex index = lastIndex();
      hostBuffer[a] = newBuffer(storage, BufferOrigin::Host, index);
      copy.allocs.push_back(hostBuffer[a]);
      hostNow += schedule.buffers[hostBuffer[a]].bytes;
      hostPeakBytes = std::max(hostPeakBytes, hostNow);
      offloadOp[a] = finish();
    }
    for (int32_t a : at(releaseList, releaseCursor, i)) {
      int32_t s = listed[a].s;
      if (offloadOp[a] < 0)
        return buildError(llvm::formatv(
            "value {0} is released after {1}, before its D2H copy is issued "
            "(after {2})",
            describeValue(graph, acts[a].storage), describeNode(graph, i),
            describeNode(graph, acts[a].contentReadyAfter)));
      ScheduleOp &release = begin(ScheduleOpKind::Release, Stream::Compute);
      release.storage = listed[a].storage;
      release.deps.push_back(offloadOp[a]);
      if (current[s].buffer < 0)
        return buildError(llvm::formatv(
            "value {0} is released after {1} but is not on the device",
            describeValue(graph, acts[a].storage), describeNode(graph, i)));
      release.frees.push_back(current[s].buffer);
      freeExplicitly(current[s].buffer);
      dropCurrent(s);
      finish();
    }
    for (int32_t a : at(prefetchList, prefetchCursor, i)) {
      int32_t s = listed[a].s;
      ScheduleOp &copy = begin(ScheduleOpKind::Prefetch, Stream::H2D);
      copy.storage = listed[a].storage;
      copy.copyBytes = listed[a].bytes;
      copy.deps.push_back(offloadOp[a]);
      if (lastCompute >= 0 && lastCompute != offloadOp[a])
        copy.deps.push_back(lastCompute);
      copy.reads.push_back(hostBuffer[a]);
      copy.frees.push_back(hostBuffer[a]);
      freeExplicitly(hostBuffer[a]);
      // After this op (the walk's "allocations, then frees").
      hostNow -= schedule.buffers[hostBuffer[a]].bytes;
      OpIndex index = lastIndex();
      BufferId buffer = newBuffer(s, BufferOrigin::Prefetched, index);
      copy.allocs.push_back(buffer);
      setCurrent(s, buffer);
      finish();
    }
    listedFrom = nextListed();
  }

  // Recycled ops past the last one are not the schedule's.
  schedule.ops.erase(schedule.ops.begin() + numOps, schedule.ops.end());

  // The transfers of one point-to-point group run together (one NCCL
  // group): what any of them reads stays live until the group's last op.
  // (Only where there are groups: the walk reads every op's GraphNode.)
  llvm::DenseMap<int64_t, OpIndex> groupEnd;
  for (auto [index, op] :
       llvm::enumerate(analysis.hasP2PGroups() ? llvm::ArrayRef(schedule.ops)
                                               : llvm::ArrayRef<ScheduleOp>()))
    if (op.kind == ScheduleOpKind::Node && graph.getNode(op.node).p2pGroup >= 0)
      groupEnd[graph.getNode(op.node).p2pGroup] = static_cast<OpIndex>(index);
  if (!groupEnd.empty())
    for (BufferState &state : buffers) {
      OpIndex &reader = state.lastReader;
      if (reader >= 0 && schedule.ops[reader].kind == ScheduleOpKind::Node) {
        int64_t group = graph.getNode(schedule.ops[reader].node).p2pGroup;
        if (group >= 0)
          reader = std::max(reader, groupEnd.lookup(group));
      }
    }

  // Free every other buffer when the last op reading it ends (newBuffer
  // and freeExplicitly said which).
  freeAndWalk(walkOut);
  return std::move(schedule);
}

llvm::Expected<Schedule>
lethe::buildSchedule(const ActivationAnalysis &analysis,
                     llvm::ArrayRef<ActivationDecision> decisions) {
  return Builder(analysis, decisions, Schedule()).build();
}

llvm::Expected<Schedule>
lethe::buildSchedule(const ActivationAnalysis &analysis,
                     llvm::ArrayRef<ActivationDecision> decisions,
                     Schedule &&storage, MemoryWalk *walk) {
  return Builder(analysis, decisions, std::move(storage)).build(walk);
}

llvm::Expected<SimResult>
lethe::simulateDecisions(const ActivationAnalysis &analysis,
                         const DeviceProfile &device,
                         llvm::ArrayRef<ActivationDecision> decisions,
                         const SimOptions &options) {
  llvm::Expected<Schedule> schedule = buildSchedule(analysis, decisions);
  if (!schedule)
    return schedule.takeError();
  return simulate(*schedule, device, options);
}

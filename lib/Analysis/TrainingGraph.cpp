//===- TrainingGraph.cpp - Index-based view of a training step ------------===//

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Analysis/CostModel.h"
#include "lethe/Analysis/Program.h"
#include "lethe/Analysis/TypeBytes.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"

#include <map>

using namespace mlir;
using namespace lethe;

ValueId TrainingGraph::addInput(int64_t bytes, InputKind kind,
                                Value irValue) {
  ValueId id = static_cast<ValueId>(values.size());
  GraphValue &value = values.emplace_back();
  value.bytes = bytes;
  value.producer = -1;
  value.resultIndex = id;
  value.storage = id;
  value.inputKind = kind;
  value.irValue = irValue;
  return id;
}

NodeId TrainingGraph::addNode(StringRef kind, Phase phase, double timeUs,
                              ArrayRef<ValueId> operands,
                              ArrayRef<int64_t> resultBytes,
                              ArrayRef<int64_t> aliases, uint32_t flags,
                              StringRef scope, Operation *irOp) {
  NodeId id = static_cast<NodeId>(nodes.size());
  GraphNode &node = nodes.emplace_back();
  node.kind = kind.str();
  node.phase = phase;
  node.timeUs = timeUs;
  node.operands.assign(operands.begin(), operands.end());
  node.flags = flags | classifyKind(kind);
  node.scope = scope.str();
  node.irOp = irOp;
  for (ValueId operand : operands) {
    std::vector<NodeId> &users = values[operand].users;
    if (users.empty() || users.back() != id)
      users.push_back(id);
  }
  for (auto [index, bytes] : llvm::enumerate(resultBytes)) {
    ValueId valueId = static_cast<ValueId>(values.size());
    GraphValue &value = values.emplace_back();
    value.producer = id;
    value.resultIndex = static_cast<int32_t>(index);
    int64_t aliased = index < aliases.size() ? aliases[index] : -1;
    if (aliased >= 0 && aliased < static_cast<int64_t>(operands.size())) {
      value.storage = values[operands[aliased]].storage;
      value.bytes = 0;
    } else {
      value.storage = valueId;
      value.bytes = bytes;
    }
    nodes[id].results.push_back(valueId);
  }
  return id;
}

void TrainingGraph::addOutput(ValueId value) {
  values[value].isOutput = true;
  outputs.push_back(value);
}

bool TrainingGraph::alignStorageBytes(int64_t alignment) {
  assert(alignment > 0 && llvm::isPowerOf2_64(alignment) &&
         "alignment must be a power of two");
  int64_t total = 0;
  for (GraphValue &value : values) {
    if (!value.isInput()) {
      std::optional<int64_t> aligned = llvm::checkedAdd(
          value.bytes,
          static_cast<int64_t>(llvm::alignTo(value.bytes, alignment)) -
              value.bytes);
      if (!aligned)
        return false;
      value.bytes = *aligned;
    }
    std::optional<int64_t> sum = llvm::checkedAdd(total, value.bytes);
    if (!sum || *sum > kMaxGraphBytes)
      return false;
    total = *sum;
  }
  return true;
}

std::string lethe::describeNode(const TrainingGraph &graph, NodeId node,
                                bool withKind) {
  if (node < 0 || static_cast<size_t>(node) >= graph.numNodes())
    return "node #" + std::to_string(node) + " (none: out of range)";
  const GraphNode &info = graph.getNode(node);
  std::string out = info.sourceId ? "node " + std::to_string(*info.sourceId)
                                  : "node #" + std::to_string(node);
  if (withKind)
    out += " (" + info.kind + ")";
  return out;
}

std::string lethe::stableValueId(const TrainingGraph &graph, ValueId id) {
  const GraphValue &value = graph.getValue(id);
  if (value.isInput())
    return "input:" + std::to_string(value.resultIndex);
  const std::optional<int64_t> &node = graph.getNode(value.producer).sourceId;
  if (!node)
    return "#" + std::to_string(id);
  return std::to_string(*node) + ":" + std::to_string(value.resultIndex);
}

NodeId TrainingGraph::firstBackwardNode() const {
  for (const auto &[index, node] : llvm::enumerate(nodes))
    if (node.phase != Phase::Fwd)
      return static_cast<NodeId>(index);
  return static_cast<NodeId>(nodes.size());
}

/// classifyKind without its memo.
static uint32_t classifyKindOnce(StringRef kind) {
  uint32_t flags = NodeFlagNone;
  // RNG ops of the frameworks we import: ATen dropout/bernoulli/rand*,
  // StableHLO rng ops, inductor's seed draws (prims.inductor_seeds; its
  // inductor_lookup_seed only reads them).
  for (StringRef rng : {"dropout", "bernoulli", "rand", "normal", "uniform",
                        "rng", "multinomial", "inductor_seed"})
    if (kind.contains(rng) && !kind.contains("_backward"))
      flags |= NodeFlagRandom;
  for (StringRef collective :
       {"all_gather", "reduce_scatter", "all_reduce", "all_to_all",
        "allgather", "allreduce", "c10d", "_c10d_functional",
        "collective_permute", "send", "recv"})
    if (kind.contains(collective))
      flags |= NodeFlagCollective;
  // ATen in-place ops end in '_' before the overload ("aten.add_.Tensor"),
  // plus the functional batch-norm that updates running statistics.
  StringRef opName = kind.rsplit('.').first;
  if ((kind.starts_with("aten.") && opName.ends_with("_") &&
       !opName.ends_with("__")) ||
      kind.contains("copy_"))
    flags |= NodeFlagMutates;
  return flags;
}

uint32_t TrainingGraph::classifyKind(StringRef kind) {
  // A step repeats a few hundred kinds over up to ~10^5 ops, and every graph
  // built and every program pass classifies each op again: the substring
  // searches were ~5% of a whole `lethe plan` at 100k ops. The memo is per
  // thread (the C API may plan on several at once) and starts over past
  // kMaxKinds, so that a process planning many graphs keeps it small.
  constexpr size_t kMaxKinds = 4096;
  thread_local llvm::StringMap<uint32_t> known;
  if (auto it = known.find(kind); it != known.end())
    return it->second;
  if (known.size() >= kMaxKinds)
    known.clear();
  uint32_t flags = classifyKindOnce(kind);
  known.try_emplace(kind, flags);
  return flags;
}

static InputKind parseInputKind(Attribute attr) {
  auto str = dyn_cast_or_null<StringAttr>(attr);
  if (!str)
    return InputKind::Input;
  return llvm::StringSwitch<InputKind>(str.getValue())
      .Case("param", InputKind::Param)
      .Case("buffer", InputKind::Buffer)
      .Case("tangent", InputKind::Tangent)
      .Default(InputKind::Input);
}

/// Fused attention kernels (ATen `_scaled_dot_product_*_attention`) draw
/// their dropout mask inside the kernel, so with a non-zero dropout they
/// are RNG ops too. The probability is a positional float argument or a
/// `dropout_p` keyword; any positional float in (0, 1) counts (a positional
/// `scale` can only make the answer conservative).
static bool attentionHasDropout(NodeOp node) {
  StringRef kind = node.getKind();
  if (!kind.contains("scaled_dot_product") || kind.contains("_backward"))
    return false;
  auto positive = [](Attribute attr) {
    auto f = dyn_cast_or_null<FloatAttr>(attr);
    return f && f.getValueAsDouble() > 0.0 && f.getValueAsDouble() < 1.0;
  };
  if (auto args = dyn_cast_or_null<ArrayAttr>(node.getArgsAttr()))
    if (llvm::any_of(args, positive))
      return true;
  if (auto kwargs =
          LetheDialect::AttrsAttrHelper(node->getContext()).getAttr(node))
    if (positive(kwargs.get("dropout_p")))
      return true;
  return false;
}

FailureOr<TrainingGraph> TrainingGraph::fromFunction(func::FuncOp func) {
  TrainingGraph graph;
  DenseMap<Value, ValueId> ids;
  TypeBytesCache typeBytes;
  auto bytesOf = [&](Value value, Operation *where) -> FailureOr<int64_t> {
    // Lethe plans tensor-level IR: what it materializes (offloads, releases,
    // buffers) holds tensors. A memref or vector has a size but is refused
    // here, once for every pass and tool, rather than where an op built
    // from it would not verify (found by the MLIR fuzzer: a graph of memrefs
    // offloaded).
    if (isa<ShapedType>(value.getType()) && !isa<TensorType>(value.getType()))
      return where->emitError("value of type ")
             << value.getType()
             << " is not a tensor: Lethe plans tensor-level IR (before "
                "bufferization)";
    int64_t bytes = typeBytes.get(value.getType());
    if (bytes < 0)
      return where->emitError("value of dynamic type ")
             << value.getType() << " has no static size";
    return bytes;
  };
  if (func.isExternal())
    return func.emitError("cannot plan an external function");
  for (BlockArgument arg : func.getArguments()) {
    FailureOr<int64_t> bytes = bytesOf(arg, func);
    if (failed(bytes))
      return failure();
    ids[arg] = graph.addInput(
        *bytes,
        parseInputKind(func.getArgAttr(
            arg.getArgNumber(), LetheDialect::KindAttrHelper::getNameStr())),
        arg);
  }
  if (!func.getBody().hasOneBlock())
    return func.emitError("expects a single-block function body");
  // About one node and one value per op: growing the vectors op by op
  // moved every node several times (~1% of a `lethe plan`, which builds
  // the graph twice).
  const size_t numOps = func.getBody().front().getOperations().size();
  graph.nodes.reserve(numOps);
  graph.values.reserve(func.getNumArguments() + numOps);
  ids.reserve(func.getNumArguments() + numOps);
  LetheDialect::NodeIdAttrHelper nodeIdAttr(func.getContext());
  // Node ids below an earlier node's, merged into bySourceId at the end.
  std::map<int64_t, NodeId> outOfOrder;
  auto lookup = [&](Value value, Operation *user) -> FailureOr<ValueId> {
    auto it = ids.find(value);
    if (it == ids.end())
      return user->emitError("operand is not produced by a graph node or "
                             "argument");
    return it->second;
  };
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value operand : ret.getOperands()) {
        FailureOr<ValueId> id = lookup(operand, &op);
        if (failed(id))
          return failure();
        graph.addOutput(*id);
      }
      continue;
    }
    SmallVector<ValueId> operands;
    for (Value operand : op.getOperands()) {
      FailureOr<ValueId> id = lookup(operand, &op);
      if (failed(id))
        return failure();
      operands.push_back(*id);
    }
    SmallVector<int64_t> resultBytes;
    for (Value result : op.getResults()) {
      FailureOr<int64_t> bytes = bytesOf(result, &op);
      if (failed(bytes))
        return failure();
      resultBytes.push_back(*bytes);
    }
    NodeId id;
    if (auto node = dyn_cast<NodeOp>(op)) {
      SmallVector<int64_t> aliases;
      if (std::optional<ArrayRef<int64_t>> a = node.getAliases())
        aliases.assign(a->begin(), a->end());
      double time = node.getTimeUsAttr()
                        ? node.getTimeUsAttr().getValueAsDouble()
                        : 0.0;
      uint32_t flags = attentionHasDropout(node) ? NodeFlagRandom
                                                 : NodeFlagNone;
      if (CostModel::isView(node))
        flags |= NodeFlagView;
      else if (CostModel::computeWork(node))
        flags |= NodeFlagMatrix;
      id = graph.addNode(node.getKind(), node.getPhase(), time, operands,
                         resultBytes, aliases, flags,
                         node.getScope().value_or(""), &op);
      graph.nodes[id].name = node.getName().value_or("").str();
    } else if (auto coll = dyn_cast<CollectiveOp>(op)) {
      double time = coll.getTimeUsAttr()
                        ? coll.getTimeUsAttr().getValueAsDouble()
                        : 0.0;
      id = graph.addNode(collectiveNodeKind(coll.getKind()), coll.getPhase(),
                         time, operands, resultBytes, {}, NodeFlagCollective,
                         coll.getScope().value_or(""), &op);
      if (auto group =
              LetheDialect::P2pGroupAttrHelper(coll.getContext()).getAttr(coll))
        graph.nodes[id].p2pGroup = group.getInt();
      graph.nodes[id].name = coll.getName().value_or("").str();
    } else {
      return op.emitError("unexpected op in a training graph: expected "
                          "'lethe.node' or 'lethe.collective' (run "
                          "-lethe-import-ops first)");
    }
    if (auto sourceId = nodeIdAttr.getAttr(&op)) {
      int64_t sid = sourceId.getInt();
      std::vector<std::pair<int64_t, NodeId>> &sorted = graph.bySourceId;
      // An id above every earlier one is new; others are looked up among
      // the sorted ones and those that came out of order.
      std::optional<NodeId> earlier;
      if (sorted.empty() || sid > sorted.back().first) {
        sorted.push_back({sid, id});
      } else if (std::optional<NodeId> found =
                     graph.findNodeBySourceId(sid)) {
        earlier = found;
      } else if (auto [it, inserted] = outOfOrder.try_emplace(sid, id);
                 !inserted) {
        earlier = it->second;
      }
      if (earlier) {
        InFlightDiagnostic diag =
            op.emitError("node id ")
            << sid
            << " is also an earlier node's: a plan names nodes by their "
               "'lethe.node_id', which must be unique in the function";
        diag.attachNote(graph.nodes[*earlier].irOp->getLoc())
            << "the earlier node";
        return diag;
      }
      graph.nodes[id].sourceId = sid;
    }
    for (auto [result, valueId] :
         llvm::zip_equal(op.getResults(), graph.nodes[id].results)) {
      graph.values[valueId].irValue = result;
      ids[result] = valueId;
    }
  }
  if (!outOfOrder.empty()) {
    graph.bySourceId.insert(graph.bySourceId.end(), outOfOrder.begin(),
                            outOfOrder.end());
    llvm::sort(graph.bySourceId);
  }
  // Storages (views add nothing) are bounded so that no sum of them, nor a
  // sum of two such sums, overflows int64.
  int64_t totalBytes = 0;
  for (const GraphValue &value : graph.values) {
    // Not llvm::checkedAdd, which adds APInts.
    int64_t total;
    if (llvm::AddOverflow(totalBytes, value.bytes, total) ||
        total > kMaxGraphBytes)
      return emitError(value.irValue ? value.irValue.getLoc() : func.getLoc())
             << "the graph's tensors total more than " << kMaxGraphBytes
             << " bytes (4 EiB) with this one of " << value.bytes << " bytes";
    totalBytes = total;
  }
  return graph;
}

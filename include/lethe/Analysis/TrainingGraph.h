//===- TrainingGraph.h - Index-based view of a training step ----*- C++ -*-===//
//
// The planner, the simulator and the lifetime analysis work on this compact,
// index-based copy of the step rather than on the IR: it is cheap to walk
// (tens of thousands of ops in milliseconds), and tests can build one
// directly without any MLIR.
//
// Program order is node order. Values are the SSA values of the step: graph
// inputs (function arguments: parameters, data inputs, the gradient seed)
// and node results. A value that aliases another (a view, an in-place
// result) shares its storage and owns no bytes.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_ANALYSIS_TRAININGGRAPH_H
#define LETHE_ANALYSIS_TRAININGGRAPH_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <utility>
#include <optional>
#include <string>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace lethe {

using ValueId = int32_t;
using NodeId = int32_t;

/// What a graph input is (the `lethe.kind` argument attribute).
enum class InputKind : uint8_t { Param, Input, Buffer, Tangent };

/// Op properties the planner must respect.
enum NodeFlags : uint32_t {
  NodeFlagNone = 0,
  /// Draws random numbers (dropout): never recomputed unless its RNG state
  /// is replayed.
  NodeFlagRandom = 1u << 0,
  /// A collective (all-gather, reduce-scatter, ...): never recomputed, runs
  /// on the comm stream.
  NodeFlagCollective = 1u << 1,
  /// Writes one of its operands in place (BatchNorm running statistics):
  /// re-running it would apply the update twice.
  NodeFlagMutates = 1u << 2,
  /// Runs a matrix-product kernel (matmul, convolution, attention: the cost
  /// model has a FLOP formula for it): the simulator slows it beside host
  /// copies by the profile's matmul factors, not the memory-bound ones.
  NodeFlagMatrix = 1u << 3,
  /// Launches no kernel (a view).
  NodeFlagView = 1u << 4,
};

struct GraphValue {
  /// Bytes of storage this value owns: 0 for aliases and non-tensors.
  int64_t bytes = 0;
  /// The producing node, or -1 for a graph input.
  NodeId producer = -1;
  /// Result index within the producer (input index for graph inputs).
  int32_t resultIndex = 0;
  /// The value owning the storage: itself unless it aliases another value.
  ValueId storage = -1;
  /// For graph inputs.
  InputKind inputKind = InputKind::Input;
  /// Nodes reading this value, in program order (each node once).
  std::vector<NodeId> users;
  /// Whether the step returns this value (it lives to the end).
  bool isOutput = false;
  /// The IR value, when built from IR.
  mlir::Value irValue;

  bool isInput() const { return producer < 0; }
};

struct GraphNode {
  std::string kind;
  Phase phase = Phase::Fwd;
  /// Time on its stream in microseconds (measured or modelled; 0 if unknown).
  double timeUs = 0.0;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  /// Module path (`transformer.h.3.mlp`), empty if unknown.
  std::string scope;
  /// Name in the source graph, for messages.
  std::string name;
  /// The node's stable identity (`lethe.node_id`: the exported node's id,
  /// or one assignNodeIds gave it), unique among the function's nodes; a
  /// plan names nodes by it. None when the node has none (a graph built
  /// without IR, or IR not yet given ids).
  std::optional<int64_t> sourceId;
  uint32_t flags = NodeFlagNone;
  /// The IR op, when built from IR.
  mlir::Operation *irOp = nullptr;
  /// A point-to-point node's NCCL group (`lethe.p2p_group`), -1 if none:
  /// the group's transfers run together, so the buffers they read are freed
  /// only when its last node is done.
  int64_t p2pGroup = -1;

  bool hasFlag(NodeFlags flag) const { return (flags & flag) != 0; }
};

class TrainingGraph {
public:
  /// Adds a graph input (function argument) of `bytes` bytes.
  ValueId addInput(int64_t bytes, InputKind kind, mlir::Value irValue = {});

  /// Adds a node reading `operands` and producing one result per entry of
  /// `resultBytes`. `aliases[i]`, when given, is the operand index result i
  /// shares storage with, or -1. Returns the node's id; its results are
  /// `getNode(id).results`.
  NodeId addNode(llvm::StringRef kind, Phase phase, double timeUs,
                 llvm::ArrayRef<ValueId> operands,
                 llvm::ArrayRef<int64_t> resultBytes,
                 llvm::ArrayRef<int64_t> aliases = {}, uint32_t flags = 0,
                 llvm::StringRef scope = {}, mlir::Operation *irOp = nullptr);

  /// Marks `value` as returned by the step.
  void addOutput(ValueId value);

  /// Rounds the bytes of every storage a node produces up to a multiple of
  /// `alignment` (a power of two), the size it takes in an arena laid out
  /// with that alignment (lethe-assign-buffers), so that the planner's peak
  /// is the allocated program's max-live. Graph inputs live outside the
  /// arena and keep their size. Returns false, leaving the sizes partly
  /// rounded, when the rounded sizes would total more than kMaxGraphBytes.
  [[nodiscard]] bool alignStorageBytes(int64_t alignment);

  /// Builds the graph of a function in Lethe's canonical form: arguments are
  /// inputs (kind from the `lethe.kind` argument attribute, default input),
  /// `lethe.node` / `lethe.collective` ops are nodes, and `func.return`
  /// operands are outputs. Emits an error at the offending op and fails on
  /// ops it cannot represent, on dynamically shaped tensors and on two nodes
  /// with one `lethe.node_id`.
  static mlir::FailureOr<TrainingGraph> fromFunction(mlir::func::FuncOp func);

  llvm::ArrayRef<GraphNode> getNodes() const { return nodes; }
  llvm::ArrayRef<GraphValue> getValues() const { return values; }
  llvm::ArrayRef<ValueId> getOutputs() const { return outputs; }
  const GraphNode &getNode(NodeId id) const { return nodes[id]; }
  /// The node whose `sourceId` is `id`, if any.
  std::optional<NodeId> findNodeBySourceId(int64_t id) const {
    auto it = llvm::lower_bound(bySourceId, id,
                                [](const std::pair<int64_t, NodeId> &entry,
                                   int64_t key) { return entry.first < key; });
    if (it == bySourceId.end() || it->first != id)
      return std::nullopt;
    return it->second;
  }
  const GraphValue &getValue(ValueId id) const { return values[id]; }
  size_t numNodes() const { return nodes.size(); }
  size_t numValues() const { return values.size(); }

  /// Whether `value` shares another value's storage.
  bool isAlias(ValueId value) const { return values[value].storage != value; }

  /// Bytes owned by the storage of `value` (follows aliases).
  int64_t storageBytes(ValueId value) const {
    return values[values[value].storage].bytes;
  }

  /// Index of the first backward node, or numNodes() if there is none.
  NodeId firstBackwardNode() const;

  /// Classifies an op kind into NodeFlags (dropout and other RNG ops,
  /// collectives, in-place updates). Used by the importers and fromFunction.
  static uint32_t classifyKind(llvm::StringRef kind);

private:
  std::vector<GraphNode> nodes;
  std::vector<GraphValue> values;
  std::vector<ValueId> outputs;
  /// (sourceId, node) of every node with an id, sorted by id (an id may be
  /// any i64). Exported nodes come in id order, so fromFunction builds it
  /// by appending: a std::map was ~1% of a `lethe plan` at 100k ops, which
  /// builds the graph twice.
  std::vector<std::pair<int64_t, NodeId>> bySourceId;
};

/// A node for people, by its stable identity: "node 17 (aten.mm.default)",
/// 17 being its `lethe.node_id`, which stays the same when the graph is
/// reordered or re-exported; without one (a graph built without IR) by its
/// position, "node #5 (aten.mm.default)". `withKind` false drops the op.
std::string describeNode(const TrainingGraph &graph, NodeId node,
                         bool withKind = true);

/// A value's stable identity, as plan documents name it: "17:1" is result 1
/// of the node whose `lethe.node_id` is 17 (the same after reordering or
/// re-export); "input:3" the step's input 3; a result of a node without an
/// id (a graph built without IR) "#<value number>", which is not stable.
std::string stableValueId(const TrainingGraph &graph, ValueId value);

} // namespace lethe

#endif // LETHE_ANALYSIS_TRAININGGRAPH_H

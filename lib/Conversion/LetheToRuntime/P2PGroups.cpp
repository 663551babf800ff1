//===- P2PGroups.cpp - NCCL groups of point-to-point transfers ------------===//
//
// The transfers lethe-expand-pipeline-schedule marks with one
// `lethe.p2p_group` are issued between letheRtGroupStart and
// letheRtGroupEnd, so that NCCL pairs a stage's sends and receives.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"

using namespace mlir;
using namespace lethe;
using namespace lethe::lowering;

/// The NCCL group of a point-to-point op, if it has one.
std::optional<int64_t> lethe::lowering::p2pGroupOf(Operation *op) {
  auto collective = dyn_cast<CollectiveOp>(op);
  if (!collective || !collective.isPointToPoint())
    return std::nullopt;
  if (auto group =
          LetheDialect::P2pGroupAttrHelper(op->getContext()).getAttr(op))
    return group.getInt();
  return std::nullopt;
}

llvm::DenseMap<int64_t, std::pair<size_t, size_t>>
lethe::lowering::findP2PGroupSpans(ArrayRef<Operation *> ops) {
  llvm::DenseMap<int64_t, std::pair<size_t, size_t>> spans;
  llvm::DenseMap<int64_t, unsigned> members;
  for (auto [index, op] : llvm::enumerate(ops))
    if (std::optional<int64_t> group = p2pGroupOf(op)) {
      auto [it, inserted] = spans.try_emplace(*group, index, index);
      it->second.second = index;
      ++members[*group];
    }
  // A lone transfer needs no group.
  for (auto [group, count] : members)
    if (count < 2)
      spans.erase(group);
  return spans;
}

/// Issues the transfers of one NCCL group, ops[first] .. ops[last] (its
/// first and last member), between letheRtGroupStart and letheRtGroupEnd.
/// NCCL launches the group's work only at the end, so whatever in the span
/// waits for a member (the comm barriers after it, a release after the
/// transfer, a read of a received tensor) is issued after
/// letheRtGroupEnd, in program order; the rest (waits the transfers need,
/// work on other streams) before it. A member that needs something that
/// needs the group cannot be issued this way: an error.
LogicalResult Lowering::emitP2PGroup(ArrayRef<Operation *> ops, size_t first,
                                     size_t last, int64_t group) {
  DenseSet<Value> late;
  DenseSet<unsigned> lateStreams;
  SmallVector<Operation *> after;
  // A comm wait that must follow the group: the transfers after it would
  // not wait for what it waits for.
  Operation *lateCommWait = nullptr;
  auto needsLate = [&](Operation *op) {
    bool needs = false;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        needs |= late.contains(operand);
    });
    return needs;
  };
  comment("NCCL group " + std::to_string(group) + " (point-to-point)");
  call(ops[first]->getLoc(), "letheRtGroupStart", {});
  for (size_t index = first; index <= last; ++index) {
    Operation *op = ops[index];
    std::optional<int64_t> member = p2pGroupOf(op);
    if (member && *member == group) {
      if (needsLate(op) || lateCommWait)
        return op->emitError("lethe-lower-to-runtime: ")
               << describe(op) << " cannot be issued in NCCL group " << group
               << ": it needs an op that waits for an earlier transfer of "
                  "the group ("
               << (lateCommWait ? describe(lateCommWait) : "its operand")
               << ")";
      if (failed(lowerOp(op)))
        return failure();
      for (Value result : op->getResults())
        late.insert(result);
      continue;
    }
    if (member || isa<CollectiveOp>(op))
      return op->emitError("lethe-lower-to-runtime: ")
             << describe(op) << " lies inside NCCL group " << group
             << " (between its transfers), where no other collective can be "
                "issued";
    unsigned stream = static_cast<unsigned>(getOpStream(op));
    bool isComm = getOpStream(op) == Stream::Comm && !isa<JoinOp>(op);
    // A comm wait may run before the group's transfers (it only orders them
    // later); any other comm op follows the group's transfers.
    bool isCommWait = isComm && isa<AwaitOp>(op);
    bool isLate =
        needsLate(op) || (isComm && !isCommWait) ||
        (!isa<JoinOp>(op) && !isCommWait && lateStreams.contains(stream));
    if (auto yield = dyn_cast<YieldOp>(op); yield && isLate)
      for (Value result : yield->getParentOp()->getResults())
        late.insert(result);
    if (!isLate) {
      if (failed(lowerOp(op)))
        return failure();
      continue;
    }
    for (Value result : op->getResults())
      late.insert(result);
    if (!isa<JoinOp>(op))
      lateStreams.insert(stream);
    if (isCommWait && !lateCommWait)
      lateCommWait = op;
    after.push_back(op);
  }
  call(ops[last]->getLoc(), "letheRtGroupEnd", {});
  for (Operation *op : after)
    if (failed(lowerOp(op)))
      return failure();
  return success();
}

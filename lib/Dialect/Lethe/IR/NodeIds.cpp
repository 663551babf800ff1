//===- NodeIds.cpp - Every node's stable identity -------------------------===//

#include "lethe/Dialect/Lethe/IR/NodeIds.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/IR/Builders.h"

#include <limits>
#include <set>

using namespace mlir;
using namespace lethe;

/// Fresh ids for the nodes without one (`missing`) and for those repeating
/// an earlier node's (`repeats`).
static void giveFreshIds(Operation *root, bool missing, bool repeats) {
  MLIRContext *context = root->getContext();
  LetheDialect::NodeIdAttrHelper helper(context);
  // Program order; std::set because an id may be any i64, DenseMap's
  // reserved keys included.
  SmallVector<Operation *> nodes;
  root->walk([&](Operation *op) {
    if (isa<NodeOp, CollectiveOp>(op))
      nodes.push_back(op);
  });
  std::set<int64_t> used;
  SmallVector<Operation *> unnamed;
  for (Operation *op : nodes) {
    IntegerAttr id = helper.getAttr(op);
    if (id ? !used.insert(id.getInt()).second && repeats : missing)
      unnamed.push_back(op);
  }
  if (unnamed.empty())
    return;
  // Above the largest id in use; from 0 when that one is INT64_MAX, skipping
  // the ids in use (there are fewer of them than there are i64 values).
  int64_t next = 0;
  if (!used.empty() && *used.rbegin() < std::numeric_limits<int64_t>::max())
    next = *used.rbegin() + 1;
  // Wraps around at INT64_MAX instead of overflowing.
  auto successor = [](int64_t id) {
    return static_cast<int64_t>(static_cast<uint64_t>(id) + 1);
  };
  Builder builder(context);
  for (Operation *op : unnamed) {
    while (used.count(next))
      next = successor(next);
    used.insert(next);
    helper.setAttr(op, builder.getI64IntegerAttr(next));
  }
}

void lethe::assignNodeIds(Operation *root) {
  giveFreshIds(root, /*missing=*/true, /*repeats=*/false);
}

void lethe::renumberRepeatedNodeIds(Operation *root) {
  giveFreshIds(root, /*missing=*/false, /*repeats=*/true);
}

//===- ImportCommon.cpp - Helpers shared by Lethe's importers -------------===//

#include "lethe/Import/ImportCommon.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace lethe;

StringRef lethe::stripDynamoScope(StringRef scope) {
  // Dynamo names the traced module after the local variable holding it.
  if (!scope.starts_with("L['"))
    return scope;
  size_t end = scope.find("']");
  if (end == StringRef::npos)
    return scope;
  StringRef rest = scope.drop_front(end + 2);
  if (rest.empty())
    return rest;
  if (rest.consume_front("."))
    return rest;
  return scope;
}

std::optional<CollectiveKind> lethe::getCollectiveKind(StringRef kind) {
  // Every name below has "all" in it but reduce_scatter: two searches for
  // the ops that are none (nearly all of them) instead of eight.
  if (!kind.contains("all") && !kind.contains("reduce_scatter"))
    return std::nullopt;
  if (kind.contains("all_gather") || kind.contains("allgather"))
    return CollectiveKind::AllGather;
  if (kind.contains("reduce_scatter"))
    return CollectiveKind::ReduceScatter;
  if (kind.contains("all_reduce") || kind.contains("allreduce"))
    return CollectiveKind::AllReduce;
  if (kind.contains("all_to_all") || kind.contains("alltoall"))
    return CollectiveKind::AllToAll;
  return std::nullopt;
}

std::optional<int64_t> lethe::getC10dGroupSize(CollectiveKind kind,
                                               ArrayAttr args) {
  if (!args || (kind != CollectiveKind::AllGather &&
                kind != CollectiveKind::ReduceScatter))
    return std::nullopt;
  size_t at = kind == CollectiveKind::ReduceScatter ? 2 : 1;
  if (args.size() <= at)
    return std::nullopt;
  auto size = dyn_cast<IntegerAttr>(args[at]);
  // Bounded so that a group can be materialised as a rank list.
  if (!size || size.getType().isUnsignedInteger() || size.getInt() <= 0 ||
      size.getInt() > 65536)
    return std::nullopt;
  return size.getInt();
}

Operation *lethe::createCollectiveIfValid(
    OpBuilder &builder, Location loc, CollectiveKind kind, ValueRange inputs,
    TypeRange resultTypes, ArrayRef<int64_t> group, Phase phase,
    FloatAttr timeUs, StringAttr scope, StringAttr name) {
  if (inputs.size() != 1 || resultTypes.size() != 1 || group.empty())
    return nullptr;
  auto in = dyn_cast<RankedTensorType>(inputs[0].getType());
  auto out = dyn_cast<RankedTensorType>(resultTypes[0]);
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape() ||
      in.getElementType() != out.getElementType() ||
      in.getRank() != out.getRank())
    return nullptr;
  for (auto [index, rank] : llvm::enumerate(group))
    if (rank < 0 || llvm::is_contained(group.take_front(index), rank))
      return nullptr;
  int64_t size = static_cast<int64_t>(group.size());
  switch (kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::AllToAll:
    if (in != out)
      return nullptr;
    break;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter: {
    if (in.getRank() == 0)
      return nullptr;
    bool gather = kind == CollectiveKind::AllGather;
    RankedTensorType small = gather ? in : out, large = gather ? out : in;
    std::optional<int64_t> gathered =
        llvm::checkedMul(small.getDimSize(0), size);
    if (!gathered || *gathered != large.getDimSize(0) ||
        small.getShape().drop_front() != large.getShape().drop_front())
      return nullptr;
    break;
  }
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    // Point-to-point ops name a peer, which this form does not carry.
    return nullptr;
  }
  return CollectiveOp::create(builder, loc, out, kind, inputs[0], group, phase,
                              timeUs, scope, name);
}

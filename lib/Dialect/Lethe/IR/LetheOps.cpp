//===- LetheOps.cpp - Lethe operations: verifiers -------------------------===//

#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Support/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace lethe;

/// Times are durations: NaN and negative values are rejected, and so are
/// times beyond kMaxTimeUs, which would make sums of times overflow.
static LogicalResult verifyTimeUs(Operation *op, FloatAttr timeUs) {
  if (!timeUs)
    return success();
  double us = timeUs.getValueAsDouble();
  if (!(us >= 0.0))
    return op->emitOpError("time_us must be non-negative, got ") << us;
  if (us > kMaxTimeUs)
    return op->emitOpError("time_us must be at most ")
           << formatNumber(kMaxTimeUs) << " us, got " << formatNumber(us);
  return success();
}

//===----------------------------------------------------------------------===//
// NodeOp
//===----------------------------------------------------------------------===//

int64_t NodeOp::getAliasedOperand(unsigned resultIndex) {
  std::optional<ArrayRef<int64_t>> aliases = getAliases();
  if (!aliases || resultIndex >= aliases->size())
    return -1;
  return (*aliases)[resultIndex];
}

LogicalResult NodeOp::verify() {
  if (getKind().empty())
    return emitOpError("requires a non-empty kind");
  if (failed(verifyTimeUs(*this, getTimeUsAttr())))
    return failure();
  for (Value input : getInputs())
    if (isa<HostTensorType>(input.getType()))
      return emitOpError("cannot read host tensor ")
             << input << "; prefetch it to the device first";
  if (std::optional<ArrayRef<int64_t>> aliases = getAliases()) {
    if (aliases->size() != getNumResults())
      return emitOpError("has ")
             << aliases->size() << " alias entries for " << getNumResults()
             << " results";
    for (auto [index, operand] : llvm::enumerate(*aliases)) {
      if (operand < -1 || operand >= static_cast<int64_t>(getNumOperands()))
        return emitOpError("result ")
               << index << " aliases operand " << operand << ", but the op has "
               << getNumOperands() << " operands";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CollectiveOp
//===----------------------------------------------------------------------===//

/// `: tensor<A> -> tensor<B>`; a send has no `-> type`, a recv no input type
/// (`: -> tensor<B>`).
static ParseResult parseCollectiveTypes(OpAsmParser &parser, Type &input,
                                        Type &result) {
  OptionalParseResult hasInput = parser.parseOptionalType(input);
  if (hasInput.has_value() && failed(*hasInput))
    return failure();
  if (succeeded(parser.parseOptionalArrow()))
    return parser.parseType(result);
  if (!hasInput.has_value())
    return parser.emitError(parser.getCurrentLocation(),
                            "expected a tensor type or '->'");
  return success();
}

static void printCollectiveTypes(OpAsmPrinter &printer, Operation *,
                                 Type input, Type result) {
  if (input)
    printer << input;
  if (result) {
    if (input)
      printer << ' ';
    printer << "-> " << result;
  }
}

std::string lethe::collectiveNodeKind(CollectiveKind kind) {
  return (CollectiveOp::getOperationName() + "." +
          stringifyCollectiveKind(kind))
      .str();
}

LogicalResult CollectiveOp::verify() {
  ArrayRef<int64_t> group = getGroup();
  if (group.empty())
    return emitOpError("requires a non-empty group of ranks");
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t rank : group) {
    if (rank < 0)
      return emitOpError("group rank must be non-negative, got ") << rank;
    if (!seen.insert(rank).second)
      return emitOpError("group lists rank ") << rank << " twice";
  }
  StringRef kindName = stringifyCollectiveKind(getKind());
  if (isPointToPoint()) {
    std::optional<int64_t> peer = getPeer();
    if (!peer)
      return emitOpError() << kindName << " requires a peer rank";
    if (!seen.contains(*peer))
      return emitOpError() << kindName << " peer " << *peer
                           << " is not in the group";
    bool send = getKind() == CollectiveKind::Send;
    if (send && (!getInput() || getResult()))
      return emitOpError("send takes one tensor and returns none");
    if (!send && (getInput() || !getResult()))
      return emitOpError("recv takes no tensor and returns one");
    return success();
  }
  if (getPeer())
    return emitOpError() << kindName << " takes no peer (only send and recv do)";
  if (!getInput() || !getResult())
    return emitOpError() << kindName << " takes one tensor and returns one";
  RankedTensorType in = getInput().getType();
  RankedTensorType out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("input and result element types differ: ")
           << in.getElementType() << " vs " << out.getElementType();
  if (in.getRank() != out.getRank())
    return emitOpError("input and result ranks differ");
  int64_t size = static_cast<int64_t>(group.size());
  switch (getKind()) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::AllToAll:
    if (in != out)
      return emitOpError("requires the result type to equal the input type");
    return success();
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter: {
    if (in.getRank() == 0)
      return emitOpError("requires a tensor of rank >= 1");
    bool gather = getKind() == CollectiveKind::AllGather;
    RankedTensorType small = gather ? in : out, large = gather ? out : in;
    if (ShapedType::isStatic(small.getDimSize(0)) &&
        ShapedType::isStatic(large.getDimSize(0)) &&
        small.getDimSize(0) * size != large.getDimSize(0))
      return emitOpError() << (gather ? "all_gather" : "reduce_scatter")
                           << " over " << size << " ranks: "
                           << (gather ? "result" : "input")
                           << " dimension 0 must be "
                           << small.getDimSize(0) * size << ", got "
                           << large.getDimSize(0);
    if (small.getShape().drop_front() != large.getShape().drop_front())
      return emitOpError("input and result differ beyond dimension 0");
    return success();
  }
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    break;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// OffloadOp / PrefetchOp
//===----------------------------------------------------------------------===//

LogicalResult OffloadOp::verify() {
  if (getResult().getType().getTensorType() != getSource().getType())
    return emitOpError("host result ")
           << getResult().getType() << " does not hold the source type "
           << getSource().getType();
  return success();
}

LogicalResult PrefetchOp::verify() {
  if (getSource().getType().getTensorType() != getResult().getType())
    return emitOpError("device result ")
           << getResult().getType() << " does not match the host source "
           << getSource().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AwaitOp / JoinOp
//===----------------------------------------------------------------------===//

LogicalResult AwaitOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  AwaitOp::Adaptor adaptor(operands, attributes, properties, regions);
  for (Value operand : adaptor.getValues())
    inferredReturnTypes.push_back(operand.getType());
  return success();
}

LogicalResult AwaitOp::verify() {
  if (getTimepoints().empty())
    return emitOpError("requires at least one timepoint to await");
  return success();
}

LogicalResult JoinOp::verify() {
  if (getTimepoints().empty())
    return emitOpError("requires at least one timepoint to join");
  return success();
}

//===----------------------------------------------------------------------===//
// ReleaseOp
//===----------------------------------------------------------------------===//

LogicalResult ReleaseOp::verify() {
  // Straight-line double release: an earlier release of the same value in
  // this block. Releases in different blocks are left to lethe-verify, which
  // knows the control flow.
  for (Operation *user : getValue().getUsers()) {
    auto other = dyn_cast<ReleaseOp>(user);
    if (!other || other == *this || other->getBlock() != (*this)->getBlock())
      continue;
    if (other->isBeforeInBlock(*this)) {
      InFlightDiagnostic diag =
          emitOpError("releases a value that was already released");
      diag.attachNote(other.getLoc()) << "first released here";
      return diag;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// RecomputeOp
//===----------------------------------------------------------------------===//

LogicalResult RecomputeOp::verify() {
  Block &body = getBody().front();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("region must end with 'lethe.yield'");
  if (getNumResults() == 0)
    return emitOpError("must re-create at least one value");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("region yields ")
           << yield.getValues().getTypes() << " but the op produces "
           << getResultTypes();
  return success();
}

//===----------------------------------------------------------------------===//
// Test ops
//===----------------------------------------------------------------------===//

LogicalResult TestTimelineOp::verify() {
  if (failed(verifyTimeUs(*this, getTimeUsAttr())))
    return failure();
  return success();
}

#define GET_OP_CLASSES
#include "lethe/Dialect/Lethe/IR/LetheOps.cpp.inc"

//===- LetheAttrVerifier.cpp - Lethe's discardable attributes -------------===//
//
// The dialect's verifier of its discardable attributes (declared in
// LetheDialect.td): each `lethe.*` attribute has one type, and goes on one
// kind of op, argument or result. Passes read them without re-checking.
//
//===----------------------------------------------------------------------===//

#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace lethe;

namespace {
using D = LetheDialect;

/// Where an attribute may be set.
enum class Host { Module, Function, Node, Op };

/// Checks of one attribute on an op (`op`) or on one of an op's arguments
/// or results (`what` names which, for the message).
class AttrChecker {
public:
  AttrChecker(Operation *op, NamedAttribute attr, StringRef what = "")
      : op(op), name(attr.getName().getValue()), value(attr.getValue()),
        what(what) {}

  InFlightDiagnostic error() {
    InFlightDiagnostic diag = op->emitOpError();
    if (!what.empty())
      diag << what << " ";
    diag << "attribute '" << name << "' ";
    return diag;
  }

  LogicalResult host(Host host) {
    switch (host) {
    case Host::Module:
      if (isa<ModuleOp>(op))
        return success();
      return error() << "belongs on the module";
    case Host::Function:
      if (isa<FunctionOpInterface>(op))
        return success();
      return error() << "belongs on a function";
    case Host::Node:
      if (isa<NodeOp, CollectiveOp>(op))
        return success();
      return error() << "belongs on a 'lethe.node' or 'lethe.collective'";
    case Host::Op:
      return success();
    }
    llvm_unreachable("unknown host");
  }

  template <typename T> LogicalResult is(Host where, StringRef expected) {
    if (failed(host(where)))
      return failure();
    if (!isa<T>(value))
      return error() << "must be " << expected << ", got " << value;
    return success();
  }

  /// An integer at least `least`.
  LogicalResult integer(Host where, int64_t least) {
    if (failed(is<IntegerAttr>(where, "an integer")))
      return failure();
    auto attr = cast<IntegerAttr>(value);
    if (!attr.getType().isSignlessInteger(64))
      return error() << "must be an i64, got " << value;
    if (attr.getInt() < least)
      return error() << "must be at least " << least << ", got "
                     << attr.getInt();
    return success();
  }

  LogicalResult oneOf(Host where, ArrayRef<StringRef> allowed) {
    if (failed(is<StringAttr>(where, "a string")))
      return failure();
    StringRef text = cast<StringAttr>(value).getValue();
    if (llvm::is_contained(allowed, text))
      return success();
    InFlightDiagnostic diag = error() << "must be one of ";
    llvm::interleave(
        allowed, [&](StringRef s) { diag << "'" << s << "'"; },
        [&] { diag << ", "; });
    return diag << ", got '" << text << "'";
  }

  LogicalResult decisions();
  LogicalResult placement();
  LogicalResult savedResults();

  Operation *op;
  StringRef name;
  Attribute value;
  StringRef what;
};
} // namespace

LogicalResult AttrChecker::decisions() {
  if (failed(is<ArrayAttr>(Host::Node, "an array")))
    return failure();
  auto entries = cast<ArrayAttr>(value);
  if (entries.size() != op->getNumResults())
    return error() << "has " << entries.size() << " entries for "
                   << op->getNumResults() << " results";
  for (auto [index, entry] : llvm::enumerate(entries))
    if (!isa<UnitAttr, DecisionAttr>(entry))
      return error() << "entry " << index
                     << " must be a #lethe<decision ...> or unit, got "
                     << entry;
  return success();
}

/// Per result: unit, or where the restore (and an offload's copies) go
/// among the function's nodes and which nodes a recompute re-runs.
LogicalResult AttrChecker::placement() {
  if (failed(is<ArrayAttr>(Host::Node, "an array")))
    return failure();
  auto entries = cast<ArrayAttr>(value);
  auto decisionList = D::DecisionsAttrHelper(op->getContext()).getAttr(op);
  if (!decisionList)
    return error() << "needs '" << D::DecisionsAttrHelper::getNameStr()
                   << "' on the same op";
  if (entries.size() != op->getNumResults())
    return error() << "has " << entries.size() << " entries for "
                   << op->getNumResults() << " results";
  for (auto [index, entry] : llvm::enumerate(entries)) {
    if (isa<UnitAttr>(entry))
      continue;
    auto decision = dyn_cast<DecisionAttr>(decisionList[index]);
    if (!decision || decision.getValue() == Decision::Retain)
      return error() << "entry " << index
                     << " places a result that is neither recomputed nor "
                        "offloaded";
    auto dict = dyn_cast<DictionaryAttr>(entry);
    if (!dict)
      return error() << "entry " << index
                     << " must be a dictionary or unit, got " << entry;
    SmallVector<StringRef, 3> nodeFields = {"restore_before"};
    if (decision.getValue() == Decision::Offload)
      nodeFields.append({"release_after", "prefetch_after"});
    for (StringRef field : nodeFields) {
      auto node = dict.getAs<IntegerAttr>(field);
      if (!node || node.getInt() < 0)
        return error() << "entry " << index << " needs '" << field
                       << "', a node index";
    }
    if (!dict.getAs<DenseI64ArrayAttr>("nodes"))
      return error() << "entry " << index
                     << " needs 'nodes', an array<i64> of node indices";
  }
  return success();
}

/// The indices of the results the exporter saved.
LogicalResult AttrChecker::savedResults() {
  if (failed(is<DenseI64ArrayAttr>(Host::Node, "an array<i64>")))
    return failure();
  for (int64_t index : cast<DenseI64ArrayAttr>(value).asArrayRef())
    if (index < 0 || index >= static_cast<int64_t>(op->getNumResults()))
      return error() << "names result " << index << " of "
                     << op->getNumResults();
  return success();
}

LogicalResult LetheDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  AttrChecker c(op, attr);
  StringRef name = c.name;
  // Module.
  if (name == ModelAttrHelper::getNameStr() ||
      name == DeviceAttrHelper::getNameStr())
    return c.is<StringAttr>(Host::Module, "a string");
  if (name == TotalsAttrHelper::getNameStr())
    return c.is<DictionaryAttr>(Host::Module, "a dictionary");
  if (name == BudgetBytesAttrHelper::getNameStr() ||
      name == DeviceArenaBytesAttrHelper::getNameStr() ||
      name == HostArenaBytesAttrHelper::getNameStr() ||
      name == MaxLiveBytesAttrHelper::getNameStr() ||
      name == HostMaxLiveBytesAttrHelper::getNameStr())
    return c.integer(Host::Module, 0);
  if (name == ArenaAlignmentAttrHelper::getNameStr())
    return c.integer(Host::Module, 1);
  if (name == PredictedStepUsAttrHelper::getNameStr())
    return c.is<FloatAttr>(Host::Module, "a float");
  // Function.
  if (name == PlanAttrHelper::getNameStr() ||
      name == PipelineAttrHelper::getNameStr())
    return c.is<DictionaryAttr>(Host::Function, "a dictionary");
  if (name == ContentionAttrHelper::getNameStr())
    return c.oneOf(Host::Function, {"overlap", "separate", "yield"});
  if (name == CopyChunkBytesAttrHelper::getNameStr() ||
      name == RanksPerHostAttrHelper::getNameStr() ||
      name == FsdpWorldAttrHelper::getNameStr())
    return c.integer(Host::Function, 1);
  // Nodes.
  if (name == NodeIdAttrHelper::getNameStr())
    return c.integer(Host::Node, std::numeric_limits<int64_t>::min());
  if (name == AttrsAttrHelper::getNameStr())
    return c.is<DictionaryAttr>(Host::Node, "a dictionary");
  if (name == CostSourceAttrHelper::getNameStr())
    return c.oneOf(Host::Node, {"measured", "analytic", "bandwidth"});
  if (name == DecisionsAttrHelper::getNameStr())
    return c.decisions();
  if (name == PlacementAttrHelper::getNameStr())
    return c.placement();
  if (name == SavedAttrHelper::getNameStr())
    return c.savedResults();
  // Any op of a scheduled or pipelined program.
  if (name == MbAttrHelper::getNameStr() ||
      name == ChunkAttrHelper::getNameStr())
    return c.integer(Host::Op, 0);
  if (name == StreamAttrHelper::getNameStr())
    return c.is<StreamAttr>(Host::Op, "a #lethe<stream ...>");
  if (name == OffsetsAttrHelper::getNameStr())
    return c.is<DenseI64ArrayAttr>(Host::Op, "an array<i64>");
  if (name == P2pGroupAttrHelper::getNameStr())
    return c.integer(Host::Op, 0);
  if (name == KindAttrHelper::getNameStr() ||
      name == NameAttrHelper::getNameStr() ||
      name == FullTypeAttrHelper::getNameStr() ||
      name == GradOfAttrHelper::getNameStr())
    return c.error() << "belongs on a function argument or result";
  return c.error() << "is not a Lethe attribute";
}

LogicalResult LetheDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned region,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  std::string what = "argument #" + std::to_string(argIndex);
  AttrChecker c(op, attr, what);
  StringRef name = c.name;
  if (name == KindAttrHelper::getNameStr())
    return c.oneOf(Host::Op, {"param", "input", "buffer", "tangent"});
  if (name == NameAttrHelper::getNameStr())
    return c.is<StringAttr>(Host::Op, "a string");
  if (name == SavedAttrHelper::getNameStr())
    return c.is<UnitAttr>(Host::Op, "unit");
  if (name == FullTypeAttrHelper::getNameStr())
    return c.is<TypeAttr>(Host::Op, "a type");
  if (name == MbAttrHelper::getNameStr())
    return c.integer(Host::Op, 0);
  return c.error() << "is not a Lethe argument attribute";
}

LogicalResult LetheDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned region,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  std::string what = "result #" + std::to_string(resultIndex);
  AttrChecker c(op, attr, what);
  StringRef name = c.name;
  if (name == GradOfAttrHelper::getNameStr() ||
      name == NameAttrHelper::getNameStr())
    return c.is<StringAttr>(Host::Op, "a string");
  if (name == MbAttrHelper::getNameStr())
    return c.integer(Host::Op, 0);
  return c.error() << "is not a Lethe result attribute";
}

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

  /// A string among `allowed`.
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

/// Per result: unit, or a #lethe.placement<...> of a recomputed or
/// offloaded result (an offload's with its copies).
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
    auto decision = index < decisionList.size()
                        ? dyn_cast<DecisionAttr>(decisionList[index])
                        : DecisionAttr();
    if (!decision || decision.getValue() == Decision::Retain)
      return error() << "entry " << index
                     << " places a result that is neither recomputed nor "
                        "offloaded";
    auto placement = dyn_cast<PlacementAttr>(entry);
    if (!placement)
      return error() << "entry " << index
                     << " must be a #lethe.placement<...> or unit, got "
                     << entry;
    if (decision.getValue() == Decision::Offload &&
        !placement.getReleaseAfter())
      return error() << "entry " << index
                     << " places an offload without 'release_after' and "
                        "'prefetch_after'";
    // What the parser checks, checked again where a pass built it.
    if (failed(PlacementAttr::verify(
            [&] { return error() << "entry " << index << ": "; },
            placement.getRestoreBefore(), placement.getReleaseAfter(),
            placement.getPrefetchAfter(), placement.getNodes())))
      return failure();
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
  if (name == TotalsAttrHelper::getNameStr()) {
    if (failed(c.is<TotalsAttr>(Host::Module, "a #lethe.totals<...>")))
      return failure();
    return TotalsAttr::verify([&] { return c.error(); },
                              cast<TotalsAttr>(c.value).getNumbers());
  }
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
  if (name == PlanAttrHelper::getNameStr()) {
    if (failed(c.is<PlanAttr>(Host::Function, "a #lethe.plan<...>")))
      return failure();
    auto plan = cast<PlanAttr>(c.value);
    return PlanAttr::verify(
        [&] { return c.error(); }, plan.getPolicy(), plan.getBudgetBytes(),
        plan.getFeasible(), plan.getPeakBytes(), plan.getBaselinePeakBytes(),
        plan.getStepUs(), plan.getBaselineStepUs(), plan.getOverhead(),
        plan.getLowerBoundOverhead(), plan.getReplayRng());
  }
  if (name == PipelineAttrHelper::getNameStr()) {
    if (failed(c.is<PipelineAttr>(Host::Function, "a #lethe.pipeline<...>")))
      return failure();
    auto pipeline = cast<PipelineAttr>(c.value);
    return PipelineAttr::verify(
        [&] { return c.error(); }, pipeline.getSchedule(), pipeline.getStages(),
        pipeline.getStage(), pipeline.getMicrobatches(), pipeline.getVpp());
  }
  if (name == ContentionAttrHelper::getNameStr())
    return c.is<CopyContentionAttr>(Host::Function, "a #lethe<contention ...>");
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
    return c.is<CostSourceAttr>(Host::Node, "a #lethe<cost_source ...>");
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

//===----------------------------------------------------------------------===//
// Plan attributes
//===----------------------------------------------------------------------===//

LogicalResult PlacementAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t restoreBefore,
    std::optional<int64_t> releaseAfter, std::optional<int64_t> prefetchAfter,
    ArrayRef<int64_t> nodes) {
  // Nodes are named by `lethe.node_id`, any i64: whether a node has that id
  // is the reader's check (readPlanAttributes), in its function.
  if (releaseAfter.has_value() != prefetchAfter.has_value())
    return emitError()
           << "an offload needs both release_after and prefetch_after";
  return success();
}

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               Policy policy, int64_t budgetBytes,
                               bool feasible, int64_t peakBytes,
                               int64_t baselinePeakBytes, APFloat stepUs,
                               APFloat baselineStepUs, APFloat overhead,
                               std::optional<APFloat> lowerBoundOverhead,
                               bool replayRng) {
  if (budgetBytes < 0 || peakBytes < 0 || baselinePeakBytes < 0)
    return emitError() << "budget_bytes, peak_bytes and baseline_peak_bytes "
                          "must be at least 0";
  if (!(stepUs.convertToDouble() >= 0.0) ||
      !(baselineStepUs.convertToDouble() >= 0.0))
    return emitError() << "step_us and baseline_step_us must be at least 0";
  return success();
}

LogicalResult PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   PipelineScheduleKind schedule,
                                   int64_t stages, int64_t stage,
                                   int64_t microbatches, int64_t vpp) {
  if (stages < 1 || microbatches < 1 || vpp < 1)
    return emitError() << "stages, microbatches and vpp must be at least 1";
  if (stage < 0 || stage >= stages)
    return emitError() << "stage must be in [0, " << stages << "), got "
                       << stage;
  return success();
}

LogicalResult TotalsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 DictionaryAttr numbers) {
  // The importer's numbers: integers that fit an i64, else doubles.
  for (NamedAttribute entry : numbers) {
    Attribute value = entry.getValue();
    auto integer = dyn_cast<IntegerAttr>(value);
    auto real = dyn_cast<FloatAttr>(value);
    if ((integer && integer.getType().isSignlessInteger(64)) ||
        (real && real.getType().isF64()))
      continue;
    return emitError() << "'" << entry.getName().getValue()
                       << "' must be an i64 or an f64, got " << value;
  }
  return success();
}

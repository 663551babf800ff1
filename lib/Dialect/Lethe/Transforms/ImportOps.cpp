//===- ImportOps.cpp - Normalise imported ops into the lethe graph form ---===//
//
// Rewrites the ops of generic-form PyTorch / JAX exports and of upstream
// tensor dialects into `lethe.node`s, in program order, so that each op's
// operands are already rewritten when it is reached: phases can then be
// inferred in the same walk.
//
//===----------------------------------------------------------------------===//

#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Import/GenericOps.h"
#include "lethe/Import/ImportCommon.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace lethe {
#define GEN_PASS_DEF_IMPORTOPS
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

/// Calls nested deeper than this are taken for recursion.
constexpr unsigned kMaxInlineDepth = 64;

/// Dense constants with more elements than this are not copied into
/// `lethe.attrs`: planning needs their size, not their contents.
constexpr int64_t kMaxKeptElements = 16;

/// Ops whose results are views of operand 0: tensor reshapes and slices,
/// and torch-mlir's casts between its tensors and builtin ones.
constexpr StringLiteral kViewOps[] = {"tensor.expand_shape",
                                      "tensor.collapse_shape",
                                      "tensor.extract_slice",
                                      "tensor.cast",
                                      "tensor.bitcast",
                                      "tensor.reshape",
                                      "torch_c.to_builtin_tensor",
                                      "torch_c.from_builtin_tensor",
                                      "torch.tensor_static_info_cast"};

/// Ops that pass every operand through unchanged: result i is operand i
/// (JAX's remat barrier).
constexpr StringLiteral kIdentityOps[] = {"stablehlo.optimization_barrier",
                                          "mhlo.optimization_barrier"};

struct ImportOpsPass : lethe::impl::ImportOpsBase<ImportOpsPass> {
  void runOnOperation() override;

private:
  LogicalResult inlineCalls(ModuleOp module,
                            DenseSet<Operation *> &inlinedCallees);
  LogicalResult importFunction(func::FuncOp func);
  LogicalResult importOp(Operation *op);

  /// Values that transitively depend on a gradient seed.
  DenseSet<Value> seedDependent;
};

} // namespace

LogicalResult
ImportOpsPass::inlineCalls(ModuleOp module,
                           DenseSet<Operation *> &inlinedCallees) {
  SymbolTable symbols(module);
  for (unsigned depth = 0;; ++depth) {
    SmallVector<func::CallOp> calls;
    module.walk([&](func::CallOp call) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (callee && !callee.isExternal() && callee.getBody().hasOneBlock())
        calls.push_back(call);
    });
    if (calls.empty())
      break;
    if (depth == kMaxInlineDepth)
      return calls.front().emitError("calls nest deeper than ")
             << kMaxInlineDepth << " levels (recursion?)";
    for (func::CallOp call : calls) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      Block &body = callee.getBody().front();
      IRMapping mapping;
      mapping.map(body.getArguments(), call.getOperands());
      OpBuilder builder(call);
      for (Operation &op : body.without_terminator())
        builder.clone(op, mapping);
      for (auto [result, returned] :
           llvm::zip(call.getResults(), body.getTerminator()->getOperands()))
        result.replaceAllUsesWith(mapping.lookupOrDefault(returned));
      call.erase();
      inlinedCallees.insert(callee);
      ++numInlined;
    }
  }
  return success();
}

/// The first replica group of a StableHLO collective
/// (`replica_groups = dense<[[0, 1], [2, 3]]>`), without -1 padding.
static SmallVector<int64_t> getReplicaGroup(Attribute attr) {
  SmallVector<int64_t> group;
  auto groups = dyn_cast_or_null<DenseIntElementsAttr>(attr);
  if (!groups || groups.getType().getRank() != 2)
    return group;
  int64_t size = groups.getType().getDimSize(1);
  for (APInt rank : llvm::make_range(groups.value_begin<APInt>(),
                                     groups.value_begin<APInt>() + size))
    if (!rank.isNegative())
      group.push_back(rank.getSExtValue());
  return group;
}

/// Whether an attribute is a large constant payload not worth keeping.
static bool isLargePayload(Attribute attr) {
  if (isa<DenseResourceElementsAttr>(attr))
    return true;
  auto elements = dyn_cast<ElementsAttr>(attr);
  return elements && !elements.isSplat() &&
         elements.getNumElements() > kMaxKeptElements;
}

/// An attribute of an unregistered dialect (`#stablehlo.dot<...>`), or one
/// holding such, as its printed text, so that the graph form parses without
/// `--allow-unregistered-dialect`.
static Attribute makeRegistered(Attribute attr) {
  if (auto dict = dyn_cast<DictionaryAttr>(attr)) {
    NamedAttrList entries;
    for (NamedAttribute entry : dict)
      entries.append(entry.getName(), makeRegistered(entry.getValue()));
    return entries.getDictionary(attr.getContext());
  }
  bool opaque = false;
  attr.walk([&](Attribute inner) { opaque |= isa<OpaqueAttr>(inner); },
            [&](Type inner) { opaque |= isa<OpaqueType>(inner); });
  if (!opaque)
    return attr;
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return StringAttr::get(attr.getContext(), text);
}

LogicalResult ImportOpsPass::importOp(Operation *op) {
  MLIRContext *context = op->getContext();
  Builder b(context);
  StringRef opName = op->getName().getStringRef();
  if (isControlFlowKind(opName))
    return op->emitError("cannot import control flow ('")
           << opName
           << "'): the graph form is one straight-line step; unroll or inline "
              "it before exporting";
  std::string kind = getCanonicalKind(op);

  // Source attributes: those with a place of their own, and the rest.
  NamedAttrList attrs(op->getAttrDictionary());
  if (auto properties =
          dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    for (NamedAttribute property : properties)
      if (!attrs.get(property.getName()))
        attrs.push_back(property);
  auto take = [&](StringRef key) {
    Attribute value = attrs.get(key);
    if (value)
      attrs.erase(key);
    return value;
  };
  Attribute phaseAttr = take("phase"), timeAttr = take("time_us"),
            scopeAttr = take("scope"), fxName = take("fx_name");
  bool isView = take("is_view") != nullptr;
  take("overload");
  for (StringRef key : {"operandSegmentSizes", "resultSegmentSizes",
                        "operand_segment_sizes", "result_segment_sizes"})
    take(key);
  for (NamedAttribute attr : llvm::to_vector(attrs)) {
    if (isLargePayload(attr.getValue()))
      attrs.erase(attr.getName());
    else
      attrs.set(attr.getName(), makeRegistered(attr.getValue()));
  }

  std::optional<Phase> explicitPhase;
  if (phaseAttr) {
    if (auto phase = dyn_cast<PhaseAttr>(phaseAttr))
      explicitPhase = phase.getValue();
    else if (auto name = dyn_cast<StringAttr>(phaseAttr))
      explicitPhase = symbolizePhase(name.getValue());
    if (!explicitPhase)
      return op->emitError("unknown phase ")
             << phaseAttr << " (expected \"fwd\", \"bwd\" or \"opt\")";
  }
  FloatAttr time;
  if (timeAttr) {
    std::optional<double> us;
    if (auto f = dyn_cast<FloatAttr>(timeAttr))
      us = f.getValueAsDouble();
    else if (auto i = dyn_cast<IntegerAttr>(timeAttr))
      us = static_cast<double>(i.getInt());
    if (!us || !std::isfinite(*us) || *us < 0)
      return op->emitError("time_us must be a non-negative number, got ")
             << timeAttr;
    if (*us > kMaxTimeUs)
      return op->emitError("time_us must be at most ")
             << formatNumber(kMaxTimeUs) << " us, got " << formatNumber(*us);
    time = b.getF64FloatAttr(*us);
  }
  StringAttr scope;
  if (auto path = dyn_cast_or_null<StringAttr>(scopeAttr))
    if (StringRef stripped = stripDynamoScope(path.getValue());
        !stripped.empty())
      scope = b.getStringAttr(stripped);
  StringAttr name = dyn_cast_or_null<StringAttr>(fxName);
  if (!name)
    if (std::optional<StringRef> locName = getLocationName(op->getLoc()))
      name = b.getStringAttr(*locName);

  // Operands: tensors (and other computed values) become inputs; scalar
  // constants and lists are folded into the positional args.
  SmallVector<Value> inputs;
  SmallVector<int64_t> inputOfOperand(op->getNumOperands(), -1);
  bool folded = false;
  std::function<Attribute(Value)> argFor = [&](Value value) -> Attribute {
    Operation *def = value.getDefiningOp();
    if (def && isScalarConstant(def)) {
      folded = true;
      return makeRegistered(getScalarConstantValue(def));
    }
    if (def && isListConstruct(def)) {
      folded = true;
      SmallVector<Attribute> elements;
      for (Value element : def->getOperands())
        elements.push_back(argFor(element));
      return b.getArrayAttr(elements);
    }
    inputs.push_back(value);
    return b.getDictionaryAttr(b.getNamedAttr(
        "in", b.getI64IntegerAttr(static_cast<int64_t>(inputs.size() - 1))));
  };
  SmallVector<Attribute> args;
  for (OpOperand &operand : op->getOpOperands()) {
    size_t before = inputs.size();
    Operation *def = operand.get().getDefiningOp();
    bool direct = !def || (!isScalarConstant(def) && !isListConstruct(def));
    args.push_back(argFor(operand.get()));
    if (direct)
      inputOfOperand[operand.getOperandNumber()] = static_cast<int64_t>(before);
  }
  for (Value input : inputs) {
    std::string reason;
    Type canonical = convertImportedType(input.getType(), reason);
    if (canonical != input.getType())
      return op->emitError("operand of type ")
             << input.getType() << " was not imported"
             << (reason.empty() ? "" : ": ") << reason;
  }

  SmallVector<Type> resultTypes;
  for (OpResult result : op->getResults()) {
    std::string reason;
    Type type = convertImportedType(result.getType(), reason);
    if (!type)
      return op->emitError("cannot import result #")
             << result.getResultNumber() << " of type " << result.getType()
             << ": " << reason;
    resultTypes.push_back(type);
  }

  // Aliasing: views, in-place results, destination-passing outs.
  SmallVector<int64_t> aliases(op->getNumResults(), -1);
  auto aliasOperand = [&](unsigned resultIndex, unsigned operandIndex) {
    if (operandIndex >= inputOfOperand.size() ||
        inputOfOperand[operandIndex] < 0 ||
        !isa<RankedTensorType>(resultTypes[resultIndex]) ||
        !isa<RankedTensorType>(inputs[inputOfOperand[operandIndex]].getType()))
      return;
    aliases[resultIndex] = inputOfOperand[operandIndex];
  };
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op)) {
    for (OpResult result : op->getResults())
      if (OpOperand *init = dps.getTiedOpOperand(result))
        aliasOperand(result.getResultNumber(), init->getOperandNumber());
  } else if (isView || isAtenViewKind(kind) ||
             StringRef(kind).contains("wait_tensor") ||
             llvm::is_contained(kViewOps, opName)) {
    for (unsigned i = 0, e = op->getNumResults(); i < e; ++i)
      aliasOperand(i, 0);
  } else if (llvm::is_contained(kIdentityOps, opName)) {
    for (unsigned i = 0, e = op->getNumResults(); i < e; ++i)
      aliasOperand(i, i);
  } else if (opName == "tensor.insert_slice") {
    aliasOperand(0, 1);
  } else if (isAtenInPlaceKind(kind) && op->getNumResults() > 0) {
    aliasOperand(0, 0);
  }
  bool hasAlias = llvm::any_of(aliases, [](int64_t a) { return a >= 0; });

  // Phase: explicit wins; else backward iff seed-dependent or transposed.
  bool dependsOnSeed = llvm::any_of(
      inputs, [&](Value input) { return seedDependent.contains(input); });
  Phase phase = Phase::Fwd;
  if (explicitPhase) {
    phase = *explicitPhase;
  } else if (dependsOnSeed || isTransposedNameStack(op->getLoc())) {
    phase = Phase::Bwd;
    ++numBackward;
  }

  OpBuilder builder(op);
  ArrayAttr argsAttr = folded ? b.getArrayAttr(args) : ArrayAttr();
  Operation *imported = nullptr;
  if (std::optional<CollectiveKind> collective = getCollectiveKind(kind)) {
    SmallVector<int64_t> group = getReplicaGroup(attrs.get("replica_groups"));
    if (group.empty())
      if (std::optional<int64_t> size =
              getC10dGroupSize(*collective, b.getArrayAttr(args)))
        group = llvm::to_vector(llvm::seq<int64_t>(0, *size));
    if (!group.empty())
      imported =
          createCollectiveIfValid(builder, op->getLoc(), *collective, inputs,
                                  resultTypes, group, phase, time, scope, name);
    if (imported) {
      ++numCollectives;
      if (argsAttr)
        attrs.set("args", argsAttr);
    }
  }
  if (!imported) {
    imported = NodeOp::create(
        builder, op->getLoc(), resultTypes, b.getStringAttr(kind),
        PhaseAttr::get(context, phase), inputs, time,
        hasAlias ? b.getDenseI64ArrayAttr(aliases) : DenseI64ArrayAttr(), scope,
        name, argsAttr);
    ++numNodes;
  }
  if (!attrs.empty())
    LetheDialect::AttrsAttrHelper(imported->getContext())
        .setAttr(imported, attrs.getDictionary(context));
  if (dependsOnSeed || phase == Phase::Bwd)
    seedDependent.insert(imported->result_begin(), imported->result_end());
  op->replaceAllUsesWith(imported->getResults());
  op->erase();
  return success();
}

LogicalResult ImportOpsPass::importFunction(func::FuncOp func) {
  if (func.isExternal())
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitError("expects a single-block function body (the graph "
                          "form is one straight-line step)");
  MLIRContext *context = &getContext();
  Block &block = func.getBody().front();
  seedDependent.clear();

  // Argument and result attributes of unregistered dialects (shardings).
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (DictionaryAttr attrs = func.getArgAttrDict(i))
      func.setArgAttrs(i, cast<DictionaryAttr>(makeRegistered(attrs)));
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (DictionaryAttr attrs = func.getResultAttrDict(i))
      func.setResultAttrs(i, cast<DictionaryAttr>(makeRegistered(attrs)));

  for (BlockArgument arg : block.getArguments()) {
    std::string reason;
    Type type = convertImportedType(arg.getType(), reason);
    if (!type)
      return emitError(arg.getLoc(), "cannot import argument #")
             << arg.getArgNumber() << " of type " << arg.getType() << ": "
             << reason;
    arg.setType(type);
    unsigned index = arg.getArgNumber();
    auto name = func.getArgAttrOfType<StringAttr>(
        index, LetheDialect::NameAttrHelper::getNameStr());
    if (!name)
      if (std::optional<StringRef> locName = getLocationName(arg.getLoc())) {
        name = StringAttr::get(context, *locName);
        func.setArgAttr(index, LetheDialect::NameAttrHelper::getNameStr(),
                        name);
      }
    auto kind = func.getArgAttrOfType<StringAttr>(
        index, LetheDialect::KindAttrHelper::getNameStr());
    if (!kind && name && name.getValue().starts_with("tangents_")) {
      kind = StringAttr::get(context, "tangent");
      func.setArgAttr(index, LetheDialect::KindAttrHelper::getNameStr(), kind);
    }
    if (kind && kind.getValue() == "tangent")
      seedDependent.insert(arg);
  }

  SmallVector<Operation *> deferred;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (isa_and_nonnull<LetheDialect>(op.getDialect())) {
      // Already canonical; it still carries seed dependence.
      bool backward = false;
      if (auto node = dyn_cast<NodeOp>(op))
        backward = node.getPhase() == Phase::Bwd;
      else if (auto collective = dyn_cast<CollectiveOp>(op))
        backward = collective.getPhase() == Phase::Bwd;
      if (backward || llvm::any_of(op.getOperands(), [&](Value operand) {
            return seedDependent.contains(operand);
          }))
        seedDependent.insert(op.result_begin(), op.result_end());
      continue;
    }
    if (isScalarConstant(&op) || isListConstruct(&op)) {
      deferred.push_back(&op);
      continue;
    }
    if (failed(importOp(&op)))
      return failure();
  }
  // Folded constants and lists nothing reads any more go; any other reader
  // (the return) keeps them as nodes.
  SmallVector<Operation *> kept;
  for (Operation *op : llvm::reverse(deferred)) {
    if (op->use_empty()) {
      op->erase();
      ++numFolded;
    } else {
      kept.push_back(op);
    }
  }
  for (Operation *op : llvm::reverse(kept))
    if (failed(importOp(op)))
      return failure();

  func.setType(FunctionType::get(context, block.getArgumentTypes(),
                                 block.getTerminator()->getOperandTypes()));
  return success();
}

void ImportOpsPass::runOnOperation() {
  ModuleOp module = getOperation();
  DenseSet<Operation *> inlinedCallees;
  if (failed(inlineCalls(module, inlinedCallees)))
    return signalPassFailure();
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (!inlinedCallees.contains(func) && failed(importFunction(func)))
      return signalPassFailure();
  // Private callees nothing refers to any more go (uses are only known once
  // no unregistered op, which might hold symbol references, is left).
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
    if (!inlinedCallees.contains(func))
      continue;
    if (func.isPrivate() && SymbolTable::symbolKnownUseEmpty(func, module))
      func.erase();
    else if (failed(importFunction(func)))
      return signalPassFailure();
  }
}

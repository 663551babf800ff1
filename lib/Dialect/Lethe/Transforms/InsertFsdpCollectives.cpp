//===- InsertFsdpCollectives.cpp - FSDP / ZeRO-3 form of a step -----------===//
//
// Shards the parameters of a single-rank training step over `world` ranks and
// inserts the collectives FSDP runs: a per-unit all-gather before each phase
// uses the unit's parameters, and a per-unit reduce-scatter of the
// gradients. The rules are in the pass description (Passes.td) and in
// docs/Parallel.md.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/NodeIds.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Remarks.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace lethe {
#define GEN_PASS_DEF_INSERTFSDPCOLLECTIVES
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

/// Phases that read gathered parameters; the optimizer is not supported.
enum PhaseSlot { FwdSlot = 0, BwdSlot = 1, NumSlots = 2 };

struct Param {
  BlockArgument arg;
  std::string name;
  RankedTensorType fullType;
  /// The rank's shard; equals fullType for a replicated (scalar) parameter.
  RankedTensorType shardType;
  unsigned unit = 0;
  /// Index of the step result holding its gradient, or -1.
  int gradResult = -1;
  /// The gathered full value each phase reads (null until gathered).
  Value gathered[NumSlots];

  bool isSharded() const { return fullType != shardType; }
  int64_t shardElements() const { return shardType.getNumElements(); }
};

struct Unit {
  std::string key;
  SmallVector<unsigned> params;
  /// Per phase: the first op reading one of the unit's parameters, and the
  /// parameters that phase reads.
  Operation *firstUse[NumSlots] = {nullptr, nullptr};
  SmallVector<unsigned> used[NumSlots];
};

/// FSDP unit of a parameter name: the prefix up to the first all-digit
/// component (a repeated block), else the module path (the name without its
/// last component).
std::string unitKey(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (auto [index, part] : llvm::enumerate(parts))
    if (index > 0 && !part.empty() && llvm::all_of(part, llvm::isDigit))
      return llvm::join(ArrayRef(parts).take_front(index + 1), ".");
  if (parts.size() > 1)
    return llvm::join(ArrayRef(parts).drop_back(), ".");
  return name.str();
}

std::optional<PhaseSlot> slotOf(Operation *op) {
  Phase phase;
  if (auto node = dyn_cast<NodeOp>(op))
    phase = node.getPhase();
  else if (auto coll = dyn_cast<CollectiveOp>(op))
    phase = coll.getPhase();
  else
    return std::nullopt;
  switch (phase) {
  case Phase::Fwd:
    return FwdSlot;
  case Phase::Bwd:
    return BwdSlot;
  case Phase::Opt:
    return std::nullopt;
  }
  return std::nullopt;
}

Phase phaseOf(PhaseSlot slot) {
  return slot == FwdSlot ? Phase::Fwd : Phase::Bwd;
}

struct InsertFsdpCollectivesPass
    : public lethe::impl::InsertFsdpCollectivesBase<InsertFsdpCollectivesPass> {
  using InsertFsdpCollectivesBase::InsertFsdpCollectivesBase;

  void runOnOperation() override;

private:
  LogicalResult collectParams(func::FuncOp func);
  LogicalResult findUses(func::FuncOp func);
  LogicalResult matchGradients(func::FuncOp func, func::ReturnOp ret);
  void gather(Unit &unit, PhaseSlot slot, Operation *before);
  Value cloneViewChain(Value value, OpBuilder &builder);
  LogicalResult rewriteUses(ArrayRef<Operation *> ops);
  void reduceScatter(Unit &unit, func::ReturnOp ret,
                     SmallVectorImpl<Value> &results);
  Value createCollective(OpBuilder &builder, Location loc, CollectiveKind kind,
                         Value input, RankedTensorType resultType, Phase phase,
                         StringRef unitName, StringRef what);
  /// Buckets of one unit's parameters: one per element type (or one per
  /// parameter with bucket=param), in parameter order.
  SmallVector<SmallVector<unsigned>> buckets(ArrayRef<unsigned> params);

  SmallVector<Param> params;
  SmallVector<Unit> units;
  /// The parameter whose storage a value shares (the parameter itself or a
  /// view of it).
  DenseMap<Value, unsigned> rootParam;
  /// Backward clones of forward views of parameters.
  DenseMap<Operation *, Operation *> backwardViews;
  DenseMap<Operation *, unsigned> position;
  SmallVector<int64_t> group;
};

void InsertFsdpCollectivesPass::runOnOperation() {
  func::FuncOp func = getOperation();
  params.clear();
  units.clear();
  rootParam.clear();
  backwardViews.clear();
  position.clear();

  if (func.isExternal())
    return;
  if (world < 1) {
    emitError(func.getLoc())
        << "lethe-insert-fsdp-collectives: world must be >= 1, "
           "got "
        << static_cast<int64_t>(world);
    return signalPassFailure();
  }
  if (ranksPerHost < 0 || ranksPerHost > world) {
    emitError(func.getLoc())
        << "lethe-insert-fsdp-collectives: ranks-per-host must be in [0, "
        << static_cast<int64_t>(world) << "] (0: all ranks), got "
        << static_cast<int64_t>(ranksPerHost);
    return signalPassFailure();
  }
  if (prefetch < 0) {
    emitError(func.getLoc())
        << "lethe-insert-fsdp-collectives: prefetch must be >= 0, got "
        << static_cast<int64_t>(prefetch);
    return signalPassFailure();
  }
  if (bucket != "unit" && bucket != "param") {
    emitError(func.getLoc()) << "lethe-insert-fsdp-collectives: bucket must be "
                                "'unit' or 'param', got '"
                             << bucket << "'";
    return signalPassFailure();
  }
  if (LetheDialect::FsdpWorldAttrHelper(func->getContext())
          .isAttrPresent(func)) {
    emitError(func.getLoc())
        << "step is already sharded for FSDP ("
        << LetheDialect::FsdpWorldAttrHelper::getNameStr() << " is set)";
    return signalPassFailure();
  }
  if (!func.getBody().hasOneBlock()) {
    emitError(func.getLoc())
        << "lethe-insert-fsdp-collectives expects a step with "
           "one block (the canonical graph form)";
    return signalPassFailure();
  }
  if (failed(collectParams(func)))
    return signalPassFailure();
  if (params.empty())
    return;
  group.assign(llvm::to_vector(llvm::seq<int64_t>(0, world)));

  Block &body = func.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret) {
    emitError(func.getLoc()) << "step body must end in func.return";
    return signalPassFailure();
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  if (failed(findUses(func)) || failed(matchGradients(func, ret)))
    return signalPassFailure();

  // Per phase, units in the order the phase first reads them; each unit's
  // all-gather is issued `prefetch` units ahead (FSDP's prefetch), so that
  // it can overlap the compute of the unit before.
  for (PhaseSlot slot : {FwdSlot, BwdSlot}) {
    SmallVector<Unit *> order;
    for (Unit &unit : units)
      if (unit.firstUse[slot])
        order.push_back(&unit);
    llvm::stable_sort(order, [&](Unit *a, Unit *b) {
      return position.lookup(a->firstUse[slot]) <
             position.lookup(b->firstUse[slot]);
    });
    for (auto [index, unit] : llvm::enumerate(order)) {
      size_t ahead = std::min<size_t>(index, static_cast<size_t>(prefetch));
      gather(*unit, slot, order[index - ahead]->firstUse[slot]);
    }
  }
  if (failed(rewriteUses(ops)))
    return signalPassFailure();

  SmallVector<Value> results(ret.getOperands());
  for (Unit &unit : units)
    reduceScatter(unit, ret, results);
  ret->setOperands(results);

  // The signature: shards in, gradient shards out.
  for (Param &param : params) {
    param.arg.setType(param.shardType);
    if (param.isSharded())
      func.setArgAttr(param.arg.getArgNumber(),
                      LetheDialect::FullTypeAttrHelper::getNameStr(),
                      TypeAttr::get(param.fullType));
  }
  func.setType(FunctionType::get(&getContext(), body.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  for (const Param &param : params)
    if (param.gradResult >= 0)
      func.setResultAttr(param.gradResult,
                         LetheDialect::GradOfAttrHelper::getNameStr(),
                         StringAttr::get(&getContext(), param.name));
  LetheDialect::FsdpWorldAttrHelper(func->getContext())
      .setAttr(func,
               IntegerAttr::get(IntegerType::get(&getContext(), 64), world));
  LetheDialect::RanksPerHostAttrHelper(func->getContext())
      .setAttr(func, IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                      ranksPerHost > 0 ? ranksPerHost : world));
  // A node copied to each use of a gathered parameter is a node of its own
  // for the plan.
  renumberRepeatedNodeIds(func);
}

LogicalResult InsertFsdpCollectivesPass::collectParams(func::FuncOp func) {
  llvm::StringMap<unsigned> unitIndex;
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto kind = func.getArgAttrOfType<StringAttr>(
        index, LetheDialect::KindAttrHelper::getNameStr());
    if (!kind || kind.getValue() != "param")
      continue;
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      return emitError(arg.getLoc())
             << "parameter argument " << index
             << " must be a statically shaped tensor to be sharded, got "
             << arg.getType();
    Param param;
    param.arg = arg;
    auto name = func.getArgAttrOfType<StringAttr>(
        index, LetheDialect::NameAttrHelper::getNameStr());
    param.name = name ? name.getValue().str() : ("arg" + Twine(index)).str();
    param.fullType = type;
    param.shardType = type;
    if (type.getRank() > 0) {
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = llvm::divideCeil(shape[0], world);
      param.shardType = RankedTensorType::get(shape, type.getElementType());
    }
    std::string key = unitKey(param.name);
    auto [it, inserted] = unitIndex.try_emplace(key, units.size());
    if (inserted) {
      units.emplace_back();
      units.back().key = key;
    }
    param.unit = it->second;
    units[param.unit].params.push_back(params.size());
    params.push_back(param);
    if (param.isSharded())
      ++numShardedParams;
    int64_t padding =
        param.isSharded()
            ? param.shardType.getDimSize(0) * world - type.getDimSize(0)
            : 0;
    if (padding != 0) {
      ++numPaddedParams;
      // A count; which parameter and how much padding is an analysis remark
      // (--remarks-filter=lethe-insert-fsdp-collectives).
      remark::analysis(arg.getLoc(), remark::RemarkOpts::name("padding")
                                         .category(getArgument())
                                         .function(func.getSymName()))
          << llvm::formatv("parameter '{0}': dimension 0 ({1}) is not "
                           "divisible by {2} ranks; each rank holds {3} "
                           "rows, the last {4} of them zero padding",
                           param.name, type.getDimSize(0),
                           static_cast<int64_t>(world),
                           param.shardType.getDimSize(0), padding)
                 .str();
    }
  }
  numUnits += units.size();
  return success();
}

LogicalResult InsertFsdpCollectivesPass::findUses(func::FuncOp func) {
  for (auto [index, param] : llvm::enumerate(params))
    rootParam[param.arg] = index;
  for (Operation &op : func.getBody().front()) {
    // Views of parameters share their storage.
    if (auto node = dyn_cast<NodeOp>(&op))
      for (OpResult result : node->getResults()) {
        int64_t aliased = node.getAliasedOperand(result.getResultNumber());
        if (aliased < 0)
          continue;
        auto it = rootParam.find(node->getOperand(aliased));
        if (it != rootParam.end())
          rootParam[result] = it->second;
      }
    for (Value operand : op.getOperands()) {
      auto it = rootParam.find(operand);
      if (it == rootParam.end())
        continue;
      const Param &param = params[it->second];
      if (!param.isSharded())
        continue;
      if (isa<func::ReturnOp>(op))
        return op.emitError()
               << "the step returns parameter '" << param.name
               << "' (or a view of it), which FSDP shards; only its "
                  "gradient can be returned";
      std::optional<PhaseSlot> slot = slotOf(&op);
      if (!slot)
        return op.emitError()
               << "reads parameter '" << param.name
               << "' outside the forward and backward phases; "
                  "lethe-insert-fsdp-collectives does not shard optimizer "
                  "steps";
      // A forward op reading a view made in the forward reads the view, not
      // the parameter: only the view's producer needs the gathered value.
      // The backward re-makes forward views, so it reads the parameter.
      if (*slot == FwdSlot && operand != param.arg)
        continue;
      Unit &unit = units[param.unit];
      if (!unit.firstUse[*slot])
        unit.firstUse[*slot] = &op;
      if (!llvm::is_contained(unit.used[*slot], it->second))
        unit.used[*slot].push_back(it->second);
    }
  }
  for (Unit &unit : units)
    for (SmallVector<unsigned> &used : unit.used)
      llvm::sort(used);
  return success();
}

LogicalResult InsertFsdpCollectivesPass::matchGradients(func::FuncOp func,
                                                        func::ReturnOp ret) {
  llvm::StringMap<unsigned> byName;
  for (auto [index, param] : llvm::enumerate(params))
    byName[param.name] = index;
  bool named = false;
  for (unsigned result = 0, e = ret.getNumOperands(); result < e; ++result) {
    auto gradOf = func.getResultAttrOfType<StringAttr>(
        result, LetheDialect::GradOfAttrHelper::getNameStr());
    if (!gradOf)
      continue;
    named = true;
    auto it = byName.find(gradOf.getValue());
    if (it == byName.end())
      return ret.emitError()
             << "result " << result << " is the gradient of '"
             << gradOf.getValue() << "', which is not a parameter of the step";
    Param &param = params[it->second];
    if (param.gradResult >= 0)
      return ret.emitError()
             << "results " << param.gradResult << " and " << result
             << " are both gradients of '" << param.name << "'";
    if (ret.getOperand(result).getType() != param.fullType)
      return ret.emitError()
             << "result " << result << " (gradient of '" << param.name
             << "') has type " << ret.getOperand(result).getType()
             << ", expected " << param.fullType;
    param.gradResult = result;
  }
  if (named)
    return success();
  // Importers return gradients in parameter order: match each parameter to
  // the next result of its type that the backward produces.
  unsigned next = 0;
  for (Param &param : params) {
    for (unsigned result = next, e = ret.getNumOperands(); result < e;
         ++result) {
      Value grad = ret.getOperand(result);
      Operation *producer = grad.getDefiningOp();
      if (grad.getType() != param.fullType || !producer ||
          slotOf(producer) != BwdSlot)
        continue;
      param.gradResult = result;
      next = result + 1;
      break;
    }
  }
  return success();
}

SmallVector<SmallVector<unsigned>>
InsertFsdpCollectivesPass::buckets(ArrayRef<unsigned> members) {
  SmallVector<SmallVector<unsigned>> result;
  llvm::MapVector<Type, unsigned> byType;
  for (unsigned index : members) {
    if (!params[index].isSharded())
      continue;
    if (bucket == "param") {
      result.push_back({index});
      continue;
    }
    auto [it, inserted] = byType.try_emplace(
        params[index].fullType.getElementType(), result.size());
    if (inserted)
      result.emplace_back();
    result[it->second].push_back(index);
  }
  return result;
}

Value InsertFsdpCollectivesPass::createCollective(
    OpBuilder &builder, Location loc, CollectiveKind kind, Value input,
    RankedTensorType resultType, Phase phase, StringRef unitName,
    StringRef what) {
  FloatAttr timeUs;
  if (bandwidth > 0) {
    auto bytesOf = [](Type type) {
      auto tensor = cast<RankedTensorType>(type);
      return static_cast<double>(tensor.getNumElements()) *
             llvm::divideCeil(tensor.getElementTypeBitWidth(), 8);
    };
    double bytes = std::max(bytesOf(input.getType()), bytesOf(resultType));
    double passes = kind == CollectiveKind::AllReduce ? 2.0 : 1.0;
    double ring = passes * static_cast<double>(world - 1) /
                  static_cast<double>(world) * bytes;
    timeUs = builder.getF64FloatAttr(latencyUs + ring / (bandwidth * 1e3));
  }
  std::string name = (Twine("fsdp.") + what + "." + unitName).str();
  return CollectiveOp::create(builder, loc, resultType, kind, input, group,
                              phase, timeUs, builder.getStringAttr(unitName),
                              builder.getStringAttr(name))
      .getResult();
}

void InsertFsdpCollectivesPass::gather(Unit &unit, PhaseSlot slot,
                                       Operation *before) {
  // The collective (and the copy-in it reads) is issued at `before`; what
  // reads the gathered buffer on the compute stream (copy-out, unpad) waits
  // until the unit's first use, so that the gather overlaps the compute in
  // between.
  OpBuilder builder(before);
  OpBuilder atUse(unit.firstUse[slot]);
  Location loc = unit.firstUse[slot]->getLoc();
  Phase phase = phaseOf(slot);
  std::string what = slot == FwdSlot ? "all_gather_fwd" : "all_gather_bwd";
  for (ArrayRef<unsigned> members : buckets(unit.used[slot])) {
    ++numAllGathers;
    if (members.size() == 1) {
      Param &param = params[members.front()];
      SmallVector<int64_t> shape(param.shardType.getShape());
      shape[0] *= world;
      auto paddedType =
          RankedTensorType::get(shape, param.fullType.getElementType());
      Value gathered =
          createCollective(builder, loc, CollectiveKind::AllGather, param.arg,
                           paddedType, phase, unit.key, what);
      if (paddedType != param.fullType)
        // Drop the padding rows: a view of the gathered buffer.
        gathered = NodeOp::create(atUse, loc, TypeRange{param.fullType},
                                  "fsdp.unpad", phase, ValueRange{gathered},
                                  /*time_us=*/nullptr,
                                  builder.getDenseI64ArrayAttr({0}),
                                  builder.getStringAttr(unit.key),
                                  /*name=*/nullptr, /*args=*/nullptr)
                       ->getResult(0);
      param.gathered[slot] = gathered;
      rootParam[gathered] = members.front();
      continue;
    }
    // FSDP2's flat buffer: copy the shards in, gather once, copy out.
    int64_t flatElements = 0;
    SmallVector<Value> shards;
    SmallVector<Type> fullTypes;
    for (unsigned index : members) {
      flatElements += params[index].shardElements();
      shards.push_back(params[index].arg);
      fullTypes.push_back(params[index].fullType);
    }
    Type element = params[members.front()].fullType.getElementType();
    auto flatType = RankedTensorType::get({flatElements}, element);
    auto gatheredType = RankedTensorType::get({flatElements * world}, element);
    StringAttr scope = builder.getStringAttr(unit.key);
    Value flat =
        NodeOp::create(builder, loc, TypeRange{flatType}, "fsdp.pack_shards",
                       phase, shards, nullptr, nullptr, scope, nullptr, nullptr)
            ->getResult(0);
    Value gathered =
        createCollective(builder, loc, CollectiveKind::AllGather, flat,
                         gatheredType, phase, unit.key, what);
    auto copyOut = NodeOp::create(atUse, loc, fullTypes, "fsdp.unpack_gathered",
                                  phase, ValueRange{gathered}, nullptr, nullptr,
                                  scope, nullptr, nullptr);
    for (auto [index, result] :
         llvm::zip_equal(members, copyOut.getResults())) {
      params[index].gathered[slot] = result;
      rootParam[result] = index;
    }
  }
}

/// Re-makes, in the backward, a forward view of a parameter from the
/// backward's gathered value, so that the forward's gathered value dies at
/// the end of the forward.
Value InsertFsdpCollectivesPass::cloneViewChain(Value value,
                                                OpBuilder &builder) {
  unsigned index = rootParam.lookup(value);
  // Forward views already read the forward's gathered value.
  if (value == params[index].arg || value == params[index].gathered[FwdSlot])
    return params[index].gathered[BwdSlot];
  auto result = cast<OpResult>(value);
  Operation *view = result.getOwner();
  Operation *&clone = backwardViews[view];
  if (!clone) {
    IRMapping mapping;
    for (Value operand : view->getOperands())
      if (rootParam.count(operand) &&
          params[rootParam.lookup(operand)].isSharded())
        mapping.map(operand, cloneViewChain(operand, builder));
    clone = builder.clone(*view, mapping);
    cast<NodeOp>(clone).setPhase(Phase::Bwd);
    // The backward no longer reads the forward view.
    view->removeAttr(LetheDialect::SavedAttrHelper::getNameStr());
    clone->removeAttr(LetheDialect::SavedAttrHelper::getNameStr());
  }
  return clone->getResult(result.getResultNumber());
}

LogicalResult
InsertFsdpCollectivesPass::rewriteUses(ArrayRef<Operation *> ops) {
  for (Operation *op : ops) {
    std::optional<PhaseSlot> slot = slotOf(op);
    if (!slot)
      continue;
    for (OpOperand &operand : op->getOpOperands()) {
      auto it = rootParam.find(operand.get());
      if (it == rootParam.end())
        continue;
      Param &param = params[it->second];
      if (!param.isSharded())
        continue;
      if (operand.get() == param.arg) {
        operand.set(param.gathered[*slot]);
        continue;
      }
      // A view read by the phase that made it is already rebuilt on the
      // gathered value; a forward view read by the backward is re-made.
      Operation *producer = operand.get().getDefiningOp();
      if (*slot == BwdSlot && slotOf(producer) == FwdSlot) {
        OpBuilder builder(op);
        operand.set(cloneViewChain(operand.get(), builder));
      }
    }
  }
  return success();
}

void InsertFsdpCollectivesPass::reduceScatter(Unit &unit, func::ReturnOp ret,
                                              SmallVectorImpl<Value> &results) {
  SmallVector<unsigned> withGrad;
  for (unsigned index : unit.params)
    if (params[index].gradResult >= 0)
      withGrad.push_back(index);
  StringAttr scope = StringAttr::get(&getContext(), unit.key);
  for (unsigned index : withGrad) {
    // Scalars are replicated: their gradients are summed over the ranks.
    Param &param = params[index];
    if (param.isSharded())
      continue;
    Value grad = results[param.gradResult];
    OpBuilder builder = OpBuilder::atBlockTerminator(ret->getBlock());
    if (Operation *producer = grad.getDefiningOp())
      builder.setInsertionPointAfter(producer);
    ++numReduceScatters;
    results[param.gradResult] = createCollective(
        builder, ret.getLoc(), CollectiveKind::AllReduce, grad, param.fullType,
        Phase::Bwd, unit.key, "all_reduce_grad");
  }
  for (ArrayRef<unsigned> members : buckets(withGrad)) {
    // After the last producer of the bucket's gradients, in program order.
    Operation *last = nullptr;
    for (unsigned index : members) {
      Operation *producer = results[params[index].gradResult].getDefiningOp();
      if (producer &&
          (!last || position.lookup(producer) > position.lookup(last)))
        last = producer;
    }
    OpBuilder builder(ret);
    if (last)
      builder.setInsertionPointAfter(last);
    Location loc = last ? last->getLoc() : ret.getLoc();
    ++numReduceScatters;
    if (members.size() == 1) {
      Param &param = params[members.front()];
      Value grad = results[param.gradResult];
      SmallVector<int64_t> shape(param.shardType.getShape());
      shape[0] *= world;
      auto paddedType =
          RankedTensorType::get(shape, param.fullType.getElementType());
      if (paddedType != param.fullType)
        grad = NodeOp::create(builder, loc, TypeRange{paddedType}, "fsdp.pad",
                              Phase::Bwd, ValueRange{grad}, nullptr, nullptr,
                              scope, nullptr, nullptr)
                   ->getResult(0);
      results[param.gradResult] = createCollective(
          builder, loc, CollectiveKind::ReduceScatter, grad, param.shardType,
          Phase::Bwd, unit.key, "reduce_scatter");
      continue;
    }
    int64_t flatElements = 0;
    SmallVector<Value> grads;
    SmallVector<Type> shardTypes;
    for (unsigned index : members) {
      flatElements += params[index].shardElements();
      grads.push_back(results[params[index].gradResult]);
      shardTypes.push_back(params[index].shardType);
    }
    Type element = params[members.front()].fullType.getElementType();
    auto paddedType = RankedTensorType::get({flatElements * world}, element);
    auto shardType = RankedTensorType::get({flatElements}, element);
    // Rank-major: rank r's rows of every gradient, then rank r+1's.
    Value flat = NodeOp::create(builder, loc, TypeRange{paddedType},
                                "fsdp.pack_grads", Phase::Bwd, grads, nullptr,
                                nullptr, scope, nullptr, nullptr)
                     ->getResult(0);
    Value scattered =
        createCollective(builder, loc, CollectiveKind::ReduceScatter, flat,
                         shardType, Phase::Bwd, unit.key, "reduce_scatter");
    // Each gradient shard is a slice of the scattered buffer: views.
    SmallVector<int64_t> aliases(members.size(), 0);
    auto copyOut = NodeOp::create(
        builder, loc, shardTypes, "fsdp.unpack_grad_shards", Phase::Bwd,
        ValueRange{scattered}, nullptr, builder.getDenseI64ArrayAttr(aliases),
        scope, nullptr, nullptr);
    for (auto [index, result] : llvm::zip_equal(members, copyOut.getResults()))
      results[params[index].gradResult] = result;
  }
}

} // namespace

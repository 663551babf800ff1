//===- JsonImporter.cpp - Import a JSON training-step graph ---------------===//
//
// Reads graphs/SCHEMA.md into Lethe's canonical graph form in three steps:
// collect the node ids, validate every node into a NodeRecord (types,
// references, phase), and only then build the module. Nothing is created
// before the whole graph is known to be valid.
//
//===----------------------------------------------------------------------===//

#include "lethe/Import/JsonImporter.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Import/Diagnostics.h"
#include "lethe/Import/ImportCommon.h"
#include "lethe/Import/JsonLocations.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>

using namespace mlir;
using namespace lethe;
namespace json = llvm::json;

static llvm::StringMap<Type> buildElementTypes(MLIRContext *context);

namespace {

/// Where the elements of the top-level "nodes" and "saved" arrays start.
struct ElementOffsets {
  std::vector<size_t> nodes, saved;
};

enum class Role { Placeholder, Op, Output };

} // namespace

namespace {

/// "missing string field 'kind'" or "field 'kind' must be a string".
std::string describeBadField(const json::Object &object, StringRef key,
                             StringRef what) {
  const json::Value *value = object.get(key);
  if (!value || value->kind() == json::Value::Null)
    return ("missing " + what + " field '" + key + "'").str();
  return ("field '" + key + "' must be " +
          (what == "integer" || what == "array" ? "an " : "a ") + what)
      .str();
}

/// One validated node, ready to be built.
struct NodeRecord {
  explicit NodeRecord(Location loc) : loc(loc) {}

  Location loc;
  Role role = Role::Op;
  int64_t id = 0;
  std::string name;
  StringRef op;
  /// Graph-input kind of a placeholder: param, input, buffer or tangent.
  StringRef inputKind;
  std::optional<Phase> explicitPhase;
  Phase phase = Phase::Fwd;
  /// (position of the producing node, its output index).
  SmallVector<std::pair<unsigned, unsigned>, 4> inputs;
  SmallVector<Type, 2> resultTypes;
  SmallVector<int64_t, 2> aliases;
  bool hasAlias = false;
  std::optional<double> timeUs;
  StringRef scope;
  const json::Value *args = nullptr;
  const json::Value *kwargs = nullptr;
  /// Transitively depends on the gradient seed (see docs/Import.md).
  bool dependsOnSeed = false;
};

class GraphJsonImporter {
public:
  GraphJsonImporter(StringRef text, StringRef fileName, MLIRContext *context)
      : text(text), context(context),
        fileName(StringAttr::get(context, fileName)),
        locator(this->fileName, text),
        elementTypes(buildElementTypes(context)) {}

  OwningOpRef<ModuleOp> import();

private:
  Location locationAt(size_t offset) { return locator.at(offset); }
  InFlightDiagnostic nodeError(const NodeRecord &node) {
    InFlightDiagnostic diag = emitError(node.loc) << "node " << node.id;
    if (!node.name.empty())
      diag << " '" << node.name << "'";
    return std::move(diag << ": ");
  }
  LogicalResult parseNode(unsigned position, const json::Value &value,
                          NodeRecord &node);
  LogicalResult parseInputs(unsigned position, const json::Object &object,
                            NodeRecord &node);
  LogicalResult parseOutput(const json::Value &value, unsigned index,
                            NodeRecord &node);
  FailureOr<Attribute> convertValue(const json::Value &value,
                                    const NodeRecord &node);
  LogicalResult collectSaved(const json::Object &root);
  void setModuleAttributes(ModuleOp module, const json::Object &root);
  LogicalResult build(ModuleOp module);
  /// Collects (result index, parameter name) for the gradients the output
  /// node `output`, whose first value is result `firstResult`, returns.
  void nameGradients(
      const NodeRecord &output, unsigned firstResult,
      SmallVectorImpl<std::pair<unsigned, StringRef>> &gradientOf) const;

  StringRef text;
  MLIRContext *context;
  StringAttr fileName;
  TextLocator locator;
  llvm::StringMap<Type> elementTypes;
  ElementOffsets offsets;
  std::vector<NodeRecord> nodes;
  DenseMap<int64_t, unsigned> positionOfId;
  /// Saved output indices per node position.
  DenseMap<unsigned, SmallVector<int64_t, 2>> saved;
};

} // namespace

/// The element types of JSON dtypes (PyTorch names, with or without the
/// `torch.` prefix).
static llvm::StringMap<Type> buildElementTypes(MLIRContext *context) {
  Builder b(context);
  Type f16 = b.getF16Type(), f32 = b.getF32Type(), f64 = b.getF64Type();
  llvm::StringMap<Type> types;
  for (auto [name, type] : std::initializer_list<std::pair<StringRef, Type>>{
           {"bfloat16", b.getBF16Type()},
           {"float16", f16},
           {"half", f16},
           {"float32", f32},
           {"float64", f64},
           {"double", f64},
           {"float8_e4m3fn", b.getType<Float8E4M3FNType>()},
           {"float8_e5m2", b.getType<Float8E5M2Type>()},
           {"float8_e4m3fnuz", b.getType<Float8E4M3FNUZType>()},
           {"float8_e5m2fnuz", b.getType<Float8E5M2FNUZType>()},
           {"int64", b.getI64Type()},
           {"long", b.getI64Type()},
           {"int32", b.getI32Type()},
           {"int16", b.getI16Type()},
           {"short", b.getI16Type()},
           {"int8", b.getI8Type()},
           {"uint8", b.getIntegerType(8, false)},
           {"uint16", b.getIntegerType(16, false)},
           {"uint32", b.getIntegerType(32, false)},
           {"uint64", b.getIntegerType(64, false)},
           {"bool", b.getI1Type()},
           {"complex32", ComplexType::get(f16)},
           {"complex64", ComplexType::get(f32)},
           {"complex128", ComplexType::get(f64)}}) {
    types[name] = type;
    types[("torch." + name).str()] = type;
  }
  return types;
}

LogicalResult GraphJsonImporter::parseOutput(const json::Value &value,
                                             unsigned index, NodeRecord &node) {
  const json::Object *output = value.getAsObject();
  if (!output)
    return nodeError(node) << "output " << index << " is not an object";
  std::optional<StringRef> dtype = output->getString("dtype");
  if (!dtype)
    return nodeError(node) << "output " << index
                           << " has no string field 'dtype'";
  const json::Value *shape = output->get("shape");
  const json::Value *bytes = output->get("bytes");
  std::optional<int64_t> declaredBytes;
  if (bytes && bytes->kind() != json::Value::Null) {
    declaredBytes = bytes->getAsInteger();
    if (!declaredBytes || *declaredBytes < 0)
      return nodeError(node) << "output " << index
                             << ": 'bytes' must be a non-negative integer";
  }

  Type type;
  if (*dtype == "none" || *dtype == "int") {
    // Python values an op returns beside its tensors: they own no memory.
    if (shape && shape->kind() != json::Value::Null)
      return nodeError(node) << "output " << index << " of dtype '" << *dtype
                             << "' must have a null shape";
    type = *dtype == "none" ? Type(NoneType::get(context))
                            : Type(IntegerType::get(context, 64));
  } else {
    Type elementType = elementTypes.lookup(*dtype);
    if (!elementType)
      return nodeError(node)
             << "output " << index << " has unknown dtype '" << *dtype << "'";
    const json::Array *dims = shape ? shape->getAsArray() : nullptr;
    if (!dims)
      return nodeError(node)
             << "output " << index << " has no static shape (got "
             << (shape ? "a non-array" : "no") << " 'shape')";
    SmallVector<int64_t, 4> sizes;
    int64_t elements = 1;
    for (auto [dimIndex, dim] : llvm::enumerate(*dims)) {
      if (dim.kind() == json::Value::Null)
        return nodeError(node)
               << "output " << index << " has dynamic dimension " << dimIndex
               << "; only static shapes are supported";
      std::optional<int64_t> size = dim.getAsInteger();
      if (!size)
        return nodeError(node) << "output " << index << ": dimension "
                               << dimIndex << " is not an integer";
      if (*size < 0)
        return nodeError(node)
               << "output " << index << " has negative dimension " << dimIndex
               << " (" << *size << ")";
      std::optional<int64_t> product = llvm::checkedMul(elements, *size);
      if (!product)
        return nodeError(node) << "output " << index << " is too large";
      elements = *product;
      sizes.push_back(*size);
    }
    type = RankedTensorType::get(sizes, elementType);
    // getTypeBytes multiplies elements by the element size: keep that in range.
    if (elements > std::numeric_limits<int64_t>::max() / 16)
      return nodeError(node) << "output " << index << " is too large";
    int64_t typeBytes = getTypeBytes(type);
    if (declaredBytes && *declaredBytes != typeBytes)
      return nodeError(node)
             << "output " << index << " declares " << *declaredBytes
             << " bytes, but " << type << " holds " << typeBytes;
  }
  if (declaredBytes && getTypeBytes(type) == 0 && *declaredBytes != 0 &&
      !isa<RankedTensorType>(type))
    return nodeError(node) << "output " << index << " of dtype '" << *dtype
                           << "' occupies no memory, but declares "
                           << *declaredBytes << " bytes";

  int64_t alias = -1;
  if (const json::Value *aliasValue = output->get("alias");
      aliasValue && aliasValue->kind() != json::Value::Null) {
    std::optional<int64_t> k = aliasValue->getAsInteger();
    // -1 says "no alias", as in the canonical form.
    if (!k || *k < -1 || *k >= static_cast<int64_t>(node.inputs.size()))
      return nodeError(node) << "output " << index
                             << " aliases an input that does not exist (the "
                             << "node has " << node.inputs.size() << " inputs)";
    alias = *k;
    node.hasAlias |= alias >= 0;
  }
  node.resultTypes.push_back(type);
  node.aliases.push_back(alias);
  return success();
}

LogicalResult GraphJsonImporter::parseInputs(unsigned position,
                                             const json::Object &object,
                                             NodeRecord &node) {
  const json::Array *inputs = object.getArray("inputs");
  if (!inputs)
    return nodeError(node) << describeBadField(object, "inputs", "array");
  for (auto [index, input] : llvm::enumerate(*inputs)) {
    const json::Array *ref = input.getAsArray();
    std::optional<int64_t> id, output;
    if (ref && ref->size() == 2) {
      id = (*ref)[0].getAsInteger();
      output = (*ref)[1].getAsInteger();
    }
    if (!id || !output)
      return nodeError(node)
             << "input " << index << " is not a [node_id, output_index] pair";
    auto it = positionOfId.find(*id);
    if (it == positionOfId.end())
      return nodeError(node) << "input " << index << " refers to node " << *id
                             << ", which does not exist";
    unsigned producerPos = it->second;
    if (producerPos >= position)
      return nodeError(node)
             << "input " << index << " refers to node " << *id
             << ", which does not come before it (a cycle or a forward "
                "reference; nodes must be in program order)";
    const NodeRecord &producer = nodes[producerPos];
    if (producer.role == Role::Output)
      return nodeError(node) << "input " << index << " refers to output node "
                             << *id << ", which produces no value";
    if (*output < 0 ||
        *output >= static_cast<int64_t>(producer.resultTypes.size()))
      return nodeError(node) << "input " << index << " refers to output "
                             << *output << " of node " << *id << ", which has "
                             << producer.resultTypes.size() << " outputs";
    node.inputs.push_back({producerPos, static_cast<unsigned>(*output)});
    node.dependsOnSeed |= producer.dependsOnSeed;
  }
  return success();
}

LogicalResult GraphJsonImporter::parseNode(unsigned position,
                                           const json::Value &value,
                                           NodeRecord &node) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return nodeError(node) << "is not an object";
  std::optional<StringRef> kind = object->getString("kind");
  if (!kind)
    return nodeError(node) << describeBadField(*object, "kind", "string");
  if (*kind == "op") {
    node.role = Role::Op;
  } else if (*kind == "output") {
    node.role = Role::Output;
  } else if (llvm::is_contained({"param", "input", "buffer", "tangent"},
                                *kind)) {
    node.role = Role::Placeholder;
    node.inputKind = *kind;
    if (*kind == "input" && object->getBoolean("buffer").value_or(false))
      node.inputKind = "buffer";
    node.dependsOnSeed = *kind == "tangent";
  } else {
    return nodeError(node) << "unknown kind '" << *kind
                           << "' (expected param, input, buffer, tangent, op "
                              "or output)";
  }

  std::optional<StringRef> op = object->getString("op");
  if (node.role == Role::Op && (!op || op->empty()))
    return nodeError(node) << describeBadField(*object, "op", "string");
  node.op = op.value_or("");

  if (const json::Value *phase = object->get("phase");
      phase && phase->kind() != json::Value::Null) {
    std::optional<StringRef> phaseName = phase->getAsString();
    std::optional<Phase> parsed =
        phaseName ? symbolizePhase(*phaseName) : std::nullopt;
    if (!parsed)
      return nodeError(node) << "unknown phase (expected \"fwd\", \"bwd\" or "
                                "\"opt\")";
    node.explicitPhase = parsed;
  }

  if (failed(parseInputs(position, *object, node)))
    return failure();
  if (node.role == Role::Placeholder && !node.inputs.empty())
    return nodeError(node) << "a graph input (" << *kind
                           << ") cannot have inputs";

  const json::Array *outputs = object->getArray("outputs");
  if (!outputs && node.role != Role::Output)
    return nodeError(node) << describeBadField(*object, "outputs", "array");
  if (node.role != Role::Output) {
    for (auto [index, output] : llvm::enumerate(*outputs))
      if (failed(parseOutput(output, index, node)))
        return failure();
  }
  if (node.role == Role::Placeholder &&
      (node.resultTypes.size() != 1 || node.hasAlias))
    return nodeError(node) << "a graph input must have exactly one output, "
                              "which aliases nothing";

  if (const json::Value *time = object->get("time_us");
      time && time->kind() != json::Value::Null) {
    std::optional<double> us = time->getAsNumber();
    if (!us || !std::isfinite(*us) || *us < 0)
      return nodeError(node) << "'time_us' must be a non-negative number";
    // Sums of times must stay finite.
    if (*us > kMaxTimeUs)
      return nodeError(node)
             << "'time_us' must be at most " << formatNumber(kMaxTimeUs)
             << " us, got " << formatNumber(*us);
    node.timeUs = us;
  }
  if (const json::Value *scope = object->get("scope");
      scope && scope->kind() != json::Value::Null) {
    std::optional<StringRef> path = scope->getAsString();
    if (!path)
      return nodeError(node) << "'scope' must be a string";
    node.scope = stripDynamoScope(*path);
  }
  node.args = object->get("args");
  if (node.args && node.args->kind() == json::Value::Null)
    node.args = nullptr;
  if (const json::Value *kwargs = object->get("kwargs");
      kwargs && kwargs->kind() != json::Value::Null) {
    if (!kwargs->getAsObject())
      return nodeError(node) << "'kwargs' must be an object";
    node.kwargs = kwargs;
  }

  // Phase: explicit wins; otherwise backward iff it depends on the seed.
  if (node.explicitPhase == Phase::Bwd)
    node.dependsOnSeed = true;
  node.phase =
      node.explicitPhase.value_or(node.dependsOnSeed ? Phase::Bwd : Phase::Fwd);
  return success();
}

/// JSON -> attribute, losslessly but for one case: llvm::json cannot tell a
/// negative integral float (`-2.0`) from an integer, so it becomes i64.
FailureOr<Attribute> GraphJsonImporter::convertValue(const json::Value &value,
                                                     const NodeRecord &node) {
  Builder b(context);
  switch (value.kind()) {
  case json::Value::Null:
    return Attribute(b.getUnitAttr());
  case json::Value::Boolean:
    return Attribute(b.getBoolAttr(*value.getAsBoolean()));
  case json::Value::Number: {
    if (std::optional<uint64_t> u = value.getAsUINT64()) {
      if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Attribute(
            b.getIntegerAttr(b.getIntegerType(64, false), APInt(64, *u)));
      return Attribute(b.getI64IntegerAttr(static_cast<int64_t>(*u)));
    }
    std::optional<int64_t> i = value.getAsInteger();
    if (i && *i < 0)
      return Attribute(b.getI64IntegerAttr(*i));
    return Attribute(b.getF64FloatAttr(*value.getAsNumber()));
  }
  case json::Value::String:
    return Attribute(b.getStringAttr(*value.getAsString()));
  case json::Value::Array: {
    SmallVector<Attribute> elements;
    for (const json::Value &element : *value.getAsArray()) {
      FailureOr<Attribute> attr = convertValue(element, node);
      if (failed(attr))
        return failure();
      elements.push_back(*attr);
    }
    return Attribute(b.getArrayAttr(elements));
  }
  case json::Value::Object: {
    SmallVector<NamedAttribute> entries;
    for (const auto &[key, element] : *value.getAsObject()) {
      if (StringRef(key).empty())
        return nodeError(node) << "argument objects cannot have empty keys";
      FailureOr<Attribute> attr = convertValue(element, node);
      if (failed(attr))
        return failure();
      entries.push_back(b.getNamedAttr(StringRef(key), *attr));
    }
    return Attribute(b.getDictionaryAttr(entries));
  }
  }
  llvm_unreachable("unknown JSON kind");
}

LogicalResult GraphJsonImporter::collectSaved(const json::Object &root) {
  const json::Value *savedValue = root.get("saved");
  if (!savedValue || savedValue->kind() == json::Value::Null)
    return success();
  const json::Array *list = savedValue->getAsArray();
  if (!list)
    return emitError(locationAt(0)) << "'saved' must be an array of "
                                       "[node_id, output_index] pairs";
  if (offsets.saved.size() != list->size())
    offsets.saved.clear();
  for (auto [index, entry] : llvm::enumerate(*list)) {
    Location loc = offsets.saved.empty() ? locationAt(0)
                                         : locationAt(offsets.saved[index]);
    const json::Array *ref = entry.getAsArray();
    std::optional<int64_t> id, output;
    if (ref && ref->size() == 2) {
      id = (*ref)[0].getAsInteger();
      output = (*ref)[1].getAsInteger();
    }
    if (!id || !output)
      return emitError(loc) << "saved entry " << index
                            << " is not a [node_id, output_index] pair";
    auto it = positionOfId.find(*id);
    if (it == positionOfId.end())
      return emitError(loc) << "saved entry " << index << " refers to node "
                            << *id << ", which does not exist";
    const NodeRecord &node = nodes[it->second];
    if (*output < 0 || *output >= static_cast<int64_t>(node.resultTypes.size()))
      return emitError(loc) << "saved entry " << index << " refers to output "
                            << *output << " of node " << *id << ", which has "
                            << node.resultTypes.size() << " outputs";
    SmallVector<int64_t, 2> &indices = saved[it->second];
    if (!llvm::is_contained(indices, *output))
      indices.push_back(*output);
  }
  return success();
}

void GraphJsonImporter::setModuleAttributes(ModuleOp module,
                                            const json::Object &root) {
  Builder b(context);
  if (std::optional<StringRef> model = root.getString("model"))
    LetheDialect::ModelAttrHelper(module->getContext())
        .setAttr(module, b.getStringAttr(*model));
  if (std::optional<StringRef> device = root.getString("device"))
    LetheDialect::DeviceAttrHelper(module->getContext())
        .setAttr(module, b.getStringAttr(*device));
  if (const json::Object *totals = root.getObject("totals")) {
    SmallVector<NamedAttribute> numbers;
    for (const auto &[key, value] : *totals) {
      if (StringRef(key).empty() || value.kind() != json::Value::Number)
        continue;
      if (std::optional<uint64_t> u = value.getAsUINT64();
          u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        numbers.push_back(b.getNamedAttr(
            StringRef(key), b.getI64IntegerAttr(static_cast<int64_t>(*u))));
      else
        numbers.push_back(b.getNamedAttr(
            StringRef(key), b.getF64FloatAttr(*value.getAsNumber())));
    }
    LetheDialect::TotalsAttrHelper(module->getContext())
        .setAttr(module, TotalsAttr::get(module->getContext(),
                                         b.getDictionaryAttr(numbers)));
  }
}

LogicalResult GraphJsonImporter::build(ModuleOp module) {
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(module.getBody());

  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  for (const NodeRecord &node : nodes)
    if (node.role == Role::Placeholder) {
      argTypes.push_back(node.resultTypes[0]);
      argLocs.push_back(node.loc);
    }
  auto func = func::FuncOp::create(builder, locationAt(0), "step",
                                   builder.getFunctionType(argTypes, {}));
  Block *body = builder.createBlock(&func.getBody(), {}, argTypes, argLocs);

  std::vector<SmallVector<Value, 2>> values(nodes.size());
  SmallVector<Value> returned;
  SmallVector<std::pair<unsigned, StringRef>> gradientOf;
  unsigned argIndex = 0;
  for (auto [position, node] : llvm::enumerate(nodes)) {
    SmallVector<Value, 4> operands;
    for (auto [producer, output] : node.inputs)
      operands.push_back(values[producer][output]);
    auto savedIt = saved.find(position);

    if (node.role == Role::Placeholder) {
      NamedAttrList attrs;
      attrs.set(LetheDialect::KindAttrHelper::getNameStr(),
                builder.getStringAttr(node.inputKind));
      attrs.set(LetheDialect::NameAttrHelper::getNameStr(),
                builder.getStringAttr(node.name));
      if (savedIt != saved.end())
        attrs.set(LetheDialect::SavedAttrHelper::getNameStr(),
                  builder.getUnitAttr());
      func.setArgAttrs(argIndex, attrs.getDictionary(context));
      values[position].push_back(body->getArgument(argIndex++));
      continue;
    }
    if (node.role == Role::Output) {
      nameGradients(node, returned.size(), gradientOf);
      returned.append(operands.begin(), operands.end());
      continue;
    }

    FloatAttr time =
        node.timeUs ? builder.getF64FloatAttr(*node.timeUs) : FloatAttr();
    StringAttr scope =
        node.scope.empty() ? StringAttr() : builder.getStringAttr(node.scope);
    StringAttr name =
        node.name.empty() ? StringAttr() : builder.getStringAttr(node.name);
    Attribute args;
    if (node.args) {
      FailureOr<Attribute> converted = convertValue(*node.args, node);
      if (failed(converted))
        return failure();
      args = *converted;
    }
    Operation *op = nullptr;
    if (std::optional<CollectiveKind> collective = getCollectiveKind(node.op)) {
      // Ranks are not recorded: the group is 0..size-1.
      std::optional<int64_t> groupSize =
          getC10dGroupSize(*collective, dyn_cast_or_null<ArrayAttr>(args));
      if (groupSize) {
        SmallVector<int64_t> group(
            llvm::to_vector(llvm::seq<int64_t>(0, *groupSize)));
        op = createCollectiveIfValid(builder, node.loc, *collective, operands,
                                     node.resultTypes, group, node.phase, time,
                                     scope, name);
      }
    }
    if (!op) {
      DenseI64ArrayAttr aliases =
          node.hasAlias ? builder.getDenseI64ArrayAttr(node.aliases)
                        : DenseI64ArrayAttr();
      op = NodeOp::create(builder, node.loc, node.resultTypes,
                          builder.getStringAttr(node.op),
                          PhaseAttr::get(context, node.phase), operands, time,
                          aliases, scope, name, args);
    }
    // Named arguments, plus the positional ones of a collective (which has no
    // `args` of its own).
    NamedAttrList named;
    if (node.kwargs) {
      FailureOr<Attribute> kwargs = convertValue(*node.kwargs, node);
      if (failed(kwargs))
        return failure();
      named.append(cast<DictionaryAttr>(*kwargs).getValue());
    }
    if (isa<CollectiveOp>(op) && args)
      named.set("args", args);
    if (!named.empty())
      LetheDialect::AttrsAttrHelper(op->getContext())
          .setAttr(op, named.getDictionary(context));
    LetheDialect::NodeIdAttrHelper(op->getContext())
        .setAttr(op, builder.getI64IntegerAttr(node.id));
    if (savedIt != saved.end()) {
      SmallVector<int64_t, 2> indices = savedIt->second;
      llvm::sort(indices);
      LetheDialect::SavedAttrHelper(op->getContext())
          .setAttr(op, builder.getDenseI64ArrayAttr(indices));
    }
    values[position].assign(op->result_begin(), op->result_end());
  }
  func::ReturnOp::create(builder, func.getLoc(), returned);
  func.setFunctionType(
      builder.getFunctionType(argTypes, ValueRange(returned).getTypes()));
  for (auto [result, name] : gradientOf)
    func.setResultAttr(result, LetheDialect::GradOfAttrHelper::getNameStr(),
                       builder.getStringAttr(name));
  return success();
}

void GraphJsonImporter::nameGradients(
    const NodeRecord &output, unsigned firstResult,
    SmallVectorImpl<std::pair<unsigned, StringRef>> &gradientOf) const {
  // The backward output node says, in `args`, which primal each gradient
  // belongs to: grads[i] = {"in": k} is the gradient of node grad_of[i].
  // Anything else there is not an error: the gradients just stay unnamed.
  const json::Object *args = output.args ? output.args->getAsObject() : nullptr;
  const json::Array *grads = args ? args->getArray("grads") : nullptr;
  const json::Array *primals = args ? args->getArray("grad_of") : nullptr;
  if (!grads || !primals || grads->size() != primals->size())
    return;
  for (auto [grad, primal] : llvm::zip_equal(*grads, *primals)) {
    const json::Object *ref = grad.getAsObject();
    std::optional<int64_t> input = ref ? ref->getInteger("in") : std::nullopt;
    std::optional<int64_t> id = primal.getAsInteger();
    if (!input || *input < 0 ||
        static_cast<size_t>(*input) >= output.inputs.size() || !id)
      continue;
    auto it = positionOfId.find(*id);
    if (it == positionOfId.end())
      continue;
    const NodeRecord &param = nodes[it->second];
    if (param.role == Role::Placeholder && param.inputKind == "param")
      gradientOf.push_back(
          {firstResult + static_cast<unsigned>(*input), StringRef(param.name)});
  }
}

OwningOpRef<ModuleOp> GraphJsonImporter::import() {
  context->loadDialect<LetheDialect, func::FuncDialect>();
  if (std::optional<size_t> at = findExcessiveJsonNesting(text)) {
    emitError(locationAt(*at)) << "malformed JSON: nested deeper than "
                               << kMaxJsonNesting << " levels";
    return nullptr;
  }
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    std::string message = llvm::toString(parsed.takeError());
    Location loc =
        jsonParseErrorLocation(context, fileName.getValue(), message);
    emitError(loc) << "malformed JSON: " << message;
    return nullptr;
  }
  const json::Object *root = parsed->getAsObject();
  if (!root) {
    emitError(locationAt(0)) << "expected a JSON object at the top level";
    return nullptr;
  }
  const json::Array *nodeList = root->getArray("nodes");
  if (!nodeList) {
    emitError(locationAt(0)) << "missing array field 'nodes'";
    return nullptr;
  }
  if (nodeList->empty()) {
    emitError(locationAt(0)) << "'nodes' is empty: a training step has at "
                                "least one node";
    return nullptr;
  }
  StringRef arrays[] = {"nodes", "saved"};
  SmallVector<std::vector<size_t>, 2> found =
      findTopLevelArrayElements(text, arrays);
  offsets.nodes = std::move(found[0]);
  offsets.saved = std::move(found[1]);
  if (offsets.nodes.size() != nodeList->size())
    offsets.nodes.clear();

  // Ids first, so that references to later nodes can be told from dangling
  // ones.
  nodes.reserve(nodeList->size());
  for (auto [position, value] : llvm::enumerate(*nodeList)) {
    Location loc = offsets.nodes.empty() ? locationAt(0)
                                         : locationAt(offsets.nodes[position]);
    NodeRecord &node = nodes.emplace_back(loc);
    node.id = position;
    const json::Object *object = value.getAsObject();
    if (object)
      if (std::optional<StringRef> name = object->getString("name");
          name && !name->empty()) {
        node.name = name->str();
        node.loc = NameLoc::get(StringAttr::get(context, *name), node.loc);
      }
    std::optional<int64_t> id =
        object ? object->getInteger("id") : std::nullopt;
    if (!id) {
      if (object)
        nodeError(node) << describeBadField(*object, "id", "integer");
      else
        nodeError(node) << "is not an object";
      return nullptr;
    }
    node.id = *id;
    if (!positionOfId.try_emplace(*id, position).second) {
      nodeError(node) << "duplicate id (also used by node at position "
                      << positionOfId[*id] << ")";
      return nullptr;
    }
  }
  for (auto [position, value] : llvm::enumerate(*nodeList))
    if (failed(parseNode(position, value, nodes[position])))
      return nullptr;
  if (failed(collectSaved(*root)))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(locationAt(0));
  setModuleAttributes(*module, *root);
  if (failed(build(*module)) || failed(verify(*module)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp> lethe::importGraphJson(StringRef json, StringRef fileName,
                                             MLIRContext *context) {
  return GraphJsonImporter(json, fileName, context).import();
}

OwningOpRef<ModuleOp> lethe::importGraphJson(llvm::SourceMgr &sourceMgr,
                                             MLIRContext *context) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  return importGraphJson(buffer->getBuffer(), buffer->getBufferIdentifier(),
                         context);
}

void lethe::registerImportGraphJsonTranslation() {
  static TranslateToMLIRRegistration registration(
      "import-graph-json",
      "import a JSON training-step graph (graphs/SCHEMA.md) into the lethe "
      "graph form",
      [](llvm::SourceMgr &sourceMgr, MLIRContext *context) {
        // mlir-translate's handler quotes the whole source line of each
        // error; for a one-line export that is the whole file.
        CompactDiagnosticHandler compact(context, llvm::errs(), &sourceMgr);
        return OwningOpRef<Operation *>(
            importGraphJson(sourceMgr, context).release());
      },
      [](DialectRegistry &registry) {
        registry.insert<LetheDialect, func::FuncDialect>();
      });
}

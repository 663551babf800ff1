//===- JsonImporter.cpp - Import a JSON training-step graph ---------------===//
//
// Reads graphs/SCHEMA.md into Lethe's canonical graph form: validates every
// node into a compact NodeRecord (types, references, phase, attributes), and
// only then builds the module. Nothing is built before the whole graph is
// known to be valid.
//
// The document is not parsed whole: llvm::json's tree of an exported graph
// is tens of times the file's size. The top-level object is parsed with its
// "nodes" array emptied, then each node on its own, its tree freed once its
// record is made. Errors stay what a whole parse gives (see readNodes).
//
//===----------------------------------------------------------------------===//

#include "lethe/Import/JsonImporter.h"
#include "lethe/Analysis/TypeBytes.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Import/Diagnostics.h"
#include "lethe/Import/ImportCommon.h"
#include "lethe/Import/JsonAttributes.h"
#include "lethe/Import/JsonLocations.h"
#include "lethe/Import/StreamedJson.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"

#include <array>
#include <cmath>

using namespace mlir;
using namespace lethe;
namespace json = llvm::json;

namespace {

enum class Role { Placeholder, Op, Output };

} // namespace

namespace {

/// "missing string field 'kind'" or "field 'kind' must be a string".
template <typename JsonObject>
std::string describeBadField(const JsonObject &object, StringRef key,
                             StringRef what) {
  const auto *value = object.get(key);
  if (!value || value->kind() == json::Value::Null)
    return ("missing " + what + " field '" + key + "'").str();
  return ("field '" + key + "' must be " +
          (what == "integer" || what == "array" ? "an " : "a ") + what)
      .str();
}

/// The llvm::json value of a node's field, for what reads only those.
const json::Value &asJson(const json::Value &value) { return value; }
json::Value asJson(const FlatJsonValue &value) { return value.toJson(); }

/// One validated node, ready to be built.
struct NodeRecord {
  explicit NodeRecord(Location loc) : loc(loc) {}

  Location loc;
  Role role = Role::Op;
  int64_t id = 0;
  /// Null when the node has no name.
  StringAttr name;
  StringAttr op;
  /// Graph-input kind of a placeholder: param, input, buffer or tangent (a
  /// literal: the node's JSON is freed once it is read).
  StringRef inputKind;
  std::optional<Phase> explicitPhase;
  Phase phase = Phase::Fwd;
  /// (position of the producing node, its output index).
  SmallVector<std::pair<unsigned, unsigned>, 4> inputs;
  SmallVector<Type, 2> resultTypes;
  SmallVector<int64_t, 2> aliases;
  bool hasAlias = false;
  /// An output states its alias (-1 too): they decide, not the kind's name.
  bool declaresAliases = false;
  std::optional<double> timeUs;
  /// Null at the root.
  StringAttr scope;
  /// An op's `args` and `kwargs`, converted; null when absent.
  Attribute args;
  DictionaryAttr kwargs;
  /// An output node's (input index, primal node id) gradient pairs of its
  /// `args` (see nameGradients).
  SmallVector<std::pair<int64_t, int64_t>, 0> gradientOf;
  /// Transitively depends on the gradient seed (see docs/Import.md).
  bool dependsOnSeed = false;
};

/// The classes of errors, in the order they are reported in: the first
/// error of the first class that has one is the graph's error, whatever the
/// order of the nodes' errors in the file. As when each class was checked
/// over the whole graph before the next: ids, then nodes, then (after the
/// `saved` list) the conversion of arguments.
enum ErrorClass { IdError, NodeError, ArgumentError, NumErrorClasses };

/// An input naming a node not seen yet: whether that node comes later or
/// does not exist is known only at the end.
struct UnresolvedInput {
  unsigned position;
  size_t index;
  int64_t id;
};

class GraphJsonImporter {
public:
  GraphJsonImporter(StringRef text, StringRef fileName, MLIRContext *context)
      : text(text), context(context),
        fileName(StringAttr::get(context, fileName)),
        locator(this->fileName, text),
        elementTypes(getJsonElementTypes(context)) {}

  OwningOpRef<ModuleOp> import();

private:
  Location locationAt(size_t offset) { return locator.at(offset); }
  /// StringAttr::get for the strings many nodes repeat (op names, scopes),
  /// looked up here first: the context's uniquer finds an existing string
  /// at about twice the cost (~1% of importing a 100k-op step).
  StringAttr repeated(StringRef text) {
    auto [it, inserted] = repeatedStrings.try_emplace(text);
    if (inserted)
      it->second = StringAttr::get(context, text);
    return it->second;
  }
  InFlightDiagnostic nodeError(const NodeRecord &node) {
    InFlightDiagnostic diag = emitError(node.loc) << "node " << node.id;
    if (node.name)
      diag << " '" << node.name.getValue() << "'";
    return std::move(diag << ": ");
  }
  /// Reads the nodes into `nodes`, keeping the first error of each class.
  llvm::Error readNodes(const StreamedJsonDocument &document);
  /// The node readers read llvm::json's tree or a FlatJsonValue (the
  /// accessors they use answer alike).
  template <typename JsonValue>
  void readNode(unsigned position, std::optional<size_t> offset,
                const JsonValue &value);
  /// Emits the first error of the classes before the `saved` list.
  LogicalResult reportNodeErrors();
  /// Emits json::parse's `error` at its place in the file.
  void reportMalformed(llvm::Error error);
  /// The location of entry `index` of the `count` entries of "saved".
  Location savedEntryLocation(size_t index, size_t count);
  template <typename JsonValue>
  LogicalResult parseNode(unsigned position, const JsonValue &value,
                          NodeRecord &node);
  template <typename JsonObject>
  void readGradientPairs(const JsonObject &object, NodeRecord &node);
  template <typename JsonObject>
  LogicalResult parseInputs(unsigned position, const JsonObject &object,
                            NodeRecord &node);
  template <typename JsonValue>
  LogicalResult parseOutput(const JsonValue &value, unsigned index,
                            NodeRecord &node);
  LogicalResult collectSaved(const json::Object &root);
  void setModuleAttributes(ModuleOp module, const json::Object &root);
  void build(ModuleOp module);
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
  llvm::StringMap<StringAttr> repeatedStrings;
  TypeBytesCache typeBytesOf;
  /// Where the elements of the top-level "saved" array start (found on the
  /// first error there).
  std::optional<std::vector<size_t>> savedOffsets;
  std::vector<NodeRecord> nodes;
  DenseMap<int64_t, unsigned> positionOfId;
  /// Saved output indices per node position.
  DenseMap<unsigned, SmallVector<int64_t, 2>> saved;
  /// The first error of each class, held back while nodes are read.
  std::optional<Diagnostic> firstError[NumErrorClasses];
  ErrorClass currentClass = IdError;
  std::optional<UnresolvedInput> unresolved;
};

} // namespace

template <typename JsonValue>
LogicalResult GraphJsonImporter::parseOutput(const JsonValue &value,
                                             unsigned index, NodeRecord &node) {
  const auto *output = value.getAsObject();
  if (!output)
    return nodeError(node) << "output " << index << " is not an object";
  std::optional<StringRef> dtype = output->getString("dtype");
  if (!dtype)
    return nodeError(node) << "output " << index
                           << " has no string field 'dtype'";
  const auto *shape = output->get("shape");
  const auto *bytes = output->get("bytes");
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
    const auto *dims = shape ? shape->getAsArray() : nullptr;
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
      // Not llvm::checkedMul, which multiplies APInts.
      if (llvm::MulOverflow(elements, *size, elements))
        return nodeError(node) << "output " << index << " is too large";
      sizes.push_back(*size);
    }
    type = RankedTensorType::get(sizes, elementType);
    // getTypeBytes multiplies elements by the element size: keep that in range.
    if (elements > std::numeric_limits<int64_t>::max() / 16)
      return nodeError(node) << "output " << index << " is too large";
    int64_t typeBytes = typeBytesOf.get(type);
    if (declaredBytes && *declaredBytes != typeBytes)
      return nodeError(node)
             << "output " << index << " declares " << *declaredBytes
             << " bytes, but " << type << " holds " << typeBytes;
  }
  if (declaredBytes && typeBytesOf.get(type) == 0 && *declaredBytes != 0 &&
      !isa<RankedTensorType>(type))
    return nodeError(node) << "output " << index << " of dtype '" << *dtype
                           << "' occupies no memory, but declares "
                           << *declaredBytes << " bytes";

  int64_t alias = -1;
  if (const auto *aliasValue = output->get("alias");
      aliasValue && aliasValue->kind() != json::Value::Null) {
    std::optional<int64_t> k = aliasValue->getAsInteger();
    // -1 says "no alias", as in the canonical form.
    if (!k || *k < -1 || *k >= static_cast<int64_t>(node.inputs.size()))
      return nodeError(node) << "output " << index
                             << " aliases an input that does not exist (the "
                             << "node has " << node.inputs.size() << " inputs)";
    alias = *k;
    node.hasAlias |= alias >= 0;
    node.declaresAliases = true;
  }
  node.resultTypes.push_back(type);
  node.aliases.push_back(alias);
  return success();
}

template <typename JsonObject>
LogicalResult GraphJsonImporter::parseInputs(unsigned position,
                                             const JsonObject &object,
                                             NodeRecord &node) {
  const auto *inputs = object.getArray("inputs");
  if (!inputs)
    return nodeError(node) << describeBadField(object, "inputs", "array");
  for (auto [index, input] : llvm::enumerate(*inputs)) {
    const auto *ref = input.getAsArray();
    std::optional<int64_t> id, output;
    if (ref && ref->size() == 2) {
      id = (*ref)[0].getAsInteger();
      output = (*ref)[1].getAsInteger();
    }
    if (!id || !output)
      return nodeError(node)
             << "input " << index << " is not a [node_id, output_index] pair";
    auto it = positionOfId.find(*id);
    if (it == positionOfId.end()) {
      // A later node or none: reportNodeErrors says which.
      unresolved = UnresolvedInput{position, index, *id};
      return failure();
    }
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

template <typename JsonValue>
LogicalResult GraphJsonImporter::parseNode(unsigned position,
                                           const JsonValue &value,
                                           NodeRecord &node) {
  const auto *object = value.getAsObject();
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
    // A literal, not the JSON's text: the node's JSON is freed.
    node.inputKind = llvm::StringSwitch<StringRef>(*kind)
                         .Case("param", "param")
                         .Case("input", "input")
                         .Case("buffer", "buffer")
                         .Default("tangent");
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
  if (node.role == Role::Op)
    node.op = repeated(*op);

  if (const auto *phase = object->get("phase");
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

  const auto *outputs = object->getArray("outputs");
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

  if (const auto *time = object->get("time_us");
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
  if (const auto *scope = object->get("scope");
      scope && scope->kind() != json::Value::Null) {
    std::optional<StringRef> path = scope->getAsString();
    if (!path)
      return nodeError(node) << "'scope' must be a string";
    if (StringRef stripped = stripDynamoScope(*path); !stripped.empty())
      node.scope = repeated(stripped);
  }
  const auto *args = object->get("args");
  if (args && args->kind() == json::Value::Null)
    args = nullptr;
  const auto *kwargs = object->get("kwargs");
  if (kwargs && kwargs->kind() != json::Value::Null) {
    if (!kwargs->getAsObject())
      return nodeError(node) << "'kwargs' must be an object";
  } else {
    kwargs = nullptr;
  }

  // Phase: explicit wins; otherwise backward iff it depends on the seed.
  if (node.explicitPhase == Phase::Bwd)
    node.dependsOnSeed = true;
  node.phase =
      node.explicitPhase.value_or(node.dependsOnSeed ? Phase::Bwd : Phase::Fwd);

  if (node.role == Role::Output && args)
    if (const auto *argsObject = args->getAsObject())
      readGradientPairs(*argsObject, node);
  // Only ops keep their arguments; their errors come after every other
  // check of the graph's (ArgumentError), so converting stops at the first.
  if (node.role != Role::Op || firstError[ArgumentError])
    return success();
  currentClass = ArgumentError;
  if (args)
    if (FailureOr<Attribute> converted =
            convertJsonValue(asJson(*args), context,
                             [&] { return nodeError(node); });
        succeeded(converted))
      node.args = *converted;
  if (kwargs)
    if (FailureOr<Attribute> converted =
            convertJsonValue(asJson(*kwargs), context,
                             [&] { return nodeError(node); });
        succeeded(converted))
      node.kwargs = cast<DictionaryAttr>(*converted);
  currentClass = NodeError;
  return success();
}

template <typename JsonObject>
void GraphJsonImporter::readGradientPairs(const JsonObject &args,
                                          NodeRecord &node) {
  // The backward output node says which primal each gradient belongs to:
  // grads[i] = {"in": k} is the gradient of node grad_of[i]. Anything else
  // there is not an error: the gradients just stay unnamed.
  const auto *grads = args.getArray("grads");
  const auto *primals = args.getArray("grad_of");
  if (!grads || !primals || grads->size() != primals->size())
    return;
  for (auto [grad, primal] : llvm::zip_equal(*grads, *primals)) {
    const auto *ref = grad.getAsObject();
    std::optional<int64_t> input = ref ? ref->getInteger("in") : std::nullopt;
    std::optional<int64_t> id = primal.getAsInteger();
    if (input && id)
      node.gradientOf.push_back({*input, *id});
  }
}

LogicalResult GraphJsonImporter::collectSaved(const json::Object &root) {
  const json::Value *savedValue = root.get("saved");
  if (!savedValue || savedValue->kind() == json::Value::Null)
    return success();
  const json::Array *list = savedValue->getAsArray();
  if (!list)
    return emitError(locationAt(0)) << "'saved' must be an array of "
                                       "[node_id, output_index] pairs";
  for (size_t index = 0, e = list->size(); index < e; ++index) {
    const json::Value &entry = (*list)[index];
    auto loc = [&] { return savedEntryLocation(index, e); };
    const json::Array *ref = entry.getAsArray();
    std::optional<int64_t> id, output;
    if (ref && ref->size() == 2) {
      id = (*ref)[0].getAsInteger();
      output = (*ref)[1].getAsInteger();
    }
    if (!id || !output)
      return emitError(loc()) << "saved entry " << index
                              << " is not a [node_id, output_index] pair";
    auto it = positionOfId.find(*id);
    if (it == positionOfId.end())
      return emitError(loc()) << "saved entry " << index << " refers to node "
                              << *id << ", which does not exist";
    const NodeRecord &node = nodes[it->second];
    if (*output < 0 || *output >= static_cast<int64_t>(node.resultTypes.size()))
      return emitError(loc()) << "saved entry " << index << " refers to output "
                              << *output << " of node " << *id << ", which has "
                              << node.resultTypes.size() << " outputs";
    SmallVector<int64_t, 2> &indices = saved[it->second];
    if (!llvm::is_contained(indices, *output))
      indices.push_back(*output);
  }
  return success();
}

Location GraphJsonImporter::savedEntryLocation(size_t index, size_t count) {
  if (!savedOffsets)
    savedOffsets = findTopLevelArrayElements(text, "saved");
  return savedOffsets->size() == count ? locationAt((*savedOffsets)[index])
                                       : locationAt(0);
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

void GraphJsonImporter::build(ModuleOp module) {
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
  // What every node has, looked up once rather than per node (each lookup
  // in the context's uniquer calls an equality callback per probe).
  StringAttr attrsName = LetheDialect::AttrsAttrHelper(context).getName();
  StringAttr nodeIdName = LetheDialect::NodeIdAttrHelper(context).getName();
  StringAttr savedName = LetheDialect::SavedAttrHelper(context).getName();
  std::array<PhaseAttr, 3> phases; // by Phase (fwd, bwd, opt), on first use
  DenseMap<uint64_t, FloatAttr> timeAttrs;
  // Set all at once: setting one argument's attributes rebuilds the array of
  // every argument's (quadratic in a step's thousands of parameters).
  SmallVector<DictionaryAttr> argAttrs;
  argAttrs.reserve(argTypes.size());
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
                node.name ? node.name : builder.getStringAttr(""));
      if (savedIt != saved.end())
        attrs.set(LetheDialect::SavedAttrHelper::getNameStr(),
                  builder.getUnitAttr());
      values[position].push_back(body->getArgument(argAttrs.size()));
      argAttrs.push_back(attrs.getDictionary(context));
      continue;
    }
    if (node.role == Role::Output) {
      nameGradients(node, returned.size(), gradientOf);
      returned.append(operands.begin(), operands.end());
      continue;
    }

    FloatAttr time;
    if (node.timeUs) {
      // Repeated layers repeat their times. By the bits: times are finite,
      // never the map's reserved keys (NaNs).
      FloatAttr &known = timeAttrs[llvm::bit_cast<uint64_t>(*node.timeUs)];
      if (!known)
        known = builder.getF64FloatAttr(*node.timeUs);
      time = known;
    }
    Operation *op = nullptr;
    if (std::optional<CollectiveKind> collective =
            getCollectiveKind(node.op.getValue())) {
      // Ranks are not recorded: the group is 0..size-1.
      std::optional<int64_t> groupSize =
          getC10dGroupSize(*collective, dyn_cast_or_null<ArrayAttr>(node.args));
      if (groupSize) {
        SmallVector<int64_t> group(
            llvm::to_vector(llvm::seq<int64_t>(0, *groupSize)));
        op = createCollectiveIfValid(builder, node.loc, *collective, operands,
                                     node.resultTypes, group, node.phase, time,
                                     node.scope, node.name);
      }
    }
    if (!op) {
      DenseI64ArrayAttr aliases =
          node.hasAlias || node.declaresAliases
              ? builder.getDenseI64ArrayAttr(node.aliases)
              : DenseI64ArrayAttr();
      PhaseAttr &phase = phases[static_cast<size_t>(node.phase)];
      if (!phase)
        phase = PhaseAttr::get(context, node.phase);
      op = NodeOp::create(builder, node.loc, node.resultTypes, node.op, phase,
                          operands, time, aliases, node.scope, node.name,
                          node.args);
    }
    // Named arguments, plus the positional ones of a collective (which has no
    // `args` of its own).
    NamedAttrList named;
    if (node.kwargs)
      named.append(node.kwargs.getValue());
    if (isa<CollectiveOp>(op) && node.args)
      named.set("args", node.args);
    // The discardable attributes in one dictionary: each setAttr would
    // build and unique the op's whole dictionary again. (Both ops keep
    // their inherent attributes as properties, apart from this dictionary.)
    assert(op->getPropertiesStorage() && "inherent attributes as properties");
    NamedAttrList discardable(op->getDiscardableAttrDictionary());
    if (!named.empty())
      discardable.set(attrsName, named.getDictionary(context));
    discardable.set(nodeIdName, builder.getI64IntegerAttr(node.id));
    if (savedIt != saved.end()) {
      SmallVector<int64_t, 2> indices = savedIt->second;
      llvm::sort(indices);
      discardable.set(savedName, builder.getDenseI64ArrayAttr(indices));
    }
    op->setDiscardableAttrs(discardable.getDictionary(context));
    values[position].assign(op->result_begin(), op->result_end());
  }
  func::ReturnOp::create(builder, func.getLoc(), returned);
  func.setFunctionType(
      builder.getFunctionType(argTypes, ValueRange(returned).getTypes()));
  func.setAllArgAttrs(argAttrs);
  if (!gradientOf.empty()) {
    SmallVector<NamedAttrList> resultAttrs(returned.size());
    for (auto [result, name] : gradientOf)
      resultAttrs[result].set(LetheDialect::GradOfAttrHelper::getNameStr(),
                              builder.getStringAttr(name));
    SmallVector<DictionaryAttr> dictionaries;
    for (NamedAttrList &attrs : resultAttrs)
      dictionaries.push_back(attrs.getDictionary(context));
    func.setAllResultAttrs(dictionaries);
  }
}

void GraphJsonImporter::nameGradients(
    const NodeRecord &output, unsigned firstResult,
    SmallVectorImpl<std::pair<unsigned, StringRef>> &gradientOf) const {
  for (auto [input, id] : output.gradientOf) {
    if (input < 0 || static_cast<size_t>(input) >= output.inputs.size())
      continue;
    auto it = positionOfId.find(id);
    if (it == positionOfId.end())
      continue;
    const NodeRecord &param = nodes[it->second];
    if (param.role == Role::Placeholder && param.inputKind == "param")
      gradientOf.push_back({firstResult + static_cast<unsigned>(input),
                            param.name ? param.name.getValue() : ""});
  }
}

template <typename JsonValue>
void GraphJsonImporter::readNode(unsigned position,
                                 std::optional<size_t> offset,
                                 const JsonValue &value) {
  // After an id error only the syntax of the rest matters: a whole parse
  // would have reported it first.
  if (firstError[IdError])
    return;
  currentClass = IdError;
  NodeRecord &node =
      nodes.emplace_back(offset ? locationAt(*offset) : locationAt(0));
  node.id = position;
  const auto *object = value.getAsObject();
  if (object)
    if (std::optional<StringRef> name = object->getString("name");
        name && !name->empty()) {
      node.name = StringAttr::get(context, *name);
      node.loc = NameLoc::get(node.name, node.loc);
    }
  std::optional<int64_t> id = object ? object->getInteger("id") : std::nullopt;
  if (!id) {
    if (object)
      nodeError(node) << describeBadField(*object, "id", "integer");
    else
      nodeError(node) << "is not an object";
    return;
  }
  node.id = *id;
  if (!positionOfId.try_emplace(*id, position).second) {
    nodeError(node) << "duplicate id (also used by node at position "
                    << positionOfId[*id] << ")";
    return;
  }
  // A node reads only earlier ones: after the first node error, records are
  // no longer needed.
  if (firstError[NodeError] || unresolved)
    return;
  currentClass = NodeError;
  (void)parseNode(position, value, node);
}

llvm::Error GraphJsonImporter::readNodes(const StreamedJsonDocument &document) {
  // Errors are held back, the first of each class, and reported once all
  // nodes are read (reportNodeErrors), in the order whole-graph passes
  // would give them.
  ScopedDiagnosticHandler holdBack(context, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return failure();
    std::optional<Diagnostic> &slot = firstError[currentClass];
    if (!slot)
      slot.emplace(std::move(diag));
    return success();
  });
  nodes.reserve(document.arraySize());
  return document.forEachElement(
      [&](size_t position, std::optional<size_t> offset,
          const FlatJsonValue *plain, const json::Value *value) {
        if (plain)
          readNode(position, offset, *plain);
        else
          readNode(position, offset, *value);
      });
}

LogicalResult GraphJsonImporter::reportNodeErrors() {
  if (firstError[IdError]) {
    context->getDiagEngine().emit(std::move(*firstError[IdError]));
    return failure();
  }
  if (unresolved) {
    const NodeRecord &node = nodes[unresolved->position];
    InFlightDiagnostic diag = nodeError(node)
                              << "input " << unresolved->index
                              << " refers to node " << unresolved->id;
    if (positionOfId.contains(unresolved->id))
      diag << ", which does not come before it (a cycle or a forward "
              "reference; nodes must be in program order)";
    else
      diag << ", which does not exist";
    return failure();
  }
  if (firstError[NodeError]) {
    context->getDiagEngine().emit(std::move(*firstError[NodeError]));
    return failure();
  }
  return success();
}

void GraphJsonImporter::reportMalformed(llvm::Error error) {
  std::string message = llvm::toString(std::move(error));
  Location loc = jsonParseErrorLocation(context, fileName.getValue(), message);
  emitError(loc) << "malformed JSON: " << message;
}

OwningOpRef<ModuleOp> GraphJsonImporter::import() {
  context->loadDialect<LetheDialect, func::FuncDialect>();
  if (std::optional<size_t> at = findExcessiveJsonNesting(text)) {
    emitError(locationAt(*at)) << "malformed JSON: nested deeper than "
                               << kMaxJsonNesting << " levels";
    return nullptr;
  }
  // The nodes are parsed one at a time, each freed once read.
  llvm::Expected<StreamedJsonDocument> document =
      StreamedJsonDocument::parse(text, "nodes");
  if (!document) {
    reportMalformed(document.takeError());
    return nullptr;
  }
  const json::Object *root = document->getRoot().getAsObject();
  if (!root) {
    emitError(locationAt(0)) << "expected a JSON object at the top level";
    return nullptr;
  }
  if (!document->hasArray()) {
    emitError(locationAt(0)) << "missing array field 'nodes'";
    return nullptr;
  }
  if (document->arraySize() == 0) {
    emitError(locationAt(0)) << "'nodes' is empty: a training step has at "
                                "least one node";
    return nullptr;
  }
  if (llvm::Error error = readNodes(*document)) {
    reportMalformed(std::move(error));
    return nullptr;
  }
  if (failed(reportNodeErrors()) || failed(collectSaved(*root)))
    return nullptr;
  if (firstError[ArgumentError]) {
    context->getDiagEngine().emit(std::move(*firstError[ArgumentError]));
    return nullptr;
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(locationAt(0));
  setModuleAttributes(*module, *root);
  build(*module);
  if (failed(verify(*module)))
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

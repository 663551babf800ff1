//===- PlanImporter.cpp - Plans from elsewhere, read from JSON ------------===//

#include "lethe/Import/PlanImporter.h"
#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "lethe/Import/JsonLocations.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Support/Files.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace lethe;
namespace json = llvm::json;

namespace {
/// Nodes by name (by id: TrainingGraph::findNodeBySourceId).
struct NodeIndex {
  explicit NodeIndex(const TrainingGraph &graph) {
    for (NodeId n = 0, e = graph.getNodes().size(); n < e; ++n) {
      const GraphNode &node = graph.getNode(n);
      if (!node.name.empty())
        byName.try_emplace(node.name, n);
    }
  }
  llvm::StringMap<NodeId> byName;
};
} // namespace

LogicalResult lethe::loadGivenPlan(StringRef path, const TrainingGraph &graph,
                                   PlanOptions &options, MLIRContext *context) {
  if (path.empty())
    return success();
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readInputFile(path);
  if (!buffer)
    return emitError(fileLoc)
           << "cannot read the plan: " << llvm::toString(buffer.takeError());
  StringRef source = (*buffer)->getBuffer();
  if (std::optional<size_t> at = findExcessiveJsonNesting(source))
    return emitError(locationInText(context, path, source, *at))
           << "malformed JSON: nested deeper than " << kMaxJsonNesting
           << " levels";
  llvm::Expected<json::Value> parsed = json::parse(source);
  if (!parsed) {
    std::string message = llvm::toString(parsed.takeError());
    Location loc = jsonParseErrorLocation(context, path, message);
    return emitError(loc) << "malformed JSON: " << message;
  }
  Location top = locationInText(context, path, source, 0);
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return emitError(top) << "expected a JSON object with an array "
                             "'decisions'";
  // `values` is what `lethe plan --json` writes.
  StringRef key = root->get("decisions") ? "decisions" : "values";
  const json::Array *entries = root->getArray(key);
  if (!entries)
    return emitError(top) << "expected an array field 'decisions' (or "
                             "'values', as `lethe plan --json` writes)";
  std::vector<size_t> offsets = findTopLevelArrayElements(source, key);
  if (offsets.size() != entries->size())
    offsets.clear();

  ActivationAnalysis analysis(graph, options);
  NodeIndex nodes(graph);
  llvm::DenseMap<ValueId, size_t> seen;
  std::vector<ActivationDecision> decisions;
  for (size_t i = 0, e = entries->size(); i < e; ++i) {
    Location loc = offsets.empty()
                       ? top
                       : locationInText(context, path, source, offsets[i]);
    const json::Object *entry = (*entries)[i].getAsObject();
    if (!entry)
      return emitError(loc) << "a decision must be an object";
    // The node: its exported id, else its name.
    NodeId node = -1;
    if (const json::Value *id = entry->get("node_id")) {
      std::optional<int64_t> n = id->getAsInteger();
      if (!n)
        return emitError(loc) << "field 'node_id' must be an integer";
      std::optional<NodeId> found = graph.findNodeBySourceId(*n);
      if (!found)
        return emitError(loc) << "no node with id " << *n << " in the graph";
      node = *found;
    } else if (const json::Value *name = entry->get("node")) {
      std::optional<StringRef> n = name->getAsString();
      if (!n)
        return emitError(loc) << "field 'node' must be a string";
      auto it = nodes.byName.find(*n);
      if (it == nodes.byName.end())
        return emitError(loc) << "no node named '" << *n << "' in the graph";
      node = it->second;
    } else {
      return emitError(loc) << "a decision names its node: 'node_id' (the "
                               "exported id) or 'node' (its name)";
    }
    const GraphNode &producer = graph.getNode(node);
    // Named as the plan JSON names it.
    std::string what = producer.name.empty()
                           ? "node " + std::to_string(*producer.sourceId)
                           : "node '" + producer.name + "'";
    int64_t output = 0;
    if (const json::Value *out = entry->get("output")) {
      std::optional<int64_t> k = out->getAsInteger();
      if (!k)
        return emitError(loc) << "field 'output' must be an integer";
      output = *k;
    }
    if (output < 0 || output >= static_cast<int64_t>(producer.results.size()))
      return emitError(loc)
             << what << " has " << producer.results.size()
             << " output(s); output " << output << " is out of range";
    what += " output " + std::to_string(output);
    const json::Value *decisionField = entry->get("decision");
    std::optional<StringRef> decisionName =
        decisionField ? decisionField->getAsString() : std::nullopt;
    if (!decisionName)
      return emitError(loc) << "missing string field 'decision' (retain, "
                               "recompute or offload)";
    std::optional<Decision> decision = symbolizeDecision(*decisionName);
    if (!decision)
      return emitError(loc) << "unknown decision '" << *decisionName
                            << "' (expected retain, recompute or offload)";

    ValueId value = producer.results[output];
    int32_t a = analysis.activationIndex(value);
    if (a < 0 || analysis.getActivations()[a].storage != value)
      return emitError(loc)
             << what << " is not an activation Lethe may decide on: "
             << (a >= 0 ? "it is a view of another activation; decide on "
                          "the value it views"
                 : producer.phase != Phase::Fwd
                     ? "the forward does not produce it"
                     : "the backward does not read it, or it owns no "
                       "memory of its own");
    const ActivationInfo &act = analysis.getActivations()[a];
    auto [previous, inserted] = seen.try_emplace(value, i);
    if (!inserted)
      return emitError(loc) << what << " is decided twice (also by entry "
                            << previous->second << ")";
    if (*decision == Decision::Recompute && !act.recomputable)
      return emitError(loc)
             << what << " cannot be recomputed: " << act.notRecomputableReason;
    if (*decision == Decision::Offload && !act.offloadable)
      return emitError(loc)
             << what << " cannot be offloaded: " << act.notOffloadableReason;
    ActivationDecision given;
    given.value = value;
    given.decision = *decision;
    // An offload's copy placement, as `lethe plan --json` writes it: the
    // release after node `release_after`, the prefetch issued after node
    // `prefetch_after` (null or absent: the planner places it).
    auto placementNode = [&](StringRef field, NodeId &out) -> FailureOr<bool> {
      const json::Value *v = entry->get(field);
      if (!v || v->kind() == json::Value::Null)
        return false;
      std::optional<int64_t> id = v->getAsInteger();
      if (!id)
        return emitError(loc)
               << "field '" << field << "' must be a node id or null";
      if (*decision != Decision::Offload)
        return emitError(loc) << "field '" << field << "' places the copies "
                              << "of an offload; " << what << " is decided "
                              << stringifyDecision(*decision);
      std::optional<NodeId> found = graph.findNodeBySourceId(*id);
      if (!found)
        return emitError(loc) << "field '" << field << "': no node with id "
                              << *id << " in the graph";
      // Between the value's last forward use and its first backward use,
      // where its copies run.
      if (*found < act.lastForwardUse || *found >= act.firstBackwardUse)
        return emitError(loc)
               << "field '" << field << "': node " << *id << " is outside "
               << what << "'s time off the device (after its last forward "
               << "use, before its first backward use)";
      out = *found;
      return true;
    };
    FailureOr<bool> release =
        placementNode("release_after", given.releaseAfter);
    if (failed(release))
      return failure();
    FailureOr<bool> prefetch =
        placementNode("prefetch_after", given.prefetchAfter);
    if (failed(prefetch))
      return failure();
    if (*release && *prefetch && given.prefetchAfter < given.releaseAfter)
      return emitError(loc)
             << what << " is prefetched (after node "
             << *graph.getNode(given.prefetchAfter).sourceId
             << ") before it is released (after node "
             << *graph.getNode(given.releaseAfter).sourceId << ")";
    decisions.push_back(std::move(given));
  }
  options.givenDecisions = std::move(decisions);
  return success();
}

//===- Layers.cpp - Find the repeated layers of a forward pass ------------===//

#include "lethe/Planner/Layers.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <optional>

using namespace lethe;

namespace {
/// A numbered component on a node's module path.
struct Numbered {
  /// Parent path and stem: the siblings it is numbered among.
  std::string group;
  /// The path up to and including the component: the layer's name.
  std::string path;
};

/// Siblings numbered alike, with the forward nodes under each.
struct Group {
  /// Sibling path -> its forward nodes, in program order.
  std::map<std::string, std::vector<NodeId>> children;
};

enum class Tier { Strict, Loose };
} // namespace

static bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// The components of a module path: `encoder.layers[3]` and
/// `encoder.layers.3` both give encoder, layers, 3.
static llvm::SmallVector<llvm::StringRef> scopeParts(llvm::StringRef scope) {
  llvm::SmallVector<llvm::StringRef> parts;
  while (!scope.empty()) {
    size_t end = scope.find_first_of(".[]");
    llvm::StringRef part = scope.take_front(end).trim("'\" ");
    if (!part.empty())
      parts.push_back(part);
    if (end == llvm::StringRef::npos)
      break;
    scope = scope.drop_front(end + 1);
  }
  return parts;
}

/// The stem of a component that numbers a module: "" for `3`, "layer" for
/// `layer3`, "encoder_layer_" for `encoder_layer_3`; none otherwise.
static std::optional<llvm::StringRef> numberedStem(llvm::StringRef part) {
  size_t digits = 0;
  while (digits < part.size() && isDigit(part[part.size() - 1 - digits]))
    ++digits;
  if (digits == 0)
    return std::nullopt;
  return part.drop_back(digits);
}

static llvm::SmallVector<Numbered> numberedComponents(llvm::StringRef scope) {
  llvm::SmallVector<Numbered> out;
  std::string prefix;
  for (llvm::StringRef part : scopeParts(scope)) {
    std::string parent = prefix;
    if (!prefix.empty())
      prefix += ".";
    prefix += part.str();
    if (std::optional<llvm::StringRef> stem = numberedStem(part))
      out.push_back({parent + "\n" + stem->str(), prefix});
  }
  return out;
}

/// What a node computes, for comparing blocks: its kind and the bytes of
/// its operands and results.
static uint64_t nodeSignature(const TrainingGraph &graph, NodeId id) {
  const GraphNode &node = graph.getNode(id);
  llvm::hash_code hash = llvm::hash_value(llvm::StringRef(node.kind));
  for (ValueId operand : node.operands)
    hash = llvm::hash_combine(hash, graph.getValue(operand).bytes);
  for (ValueId result : node.results)
    hash = llvm::hash_combine(hash, 1, graph.getValue(result).bytes);
  return static_cast<uint64_t>(hash);
}

namespace {
/// Whether forward data flows from one set of nodes to another.
class Reachability {
public:
  explicit Reachability(const TrainingGraph &graph)
      : graph(graph), seen(graph.numNodes(), 0) {}

  /// Whether a node of `to` reads (through forward nodes) a value computed
  /// by a node of `from`. Nodes are in program order.
  bool reaches(llvm::ArrayRef<NodeId> from, llvm::ArrayRef<NodeId> to) {
    ++epoch;
    for (NodeId id : to)
      seen[id] = -epoch;
    NodeId last = to.back();
    std::vector<NodeId> stack;
    for (NodeId id : from)
      if (seen[id] != epoch) {
        seen[id] = epoch;
        stack.push_back(id);
      }
    while (!stack.empty()) {
      NodeId id = stack.back();
      stack.pop_back();
      for (ValueId result : graph.getNode(id).results)
        for (NodeId user : graph.getValue(result).users) {
          if (user > last || graph.getNode(user).phase != Phase::Fwd)
            continue;
          if (seen[user] == -epoch)
            return true;
          if (seen[user] == epoch)
            continue;
          seen[user] = epoch;
          stack.push_back(user);
        }
    }
    return false;
  }

private:
  const TrainingGraph &graph;
  std::vector<int64_t> seen;
  int64_t epoch = 0;
};
} // namespace

/// A variant is at most this many times the size of the block it varies.
constexpr size_t kMaxVariantRatio = 3;

/// Share of the smaller sibling's ops (kind and sizes, as a multiset) that
/// the larger one has too; 0 when one is over kMaxVariantRatio times the
/// other.
static double overlap(const TrainingGraph &graph, llvm::ArrayRef<NodeId> a,
                      llvm::ArrayRef<NodeId> b) {
  auto signatures = [&](llvm::ArrayRef<NodeId> nodes) {
    std::vector<uint64_t> out;
    for (NodeId id : nodes)
      out.push_back(static_cast<uint64_t>(nodeSignature(graph, id)));
    llvm::sort(out);
    return out;
  };
  std::vector<uint64_t> x = signatures(a), y = signatures(b);
  size_t small = std::min(x.size(), y.size());
  size_t large = std::max(x.size(), y.size());
  if (small == 0 || large > kMaxVariantRatio * small)
    return 0.0;
  size_t common = 0;
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    if (x[i] == y[j]) {
      ++common;
      ++i;
      ++j;
    } else if (x[i] < y[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return static_cast<double>(common) / static_cast<double>(small);
}

/// Neighbours one of which holds this share of the other's ops are a block
/// and its variant (Swin's shifted-window block computes its mask inside:
/// 158 ops holding all 76 of the plain block's); a CNN's stages share
/// almost none (their sizes differ).
constexpr double kSameBlockOverlap = 0.9;

/// The median child of a stack of layers launches at least this many
/// kernels.
constexpr size_t kMinLayerKernels = 2;

/// Whether a group of numbered siblings is a stack of layers under `tier`.
static bool isLayerGroup(const TrainingGraph &graph, const Group &group,
                         Tier tier, Reachability &reach) {
  if (group.children.size() < 2)
    return false;
  std::vector<const std::vector<NodeId> *> children;
  for (const auto &[path, nodes] : group.children)
    children.push_back(&nodes);
  llvm::sort(children, [](const std::vector<NodeId> *a,
                          const std::vector<NodeId> *b) {
    return a->front() < b->front();
  });
  bool serial = true;
  for (size_t k = 0; k + 1 < children.size() && serial; ++k)
    serial = reach.reaches(*children[k], *children[k + 1]);
  std::map<uint64_t, int> signatures;
  bool repeated = false, composite = false;
  std::vector<size_t> kernels; // per child, nodes that launch a kernel
  for (const std::vector<NodeId> *nodes : children) {
    composite |= nodes->size() > 1;
    kernels.push_back(llvm::count_if(*nodes, [&](NodeId id) {
      return !graph.getNode(id).hasFlag(NodeFlagView);
    }));
    llvm::hash_code hash = llvm::hash_value(nodes->size());
    for (NodeId id : *nodes)
      hash = llvm::hash_combine(hash, nodeSignature(graph, id));
    repeated |= ++signatures[static_cast<uint64_t>(hash)] > 1;
  }
  for (size_t k = 0; k + 1 < children.size() && !repeated; ++k)
    repeated = overlap(graph, *children[k], *children[k + 1]) >=
               kSameBlockOverlap;
  // Children of one kernel each (a Sequential of conv, norm, activation:
  // U-Net's double-conv) are one block's body, not a stack of blocks: a
  // layer must at least be a kernel and what follows it.
  std::nth_element(kernels.begin(), kernels.begin() + kernels.size() / 2,
                   kernels.end());
  if (kernels[kernels.size() / 2] < kMinLayerKernels)
    return false;
  if (tier == Tier::Strict)
    return serial && repeated;
  return (serial || repeated) && composite;
}

/// Layers from scopes; empty when fewer than two are found.
static LayerInfo layersFromScopes(const TrainingGraph &graph) {
  LayerInfo info;
  const size_t numNodes = graph.numNodes();
  info.layerOf.assign(numNodes, -1);
  info.fromScopes = true;
  // std::map keeps the result independent of hashing.
  std::map<std::string, Group> groups;
  // Each distinct scope is split and looked up in `groups` once, not once
  // per node: a layer's nodes share a handful of scopes (the strings and
  // lookups were ~1% of `lethe plan` at 100,000 ops, where the analysis is
  // built twice). A node's ids go to the same lists in the same order.
  struct Scope {
    llvm::SmallVector<Numbered> components;
    /// children[path] of each component's group.
    llvm::SmallVector<std::vector<NodeId> *> members;
  };
  std::vector<Scope> scopes;
  llvm::StringMap<int32_t> scopeIndex;
  std::vector<int32_t> scopeOf(numNodes, -1);
  for (auto [id, node] : llvm::enumerate(graph.getNodes())) {
    if (node.phase != Phase::Fwd || node.scope.empty())
      continue;
    auto [entry, inserted] =
        scopeIndex.try_emplace(node.scope, static_cast<int32_t>(scopes.size()));
    if (inserted) {
      Scope &scope = scopes.emplace_back();
      scope.components = numberedComponents(node.scope);
      for (const Numbered &c : scope.components)
        scope.members.push_back(&groups[c.group].children[c.path]);
    }
    scopeOf[id] = entry->second;
    for (std::vector<NodeId> *members : scopes[entry->second].members)
      members->push_back(static_cast<NodeId>(id));
  }
  if (groups.empty())
    return info;
  Reachability reach(graph);
  for (Tier tier : {Tier::Strict, Tier::Loose}) {
    llvm::StringMap<bool> isLayers;
    for (const auto &[key, group] : groups)
      isLayers[key] = isLayerGroup(graph, group, tier, reach);
    info.names.clear();
    info.layerOf.assign(numNodes, -1);
    llvm::StringMap<int32_t> layerIds;
    for (NodeId id = 0; id < static_cast<NodeId>(numNodes); ++id)
      for (const Numbered &c :
           scopeOf[id] < 0 ? llvm::ArrayRef<Numbered>()
                           : llvm::ArrayRef(scopes[scopeOf[id]].components)) {
        if (!isLayers.lookup(c.group))
          continue;
        auto [entry, inserted] = layerIds.try_emplace(
            c.path, static_cast<int32_t>(info.names.size()));
        if (inserted)
          info.names.push_back(c.path);
        info.layerOf[id] = entry->second;
        break;
      }
    if (info.names.size() >= 2)
      return info;
  }
  info.names.clear();
  info.layerOf.assign(numNodes, -1);
  return info;
}

/// Layers from repeated op sequences along the forward.
static LayerInfo layersFromStructure(const TrainingGraph &graph) {
  LayerInfo info;
  const size_t numNodes = graph.numNodes();
  info.layerOf.assign(numNodes, -1);
  std::vector<NodeId> fwd;
  for (auto [id, node] : llvm::enumerate(graph.getNodes()))
    if (node.phase == Phase::Fwd)
      fwd.push_back(static_cast<NodeId>(id));
  const size_t n = fwd.size();
  if (n < 4)
    return info;
  std::vector<int32_t> position(numNodes, -1);
  for (auto [k, id] : llvm::enumerate(fwd))
    position[id] = static_cast<int32_t>(k);

  // Ops as small integers, equal when kind and sizes are.
  std::vector<uint32_t> symbol(n);
  llvm::DenseMap<uint64_t, uint32_t> symbols;
  for (size_t k = 0; k < n; ++k)
    symbol[k] = symbols
                    .try_emplace(nodeSignature(graph, fwd[k]),
                                 static_cast<uint32_t>(symbols.size()))
                    .first->second;

  // cutBefore[k]: forward storages produced before position k and read by
  // a forward node at or after it.
  std::vector<int32_t> lastForwardUse(graph.numValues(), -1);
  for (size_t v = 0; v < graph.numValues(); ++v) {
    const GraphValue &value = graph.getValue(v);
    for (NodeId user : value.users)
      if (position[user] >= 0)
        lastForwardUse[value.storage] =
            std::max(lastForwardUse[value.storage], position[user]);
  }
  std::vector<int32_t> delta(n + 1, 0);
  for (size_t v = 0; v < graph.numValues(); ++v) {
    const GraphValue &value = graph.getValue(v);
    if (value.isInput() || value.storage != static_cast<ValueId>(v))
      continue;
    int32_t produced = position[value.producer];
    if (produced < 0 || lastForwardUse[v] <= produced)
      continue;
    ++delta[produced + 1];
    --delta[lastForwardUse[v] + 1];
  }
  std::vector<int32_t> cutBefore(n + 1, 0);
  for (size_t k = 1; k <= n; ++k)
    cutBefore[k] = cutBefore[k - 1] + delta[k];

  // Periods searched: all up to n/2 on graphs of a few thousand forward
  // ops, fewer on larger ones (about 2e7 comparisons per run).
  const size_t maxPeriod =
      std::min(n / 2, std::max<size_t>(64, size_t(20'000'000) / n));
  std::vector<char> taken(n, 0);
  struct Run {
    size_t begin, period, count;
  };
  std::vector<Run> runs;
  for (int attempt = 0; attempt < 16; ++attempt) {
    size_t bestPeriod = 0, bestStart = 0, bestCover = 0;
    for (size_t p = 1; p <= maxPeriod; ++p) {
      size_t run = 0;
      for (size_t i = 0; i + p < n; ++i) {
        run = !taken[i] && !taken[i + p] && symbol[i] == symbol[i + p]
                  ? run + 1
                  : 0;
        // A run of r matches covers r + p ops: at least two periods.
        if (run >= p && run + p > bestCover) {
          bestCover = run + p;
          bestPeriod = p;
          bestStart = i + 1 - run;
        }
      }
    }
    // Later runs must be as large as one block of the first.
    if (bestPeriod == 0 || (!runs.empty() && bestCover < runs[0].period))
      break;
    // Cut at the phase the fewest values cross.
    size_t phase = 0;
    for (size_t f = 1; f < bestPeriod && bestCover - f >= 2 * bestPeriod; ++f)
      if (cutBefore[bestStart + f] < cutBefore[bestStart + phase])
        phase = f;
    Run r{bestStart + phase, bestPeriod, (bestCover - phase) / bestPeriod};
    for (size_t k = r.begin; k < r.begin + r.count * r.period; ++k)
      taken[k] = 1;
    runs.push_back(r);
  }
  llvm::sort(runs, [](const Run &a, const Run &b) { return a.begin < b.begin; });
  for (const Run &r : runs)
    for (size_t layer = 0; layer < r.count; ++layer) {
      int32_t id = static_cast<int32_t>(info.names.size());
      info.names.push_back(llvm::formatv("layer {0}", id).str());
      for (size_t k = r.begin + layer * r.period;
           k < r.begin + (layer + 1) * r.period; ++k)
        info.layerOf[fwd[k]] = id;
    }
  if (info.names.size() < 2) {
    info.names.clear();
    info.layerOf.assign(numNodes, -1);
  }
  return info;
}

LayerInfo lethe::findLayers(const TrainingGraph &graph) {
  LayerInfo info = layersFromScopes(graph);
  if (info.numLayers() >= 2)
    return info;
  return layersFromStructure(graph);
}

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
#include <set>

using namespace lethe;

static bool isNumber(llvm::StringRef s) {
  return !s.empty() && llvm::all_of(s, [](char c) { return c >= '0' && c <= '9'; });
}

/// Layers from scopes; empty when fewer than two are found.
static LayerInfo layersFromScopes(const TrainingGraph &graph) {
  LayerInfo info;
  const size_t numNodes = graph.numNodes();
  info.layerOf.assign(numNodes, -1);
  // Distinct numbered children of every parent path. std::map keeps the
  // result independent of hashing.
  std::map<std::string, std::set<std::string>> children;
  for (const GraphNode &node : graph.getNodes()) {
    if (node.phase != Phase::Fwd || node.scope.empty())
      continue;
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(node.scope).split(parts, '.');
    std::string prefix;
    for (auto [k, part] : llvm::enumerate(parts)) {
      if (k > 0 && isNumber(part))
        children[prefix].insert(part.str());
      if (k > 0)
        prefix += ".";
      prefix += part.str();
    }
  }
  llvm::StringMap<int32_t> layerIds;
  for (auto [id, node] : llvm::enumerate(graph.getNodes())) {
    if (node.phase != Phase::Fwd || node.scope.empty())
      continue;
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(node.scope).split(parts, '.');
    std::string prefix;
    for (auto [k, part] : llvm::enumerate(parts)) {
      if (k > 0 && isNumber(part)) {
        auto it = children.find(prefix);
        if (it != children.end() && it->second.size() >= 2) {
          std::string name = prefix + "." + part.str();
          auto [entry, inserted] = layerIds.try_emplace(
              name, static_cast<int32_t>(info.names.size()));
          if (inserted)
            info.names.push_back(name);
          info.layerOf[id] = entry->second;
          break;
        }
      }
      if (k > 0)
        prefix += ".";
      prefix += part.str();
    }
  }
  info.fromScopes = true;
  if (info.names.size() < 2) {
    info.names.clear();
    info.layerOf.assign(numNodes, -1);
  }
  return info;
}

/// Layers from repeated structure between cuts of the forward.
static LayerInfo layersFromStructure(const TrainingGraph &graph) {
  LayerInfo info;
  const size_t numNodes = graph.numNodes();
  info.layerOf.assign(numNodes, -1);
  std::vector<NodeId> fwd;
  for (auto [id, node] : llvm::enumerate(graph.getNodes()))
    if (node.phase == Phase::Fwd)
      fwd.push_back(static_cast<NodeId>(id));
  if (fwd.size() < 4)
    return info;
  // Position of every forward node among forward nodes.
  std::vector<int32_t> position(numNodes, -1);
  for (auto [k, id] : llvm::enumerate(fwd))
    position[id] = static_cast<int32_t>(k);
  // crossing[k]: forward-produced storages read by a forward node after
  // position k and produced at or before it.
  std::vector<int32_t> lastForwardUse(graph.numValues(), -1);
  for (size_t v = 0; v < graph.numValues(); ++v) {
    const GraphValue &value = graph.getValue(v);
    for (NodeId user : value.users)
      if (position[user] >= 0)
        lastForwardUse[value.storage] =
            std::max(lastForwardUse[value.storage], position[user]);
  }
  std::vector<int32_t> delta(fwd.size() + 1, 0);
  for (size_t v = 0; v < graph.numValues(); ++v) {
    const GraphValue &value = graph.getValue(v);
    if (value.isInput() || value.storage != static_cast<ValueId>(v))
      continue;
    int32_t produced = position[value.producer];
    if (produced < 0 || lastForwardUse[v] <= produced)
      continue;
    ++delta[produced];
    --delta[lastForwardUse[v]];
  }
  std::vector<int32_t> crossing(fwd.size(), 0);
  int32_t running = 0;
  for (size_t k = 0; k + 1 < fwd.size(); ++k) {
    running += delta[k];
    crossing[k] = running;
  }
  // Cuts: boundaries in the middle half-open range with the fewest crossings.
  int32_t least = INT32_MAX;
  for (size_t k = 0; k + 1 < fwd.size(); ++k)
    least = std::min(least, crossing[k]);
  std::vector<size_t> cuts; // a cut after position k
  for (size_t k = 0; k + 1 < fwd.size(); ++k)
    if (crossing[k] == least)
      cuts.push_back(k);
  // Pieces between consecutive cuts, with kind signatures.
  std::vector<std::pair<size_t, size_t>> pieces; // [begin, end) positions
  size_t begin = 0;
  for (size_t cut : cuts) {
    if (cut + 1 > begin)
      pieces.push_back({begin, cut + 1});
    begin = cut + 1;
  }
  if (begin < fwd.size())
    pieces.push_back({begin, fwd.size()});
  std::vector<uint64_t> signature;
  for (auto [b, e] : pieces) {
    llvm::hash_code hash = llvm::hash_value(e - b);
    for (size_t k = b; k < e; ++k)
      hash = llvm::hash_combine(hash, llvm::StringRef(graph.getNode(fwd[k]).kind));
    signature.push_back(static_cast<uint64_t>(hash));
  }
  // The period with the longest run of repeats.
  const size_t m = pieces.size();
  size_t bestPeriod = 0, bestStart = 0, bestRun = 0;
  for (size_t p = 1; p <= std::min<size_t>(16, m / 2); ++p) {
    size_t run = 0;
    for (size_t i = 0; i + p < m; ++i) {
      run = signature[i] == signature[i + p] ? run + 1 : 0;
      // A run of r matches covers r + p pieces.
      if (run > 0 && run > bestRun) {
        bestRun = run;
        bestPeriod = p;
        bestStart = i + 1 - run;
      }
    }
  }
  if (bestRun == 0 || bestRun < bestPeriod)
    return info;
  size_t numLayers = (bestRun + bestPeriod) / bestPeriod;
  for (size_t layer = 0; layer < numLayers; ++layer) {
    info.names.push_back(llvm::formatv("layer {0}", layer).str());
    for (size_t piece = bestStart + layer * bestPeriod;
         piece < bestStart + (layer + 1) * bestPeriod; ++piece)
      for (size_t k = pieces[piece].first; k < pieces[piece].second; ++k)
        info.layerOf[fwd[k]] = static_cast<int32_t>(layer);
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

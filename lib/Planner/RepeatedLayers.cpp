//===- RepeatedLayers.cpp - Activations of identical layers ---------------===//

#include "lethe/Planner/RepeatedLayers.h"

#include "AutoSolverImpl.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <map>
#include <tuple>

using namespace lethe;
using namespace lethe::autosolver;

/// Large enough that the untied ladder takes seconds (one simulation of the
/// whole step per 1% level, each linear in the step). Below it ties save
/// less, and forced on the corpus graphs (8-24 layers) they cost up to a
/// few points of overhead; at 1,024 the 10k-op synthetic step would solve
/// 3.6x faster, but deeper real models would lose up to half a point at
/// tight budgets (bench/results/scaling.md, "The tie threshold measured").
constexpr size_t kTieMinActivations = 4096;
/// Node times of two copies of a layer agree within this share.
constexpr double kTimeTolerance = 0.1;
/// A block repeated fewer times is not worth a class.
constexpr size_t kTieMinCopies = 8;

/// What the layer computes, node by node: kind, flags, sizes, and
/// where each operand comes from inside the layer (its producer's position
/// and result index), so that two layers hash alike only when they are the
/// same computation wired the same way.
static uint64_t layerHash(const TrainingGraph &graph,
                          llvm::ArrayRef<NodeId> nodes,
                          const llvm::DenseMap<NodeId, int32_t> &position) {
  llvm::hash_code hash = llvm::hash_value(nodes.size());
  for (NodeId id : nodes) {
    const GraphNode &node = graph.getNode(id);
    hash = llvm::hash_combine(hash, llvm::StringRef(node.kind), node.flags,
                              node.operands.size(), node.results.size());
    for (ValueId operand : node.operands) {
      const GraphValue &value = graph.getValue(operand);
      auto inside =
          value.isInput() ? position.end() : position.find(value.producer);
      if (inside == position.end())
        hash = llvm::hash_combine(hash, value.bytes, -1);
      else
        hash = llvm::hash_combine(hash, value.bytes, inside->second,
                                  value.resultIndex);
    }
    for (ValueId result : node.results) {
      const GraphValue &value = graph.getValue(result);
      hash = llvm::hash_combine(hash, value.bytes, value.storage == result,
                                value.isOutput);
    }
  }
  return static_cast<uint64_t>(hash);
}

RepeatedLayers lethe::findRepeatedLayers(const ActivationAnalysis &analysis) {
  RepeatedLayers result;
  const TrainingGraph &graph = analysis.getGraph();
  const LayerInfo &layers = analysis.getLayers();
  const size_t numLayers = layers.numLayers();
  if (numLayers < 2)
    return result;
  std::vector<std::vector<NodeId>> nodesOf(numLayers);
  for (auto [id, layer] : llvm::enumerate(layers.layerOf))
    if (layer >= 0)
      nodesOf[layer].push_back(static_cast<NodeId>(id));
  // Layers with equal hashes form a group; a group of one is no repeat.
  // Measured times differ a little between copies of one layer: a layer
  // joins the first layer of its hash whose node times it matches within
  // kTimeTolerance, else starts a group of its own.
  llvm::DenseMap<NodeId, int32_t> position;
  std::vector<uint64_t> hashOf(numLayers);
  std::map<uint64_t, std::vector<size_t>> firstOfGroup;
  std::map<uint64_t, size_t> copies;
  auto sameTimes = [&](size_t x, size_t y) {
    for (auto [a, b] : llvm::zip(nodesOf[x], nodesOf[y])) {
      double ta = graph.getNode(a).timeUs, tb = graph.getNode(b).timeUs;
      if (std::abs(ta - tb) > kTimeTolerance * std::max(ta, tb))
        return false;
    }
    return true;
  };
  for (size_t l = 0; l < numLayers; ++l) {
    position.clear();
    for (auto [k, id] : llvm::enumerate(nodesOf[l]))
      position[id] = static_cast<int32_t>(k);
    uint64_t structure = layerHash(graph, nodesOf[l], position);
    std::vector<size_t> &firsts = firstOfGroup[structure];
    auto match =
        llvm::find_if(firsts, [&](size_t f) { return sameTimes(f, l); });
    size_t group = match != firsts.end() ? *match : l;
    if (match == firsts.end())
      firsts.push_back(l);
    hashOf[l] = llvm::hash_combine(structure, group);
    ++copies[hashOf[l]];
  }
  for (size_t l = 0; l < numLayers; ++l)
    result.repeatedLayers += copies[hashOf[l]] > 1;

  // Class key: the layer's hash, the producer's position in the layer, the
  // result, and the activation's own figures.
  using Key = std::tuple<uint64_t, int32_t, int32_t, int64_t, uint8_t, size_t>;
  std::map<Key, size_t> classOf;
  std::vector<std::vector<int32_t>> classes;
  std::vector<int32_t> positionInLayer(graph.numNodes(), -1);
  for (size_t l = 0; l < numLayers; ++l)
    for (auto [k, id] : llvm::enumerate(nodesOf[l]))
      positionInLayer[id] = static_cast<int32_t>(k);
  for (auto [a, act] : llvm::enumerate(analysis.getActivations())) {
    int32_t layer = layers.layerOf[act.producer];
    if (layer < 0 || copies[hashOf[layer]] < 2)
      continue;
    uint8_t options = (act.recomputable ? 1 : 0) | (act.offloadable ? 2 : 0) |
                      (act.checkpoint ? 4 : 0);
    Key key{hashOf[layer],
            positionInLayer[act.producer],
            graph.getValue(act.storage).resultIndex,
            act.bytes,
            options,
            act.recomputeNodes.size()};
    auto [it, inserted] = classOf.try_emplace(key, classes.size());
    if (inserted)
      classes.emplace_back();
    classes[it->second].push_back(static_cast<int32_t>(a));
  }
  // std::map keeps the classes' order independent of hashing: order them
  // by their first activation for determinism across builds.
  for (std::vector<int32_t> &members : classes)
    if (members.size() >= 2) {
      result.tiedActivations += members.size();
      result.classes.push_back(std::move(members));
    }
  llvm::sort(result.classes,
             [](const std::vector<int32_t> &x, const std::vector<int32_t> &y) {
               return x.front() < y.front();
             });
  return result;
}

bool lethe::shouldTieRepeatedLayers(const ActivationAnalysis &analysis,
                                    const RepeatedLayers &repeated) {
  const size_t numActs = analysis.getActivations().size();
  return numActs >= kTieMinActivations &&
         repeated.repeatedLayers >= kTieMinCopies &&
         2 * repeated.tiedActivations >= numActs;
}

//===----------------------------------------------------------------------===//
// The solver's side: tied picks
//===----------------------------------------------------------------------===//

void Solver::appendTiedPicks(size_t op, const Positions &pos,
                             const Batch &batch,
                             const planner::CopyModel &copies, int64_t need,
                             llvm::SmallVectorImpl<Candidate> &picks) const {
  const Candidate picked = picks.front();
  int32_t cls = tieClass[picked.act];
  // A copy-time trade is placed around this op's node: no other member
  // shares it.
  if (cls < 0 || !(picked.hint == CopyHint()) || need <= 0)
    return;
  if (picked.decision == Decision::Recompute) {
    for (int32_t m : solverOptions.tiedClasses[cls]) {
      if (need <= 0)
        break;
      if (m == picked.act || batch.picked[m] || batch.restore[m] < 0)
        continue;
      const Candidate &c = batch.recompute[m];
      if (c.act >= 0 && c.gapBegin <= op && op <= c.gapEnd) {
        picks.push_back(c);
        need -= c.benefit;
      }
    }
    return;
  }
  // Offloads: the members that could free `op`, in program order.
  int64_t hostBytes = offloadedBytes + picked.bytes;
  std::vector<std::pair<int32_t, NodeId>> members;
  for (int32_t m : solverOptions.tiedClasses[cls]) {
    if (need <= 0)
      break;
    if (m == picked.act || batch.picked[m] || batch.restore[m] < 0)
      continue;
    const ActivationInfo &act = acts[m];
    NodeId restore = batch.restore[m];
    if (!act.offloadable || hostBytes + act.bytes > options.hostBudgetBytes ||
        op <= static_cast<size_t>(pos.nodeOp[act.lastForwardUse]) ||
        op >= static_cast<size_t>(pos.regionStart[restore]))
      continue;
    hostBytes += act.bytes;
    need -= act.bytes;
    members.push_back({m, restore});
  }
  if (members.empty())
    return;
  // The longest prefix whose copies all hide: more copies only delay the
  // others (the queues are FIFO), so the predicted wait grows with the
  // prefix and a bisection finds it with a few runs of the queues.
  planner::CopyModel withPicked = copies;
  withPicked.add(picked.act, picked.restore);
  withPicked.update();
  const double wait = withPicked.exposureUs();
  auto hides = [&](size_t count) {
    planner::CopyModel trial = withPicked;
    trial.addAll(llvm::ArrayRef(members).take_front(count));
    trial.update();
    return trial.exposureUs() <= wait;
  };
  size_t lo = 0, hi = members.size();
  while (lo < hi) {
    size_t mid = (lo + hi + 1) / 2;
    if (hides(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  for (auto [m, restore] : llvm::ArrayRef(members).take_front(lo)) {
    Candidate c;
    c.act = m;
    c.decision = Decision::Offload;
    c.bytes = c.benefit = acts[m].bytes;
    c.restore = restore;
    picks.push_back(std::move(c));
  }
}

llvm::Expected<std::optional<unsigned>>
Solver::descendTied(unsigned from, int64_t baselinePeak) {
  // The first ladder level at or below the budget, and the one above it.
  const int64_t over = baselinePeak - options.budgetBytes;
  if (!solverOptions.tiedDescent || over <= 0)
    return std::nullopt;
  const int64_t first = (over + stepBytes - 1) / stepBytes;
  // Where the budget's level is next, the untied ladder is as quick.
  if (first <= static_cast<int64_t>(from) + 2)
    return std::nullopt;
  const unsigned target = static_cast<unsigned>(first - 1);
  State above = save();
  partialTies = true;
  llvm::Expected<bool> reached =
      reduceTo(baselinePeak - static_cast<int64_t>(target) * stepBytes);
  partialTies = false;
  if (!reached)
    return reached.takeError();
  if (!*reached) {
    restore(std::move(above));
    return std::nullopt;
  }
  return target;
}

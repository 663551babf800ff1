//===- RandomGraph.cpp - Seeded random layered training graphs ------------===//

#include "RandomGraph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <string>
#include <vector>

using namespace lethe;

namespace {
class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool percent(int p) { return range(0, 99) < p; }

private:
  uint64_t state;
};

struct FwdOp {
  NodeId node;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  double timeUs;
  bool isView;
};
} // namespace

TrainingGraph lethe::testing::randomLayeredGraph(
    uint64_t seed, const RandomGraphOptions &options) {
  Rng rng(seed);
  TrainingGraph g;
  const int64_t unit = options.unitBytes;
  ValueId x = g.addInput(unit, InputKind::Input);
  ValueId seedGrad = g.addInput(4, InputKind::Tangent);
  std::vector<FwdOp> fwd;
  std::vector<ValueId> params;
  auto addFwd = [&](llvm::StringRef kind, double time,
                    std::vector<ValueId> operands,
                    std::vector<int64_t> bytes, std::vector<int64_t> aliases,
                    uint32_t flags, const std::string &scope) {
    NodeId id = g.addNode(kind, Phase::Fwd, time, operands, bytes, aliases,
                          flags, options.scopes ? scope : "");
    fwd.push_back({id, operands, g.getNode(id).results, time,
                   !aliases.empty() && aliases[0] >= 0});
    return id;
  };

  int layers = static_cast<int>(rng.range(options.minLayers, options.maxLayers));
  int opsPerLayer = static_cast<int>(
      rng.range(options.minOpsPerLayer, options.maxOpsPerLayer));
  ValueId h = x;
  for (int layer = 0; layer < layers; ++layer) {
    std::string prefix = llvm::formatv("model.layers.{0}", layer).str();
    std::vector<ValueId> pool = {h};
    // The layer has the same shape every time (repeated structure), with
    // random sizes and times per layer.
    Rng shape(seed * 31 + 7);
    for (int k = 0; k < opsPerLayer; ++k) {
      std::string scope = llvm::formatv("{0}.op{1}", prefix, k).str();
      int kindRoll = static_cast<int>(shape.range(0, 99));
      ValueId a = pool[shape.range(0, static_cast<int64_t>(pool.size()) - 1)];
      ValueId b = pool[shape.range(0, static_cast<int64_t>(pool.size()) - 1)];
      int64_t bytes = unit * shape.range(1, 4);
      if (kindRoll < 30) {
        // A matmul with a weight, sometimes all-gathered first.
        ValueId w = g.addInput(unit / 4, InputKind::Param);
        params.push_back(w);
        if (shape.percent(options.collectivePercent)) {
          NodeId gather = addFwd("_c10d_functional.all_gather_into_tensor",
                                 20.0 + rng.range(0, 30), {w}, {unit / 2}, {},
                                 0, scope);
          w = g.getNode(gather).results[0];
        }
        NodeId mm = addFwd("aten.mm.default", 20.0 + rng.range(0, 80), {a, w},
                           {bytes}, {}, 0, scope);
        pool.push_back(g.getNode(mm).results[0]);
      } else if (kindRoll < 30 + options.dropoutPercent) {
        int64_t inBytes = g.storageBytes(a);
        NodeId drop = addFwd("aten.native_dropout.default",
                             5.0 + rng.range(0, 10), {a},
                             {inBytes, inBytes / 2}, {}, 0, scope);
        pool.push_back(g.getNode(drop).results[0]);
      } else if (kindRoll < 30 + options.dropoutPercent + options.viewPercent) {
        NodeId view = addFwd("aten.view.default", 1.0, {a}, {0}, {0}, 0, scope);
        pool.push_back(g.getNode(view).results[0]);
      } else if (kindRoll < 30 + options.dropoutPercent + options.viewPercent +
                                options.inPlacePercent) {
        // A fresh temporary updated in place.
        NodeId tmp = addFwd("aten.mul.Tensor", 3.0 + rng.range(0, 10), {a},
                            {bytes}, {}, 0, scope);
        ValueId t = g.getNode(tmp).results[0];
        NodeId inplace = addFwd("aten.add_.Tensor", 3.0 + rng.range(0, 10),
                                {t, b}, {0}, {0}, 0, scope);
        pool.push_back(g.getNode(inplace).results[0]);
      } else if (kindRoll < 80) {
        NodeId ew = addFwd(shape.percent(50) ? "aten.gelu.default"
                                             : "aten.add.Tensor",
                           2.0 + rng.range(0, 30), {a, b}, {bytes}, {}, 0,
                           scope);
        pool.push_back(g.getNode(ew).results[0]);
      } else {
        // Layer norm: output plus small statistics.
        int64_t inBytes = g.storageBytes(a);
        NodeId ln = addFwd("aten.native_layer_norm.default",
                           5.0 + rng.range(0, 20), {a},
                           {std::max<int64_t>(inBytes, unit), 4096, 4096}, {},
                           0, scope);
        pool.push_back(g.getNode(ln).results[0]);
      }
    }
    // Residual: the layer output reads the input and the last value.
    NodeId residual = addFwd("aten.add.Tensor", 4.0, {h, pool.back()}, {unit},
                             {}, 0, prefix);
    h = g.getNode(residual).results[0];
  }
  NodeId loss = addFwd("aten.nll_loss_forward.default", 10.0, {h}, {4}, {}, 0,
                       "model.loss");
  ValueId lossValue = g.getNode(loss).results[0];

  // Backward: reverse order, gradients accumulate.
  std::map<ValueId, ValueId> gradOf;
  gradOf[lossValue] = seedGrad;
  for (const FwdOp &op : llvm::reverse(fwd)) {
    ValueId gy = -1;
    for (ValueId r : op.results)
      if (gradOf.count(r)) {
        gy = gradOf[r];
        break;
      }
    if (gy < 0)
      continue;
    const GraphNode &node = g.getNode(op.node);
    std::string kind = node.kind + "_backward";
    if (op.isView) {
      NodeId back = g.addNode(kind, Phase::Bwd, 1.0, {gy}, {0}, {0});
      ValueId gx = g.getNode(back).results[0];
      ValueId in = op.operands[0];
      if (gradOf.count(in)) {
        NodeId acc = g.addNode("aten.add.Tensor", Phase::Bwd, 3.0,
                               {gradOf[in], gx}, {g.storageBytes(in)});
        gradOf[in] = g.getNode(acc).results[0];
      } else {
        gradOf[in] = gx;
      }
      continue;
    }
    std::vector<ValueId> operands = {gy};
    // Saved for backward: a random subset of operands and results; dropout
    // keeps its mask.
    for (ValueId v : op.operands)
      if (rng.percent(60))
        operands.push_back(v);
    for (auto [i, r] : llvm::enumerate(op.results))
      if ((node.hasFlag(NodeFlagRandom) && i == 1) || rng.percent(30))
        operands.push_back(r);
    std::vector<int64_t> bytes;
    std::vector<ValueId> targets;
    for (ValueId v : op.operands) {
      const GraphValue &value = g.getValue(v);
      if (value.isInput() && value.inputKind == InputKind::Input)
        continue;
      bytes.push_back(std::max<int64_t>(g.storageBytes(v), 4));
      targets.push_back(v);
    }
    NodeId back = g.addNode(kind, Phase::Bwd, op.timeUs * 2.0, operands, bytes);
    for (auto [i, v] : llvm::enumerate(targets)) {
      ValueId gv = g.getNode(back).results[i];
      if (gradOf.count(v)) {
        NodeId acc = g.addNode("aten.add.Tensor", Phase::Bwd, 3.0,
                               {gradOf[v], gv}, {bytes[i]});
        gradOf[v] = g.getNode(acc).results[0];
      } else {
        gradOf[v] = gv;
      }
    }
  }
  for (ValueId p : params)
    if (gradOf.count(p))
      g.addOutput(gradOf[p]);
  return g;
}

DeviceProfile lethe::testing::testDeviceProfile() {
  DeviceProfile device;
  device.name = "test-h100";
  device.peakFlops["bf16"] = 790e12;
  device.hbmBytesPerSec = 3.0e12;
  device.d2hBytesPerSec = 55e9;
  device.h2dBytesPerSec = 55e9;
  device.duplexFactor = 0.92;
  device.launchOverheadUs = 0;
  device.collectiveSlowdownWithCopies = 1.0;
  device.copySlowdownWithCollectives = 1.0;
  device.deviceMemoryBytes = 80e9;
  device.hostMemoryBytes = 512e9;
  return device;
}

DeviceProfile lethe::testing::contendedTestDeviceProfile() {
  DeviceProfile device = testDeviceProfile();
  device.matmulSlowdownWithCopies = 1.052;
  device.matmulSlowdownWithBothCopies = 1.017;
  device.memoryBoundSlowdownWithCopies = 1.038;
  device.memoryBoundSlowdownWithBothCopies = 1.075;
  device.memoryKernelBytesPerSec = 4084e9;
  return device;
}

int64_t lethe::testing::lifetimePeak(const TrainingGraph &g) {
  std::vector<int64_t> delta(g.numNodes() + 1, 0);
  std::vector<NodeId> last(g.numValues(), -1);
  for (size_t v = 0; v < g.numValues(); ++v) {
    const GraphValue &value = g.getValue(v);
    ValueId s = value.storage;
    for (NodeId u : value.users)
      last[s] = std::max(last[s], u);
    if (value.isOutput)
      last[s] = static_cast<NodeId>(g.numNodes()) - 1;
  }
  for (size_t v = 0; v < g.numValues(); ++v) {
    const GraphValue &value = g.getValue(v);
    if (value.isInput() || value.storage != static_cast<ValueId>(v))
      continue;
    NodeId end = std::max(last[v], value.producer);
    delta[value.producer] += value.bytes;
    delta[end + 1] -= value.bytes;
  }
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < g.numNodes(); ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return peak;
}

void lethe::testing::nodePositions(const Schedule &schedule, size_t numNodes,
                                   std::vector<OpIndex> &nodeOp,
                                   std::vector<OpIndex> &regionStart) {
  nodeOp.assign(numNodes, 0);
  regionStart.assign(numNodes, 0);
  OpIndex runStart = -1;
  for (auto [k, op] : llvm::enumerate(schedule.ops)) {
    OpIndex index = static_cast<OpIndex>(k);
    if (op.kind == ScheduleOpKind::Recompute) {
      if (runStart < 0)
        runStart = index;
      continue;
    }
    if (op.kind == ScheduleOpKind::Node) {
      nodeOp[op.node] = index;
      regionStart[op.node] = runStart >= 0 ? runStart : index;
    }
    runStart = -1;
  }
}

void lethe::testing::randomDecisions(const ActivationAnalysis &analysis,
                                     std::mt19937_64 &rng,
                                     std::vector<Decision> &decisions,
                                     std::vector<CopyHint> &hints) {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  decisions.assign(acts.size(), Decision::Retain);
  hints.assign(acts.size(), CopyHint());
  for (size_t a = 0; a < acts.size(); ++a) {
    unsigned r = rng() % 4;
    if (r == 1 && acts[a].recomputable) {
      decisions[a] = Decision::Recompute;
    } else if (r >= 2 && acts[a].offloadable) {
      decisions[a] = Decision::Offload;
      if (rng() % 3 == 0)
        hints[a] = {acts[a].lastForwardUse, acts[a].firstBackwardUse - 1};
    }
  }
}

std::optional<lethe::testing::RandomPlan>
lethe::testing::randomPlan(const ActivationAnalysis &analysis, size_t numNodes,
                           Evaluator &evaluator, std::mt19937_64 &rng) {
  RandomPlan plan;
  randomDecisions(analysis, rng, plan.decisions, plan.hints);
  llvm::Expected<Evaluation> eval =
      evaluator.evaluate(plan.decisions, plan.hints);
  if (!eval) {
    llvm::consumeError(eval.takeError());
    return std::nullopt;
  }
  plan.eval = std::move(*eval);
  nodePositions(*plan.eval.schedule, numNodes, plan.nodeOp, plan.regionStart);
  return plan;
}

void lethe::testing::changeSomeDecisions(const ActivationAnalysis &analysis,
                                         std::mt19937_64 &rng,
                                         std::vector<Decision> &decisions,
                                         std::vector<CopyHint> &hints) {
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  for (unsigned change = 1 + rng() % 3; change-- > 0;) {
    size_t a = rng() % acts.size();
    unsigned r = rng() % 3;
    decisions[a] = r == 1 && acts[a].recomputable  ? Decision::Recompute
                   : r == 2 && acts[a].offloadable ? Decision::Offload
                                                   : Decision::Retain;
    hints[a] = CopyHint();
    if (decisions[a] == Decision::Offload && rng() % 2)
      hints[a].releaseBy =
          acts[a].lastForwardUse + static_cast<NodeId>(rng() % 3);
  }
}

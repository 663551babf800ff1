//===- RandomGraph.h - Seeded random layered training graphs ----*- C++ -*-===//
//
// Generates training steps shaped like real ones, for property tests and
// the planner benchmark: a stack of layers (each a small random DAG over the
// layer input with matmul-like, elementwise, view, dropout and multi-output
// ops, a residual add at the end), a loss, and the backward pass in reverse
// order where every backward op reads a random subset of its forward op's
// operands and results (the saved activations) and gradients accumulate.
// Occasional collectives (all-gather of a weight) and in-place ops exercise
// the planner's rules. The generator uses its own PRNG (splitmix64), so a
// seed gives the same graph on every platform.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_UNITTESTS_PLANNER_RANDOMGRAPH_H
#define LETHE_UNITTESTS_PLANNER_RANDOMGRAPH_H

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Simulator/Schedule.h"
#include "lethe/Support/DeviceProfile.h"

#include <cstdint>
#include <optional>
#include <random>

namespace lethe::testing {

struct RandomGraphOptions {
  int minLayers = 2, maxLayers = 8;
  int minOpsPerLayer = 3, maxOpsPerLayer = 10;
  /// Bytes of the residual stream; intermediate values are 1-4x this.
  int64_t unitBytes = 4 << 20;
  /// Give nodes module scopes (`model.layers.3.op2`).
  bool scopes = true;
  /// Probabilities (percent) of special ops inside a layer.
  int dropoutPercent = 10;
  int viewPercent = 10;
  int collectivePercent = 3;
  int inPlacePercent = 3;
};

/// A random layered graph for `seed`.
TrainingGraph randomLayeredGraph(uint64_t seed,
                                 const RandomGraphOptions &options = {});

/// Peak memory by the plain lifetime rule (a storage lives from its
/// producer to its last use through any alias; returned storages to the
/// end), computed independently of the planner.
int64_t lifetimePeak(const TrainingGraph &graph);

/// An H100-like device profile: 55 GB/s copies each way.
DeviceProfile testDeviceProfile();

/// testDeviceProfile with the calibrated H200's copy-vs-compute factors and
/// memory-kernel rate (devices/h200.json): a matrix product loses 4.9% of
/// its time beside one copy direction, a memory-bound kernel at most 3.7%
/// (a light one nothing).
DeviceProfile contendedTestDeviceProfile();

/// Each node's op in `schedule` and the first op of the recompute run
/// before it, read off the schedule (not with the solver's index()): what
/// the solver's peak bounds are checked against.
void nodePositions(const Schedule &schedule, size_t numNodes,
                   std::vector<OpIndex> &nodeOp,
                   std::vector<OpIndex> &regionStart);

/// Random decisions for `analysis`'s activations: a quarter recomputed, half
/// offloaded where each is allowed (the rest retained), a third of the
/// offloads copy-time trades (released at the last forward use, prefetched
/// right before the restore point); what the peak-bound tests check.
void randomDecisions(const ActivationAnalysis &analysis, std::mt19937_64 &rng,
                     std::vector<Decision> &decisions,
                     std::vector<CopyHint> &hints);

/// A plan of random decisions (randomDecisions), evaluated, with its nodes'
/// positions in its schedule (nodePositions).
struct RandomPlan {
  std::vector<Decision> decisions;
  std::vector<CopyHint> hints;
  Evaluation eval;
  std::vector<OpIndex> nodeOp, regionStart;
};

/// randomDecisions for `analysis` (of a graph of `numNodes` nodes),
/// evaluated by `evaluator`; nullopt where the evaluation fails (the
/// decisions do not make a plan).
std::optional<RandomPlan> randomPlan(const ActivationAnalysis &analysis,
                                     size_t numNodes, Evaluator &evaluator,
                                     std::mt19937_64 &rng);

/// What a planner property test draws for one seed: the random graph, its
/// activations under the default options, and a PRNG seeded alike for the
/// decisions it tries.
struct SeededAnalysis {
  explicit SeededAnalysis(uint64_t seed)
      : graph(randomLayeredGraph(seed)), analysis(graph, options), rng(seed) {}
  TrainingGraph graph;
  PlanOptions options;
  ActivationAnalysis analysis;
  std::mt19937_64 rng;
};

/// One to three random decisions (and their hints) of `analysis`'s
/// activations changed, as a solver's move: property tests of the
/// evaluator and the schedule builder.
void changeSomeDecisions(const ActivationAnalysis &analysis,
                         std::mt19937_64 &rng, std::vector<Decision> &decisions,
                         std::vector<CopyHint> &hints);

} // namespace lethe::testing

#endif // LETHE_UNITTESTS_PLANNER_RANDOMGRAPH_H

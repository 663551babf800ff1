//===- Knapsack.h - PyTorch-style saved-bytes knapsack baselines -*- C++ -*-===//
//
// Benchmark baselines that reimplement the idea of PyTorch's
// `activation_memory_budget` (torch/_functorch/_activation_checkpointing/
// knapsack.py) on Lethe's cost model: every recomputable activation is an
// independent item worth its producer's run time and weighing its bytes;
// the solver keeps the most valuable items whose bytes fit "saved bytes <=
// budget" and recomputes the rest, believing the peak falls by exactly the
// bytes it drops. Only recompute, no offload. Lethe's simulator then
// evaluates the plan as it really runs: the recompute chains are whatever
// the dropped items need, and the peak can exceed the budget (the knapsack
// does not model when memory is live) — which the benchmark shows.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_KNAPSACK_H
#define LETHE_PLANNER_KNAPSACK_H

#include "lethe/Planner/Plan.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/Support/Error.h"

namespace lethe {

enum class KnapsackSolver : uint8_t {
  /// Sort by run time per byte, keep greedily (PyTorch `greedy_knapsack`).
  Greedy,
  /// 0/1 knapsack by dynamic programming over quantised bytes (PyTorch
  /// `dp_knapsack`).
  DP,
};

struct KnapsackOptions {
  KnapsackSolver solver = KnapsackSolver::Greedy;
  /// DP: the capacity is split into this many units.
  int quanta = 10000;
};

/// Plans with the knapsack under `options.budgetBytes` (other policy
/// options ignored but minOffloadBytes / replayRng, which decide what may
/// be recomputed). `feasible` is whether the simulated peak fits.
llvm::Expected<Plan> planKnapsack(const TrainingGraph &graph,
                                  const DeviceProfile &device,
                                  const PlanOptions &options,
                                  const KnapsackOptions &knapsack);

} // namespace lethe

#endif // LETHE_PLANNER_KNAPSACK_H

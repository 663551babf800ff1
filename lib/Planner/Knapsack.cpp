//===- Knapsack.cpp - PyTorch-style saved-bytes knapsack baselines --------===//

#include "lethe/Planner/Knapsack.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <chrono>
#include <cmath>

using namespace lethe;

namespace {
struct Item {
  int32_t act;
  int64_t bytes;
  double runtimeUs;
};
} // namespace

/// Items to keep, greedily by run time per byte.
static std::vector<uint8_t> greedyKeep(llvm::ArrayRef<Item> items,
                                       int64_t capacity) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    order[i] = i;
  llvm::sort(order, [&](size_t x, size_t y) {
    double rx = items[x].runtimeUs / static_cast<double>(items[x].bytes);
    double ry = items[y].runtimeUs / static_cast<double>(items[y].bytes);
    if (rx != ry)
      return rx > ry;
    return items[x].act < items[y].act;
  });
  std::vector<uint8_t> keep(items.size(), 0);
  int64_t used = 0;
  for (size_t i : order)
    if (used + items[i].bytes <= capacity) {
      used += items[i].bytes;
      keep[i] = 1;
    }
  return keep;
}

/// Items to keep, by 0/1 knapsack over quantised weights (rounded up, so
/// the chosen set fits the capacity).
static std::vector<uint8_t> dpKeep(llvm::ArrayRef<Item> items,
                                   int64_t capacity, int quanta) {
  const size_t n = items.size();
  std::vector<uint8_t> keep(n, 0);
  if (capacity <= 0 || n == 0)
    return keep;
  const int64_t slots = std::max(1, quanta);
  const double unit = static_cast<double>(capacity) / slots;
  std::vector<int64_t> weight(n);
  for (size_t i = 0; i < n; ++i)
    weight[i] =
        static_cast<int64_t>(std::ceil(static_cast<double>(items[i].bytes) / unit));
  std::vector<double> best(slots + 1, 0.0);
  std::vector<std::vector<uint8_t>> took(n, std::vector<uint8_t>(slots + 1, 0));
  for (size_t i = 0; i < n; ++i) {
    if (weight[i] > slots)
      continue;
    for (int64_t w = slots; w >= weight[i]; --w) {
      double with = best[w - weight[i]] + items[i].runtimeUs;
      if (with > best[w]) {
        best[w] = with;
        took[i][w] = 1;
      }
    }
  }
  int64_t w = slots;
  for (size_t i = n; i-- > 0;)
    if (took[i][w]) {
      keep[i] = 1;
      w -= weight[i];
    }
  return keep;
}

llvm::Expected<Plan> lethe::planKnapsack(const TrainingGraph &graph,
                                         const DeviceProfile &device,
                                         const PlanOptions &options,
                                         const KnapsackOptions &knapsack) {
  auto started = std::chrono::steady_clock::now();
  ActivationAnalysis analysis(graph, options);
  Evaluator evaluator(analysis, device);
  llvm::ArrayRef<ActivationInfo> acts = analysis.getActivations();
  std::vector<Decision> decisions(acts.size(), Decision::Retain);
  llvm::Expected<Evaluation> baseline = evaluator.evaluate(decisions);
  if (!baseline)
    return baseline.takeError();

  std::vector<Item> items;
  int64_t itemBytes = 0;
  for (auto [a, act] : llvm::enumerate(acts)) {
    if (!act.recomputable)
      continue;
    items.push_back({static_cast<int32_t>(a), act.bytes,
                     std::max(0.0, graph.getNode(act.producer).timeUs)});
    itemBytes += act.bytes;
  }
  // The knapsack's belief: the peak falls by the bytes it drops, so the
  // items may keep what the budget leaves above the rest of the peak.
  int64_t capacity = options.budgetBytes - (baseline->peakBytes - itemBytes);
  std::vector<uint8_t> keep =
      knapsack.solver == KnapsackSolver::Greedy
          ? greedyKeep(items, capacity)
          : dpKeep(items, std::min(capacity, itemBytes), knapsack.quanta);
  if (capacity >= itemBytes)
    keep.assign(items.size(), 1);
  for (size_t i = 0; i < items.size(); ++i)
    if (!keep[i])
      decisions[items[i].act] = Decision::Recompute;

  llvm::Expected<Evaluation> eval = evaluator.evaluate(decisions);
  if (!eval)
    return eval.takeError();
  Plan plan;
  plan.policy = Policy::Auto;
  plan.budgetBytes = options.budgetBytes;
  plan.decisions = eval->placement->decisions;
  for (ActivationDecision &d : plan.decisions)
    d.reason = knapsack.solver == KnapsackSolver::Greedy ? "knapsack (greedy)"
                                                         : "knapsack (dp)";
  plan.peakBytes = eval->peakBytes;
  plan.stepUs = eval->stepUs;
  plan.baselinePeakBytes = baseline->peakBytes;
  plan.baselineStepUs = baseline->stepUs;
  plan.feasible = plan.peakBytes <= options.budgetBytes;
  if (!plan.feasible)
    plan.leastFeasibleBudget = plan.peakBytes;
  plan.solveMs = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - started)
                     .count();
  return plan;
}

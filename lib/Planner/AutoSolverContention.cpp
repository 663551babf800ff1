//===- AutoSolverContention.cpp - Copies priced where they run ------------===//
//
// A moving host copy slows the kernels beside it (the device profile's
// copy-vs-compute factors; the simulator's kernelSlowdown). The greedy
// prices every copy microsecond at the step's average loss
// (contentionRate); here a copy is priced over the compute-stream window
// its placement says it runs in (a recompute's copies: on idle links), each
// node at its own loss: a copy beside views and light memory-bound kernels
// costs nothing, one beside matrix products the class's factor. refine's
// last pass switches the drops this prices better as the other kind
// (AutoSolverRefine.cpp).
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

#include "lethe/Simulator/Simulator.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace lethe;
using namespace lethe::autosolver;

/// Compute-stream waits an offload adds (the profile's `wait_us` each): its
/// release waits for the D2H copy, its first reader for the H2D copy. Fewer
/// where a wait for a later copy implies one (55 of 68 waits on Mixtral at
/// 60%, auto's plan).
constexpr double kWaitsPerOffload = 2.0;

double Solver::contentionBetweenUs(const Evaluation &eval, double fromUs,
                                   double toUs) const {
  if (!(toUs > fromUs) || contentionPerCopyUs <= 0.0)
    return 0.0;
  const Placement &p = *eval.placement;
  if (copyLoss.empty()) {
    // A memory-bound kernel loses only where its memory traffic is near its
    // whole time (the roofline share): unlike contentionRate's class
    // factors, which on the corpus are 2-5 times what auto's plans lose per
    // copy microsecond (docs/Planner.md, refine's contention pass).
    copyLoss.assign(graph.numNodes(), 0.0);
    for (size_t i = 0; i < graph.numNodes(); ++i) {
      const GraphNode &node = graph.getNode(i);
      KernelClass kernel = kernelClassOf(node);
      double t = std::max(0.0, node.timeUs);
      copyLoss[i] =
          1.0 - 1.0 / kernelSlowdown(device, kernel, /*d2h=*/true,
                                     /*h2d=*/false,
                                     memoryShare(device, kernel, t,
                                                 analysis.trafficBytes(i)));
    }
  }
  if (lossPlacement != eval.placement) {
    lossPlacement = eval.placement;
    lossEndUs.clear();
    lossSumUs.clear();
    double sum = 0.0;
    for (size_t i = 0; i < p.nodeEndUs.size(); ++i) {
      NodeId node = static_cast<NodeId>(i);
      for (NodeId c : p.chainAt(node))
        if (!graph.getNode(c).hasFlag(NodeFlagCollective))
          sum += copyLoss[c] * std::max(0.0, graph.getNode(c).timeUs);
      lossEndUs.push_back(p.chainStartUs[i] + p.chainUs[i]);
      lossSumUs.push_back(sum);
      if (!graph.getNode(node).hasFlag(NodeFlagCollective))
        sum += copyLoss[i] * std::max(0.0, graph.getNode(node).timeUs);
      lossEndUs.push_back(p.nodeEndUs[i]);
      lossSumUs.push_back(sum);
    }
  }
  // The loss summed up to `t`: linear within a segment.
  auto lostBy = [&](double t) {
    auto it = std::lower_bound(lossEndUs.begin(), lossEndUs.end(), t);
    if (it == lossEndUs.end())
      return lossSumUs.empty() ? 0.0 : lossSumUs.back();
    size_t k = it - lossEndUs.begin();
    double begin = k == 0 ? 0.0 : lossEndUs[k - 1];
    double before = k == 0 ? 0.0 : lossSumUs[k - 1];
    double length = lossEndUs[k] - begin;
    if (!(length > 0.0))
      return lossSumUs[k];
    return before + (lossSumUs[k] - before) * (t - begin) / length;
  };
  return lostBy(toUs) - lostBy(fromUs);
}

double Solver::copiesContentionUs(const Evaluation &eval,
                                  const PlannedCopyCosts &copy, int32_t a,
                                  double d2hEndUs, double h2dStartUs) const {
  return contentionBetweenUs(eval, d2hEndUs - copy.d2hUs(acts[a].bytes),
                             d2hEndUs) +
         contentionBetweenUs(eval, h2dStartUs,
                             h2dStartUs + copy.h2dUs(acts[a].bytes));
}

std::vector<std::pair<double, int32_t>> Solver::contentionSwitches(
    llvm::function_ref<double(int32_t)> recomputeNowUs) const {
  std::vector<std::pair<double, int32_t>> switches;
  const Placement &p = *currentEval.placement;
  const double waitsUs = kWaitsPerOffload * device.waitUs;
  const PlannedCopyCosts copy = plannedCopyCosts(device);
  for (size_t i = 0; i < acts.size(); ++i) {
    int32_t a = static_cast<int32_t>(i);
    double gainUs = 0.0;
    if (current[a] == Decision::Offload && acts[a].recomputable &&
        p.decisions[a].decision == Decision::Offload) {
      gainUs = copiesContentionUs(currentEval, copy, a, p.d2hEndUs[a],
                                  p.h2dStartUs[a]) +
               waitsUs + exposedCopyUs(a) - acts[a].recomputeUs;
    } else if (current[a] == Decision::Recompute && acts[a].offloadable &&
               offloadedBytes + acts[a].bytes <= options.hostBudgetBytes &&
               p.decisions[a].decision == Decision::Recompute) {
      // Its copies on idle links: the D2H copy from the node that makes its
      // contents final, the H2D copy ending at its restore point. (Queued
      // behind the plan's others by the copy model instead, the pass kept
      // fewer moves on the corpus: T5 at 60% 10.60%, not 10.49%.)
      double d2hEnd =
          p.nodeEndUs[acts[a].contentReadyAfter] + copy.d2hUs(acts[a].bytes);
      double h2dStart = p.chainStartUs[p.decisions[a].firstBackwardUse] -
                        copy.h2dUs(acts[a].bytes);
      gainUs = recomputeNowUs(a) -
               copiesContentionUs(currentEval, copy, a, d2hEnd, h2dStart) -
               waitsUs;
    }
    if (gainUs > 0.0)
      switches.push_back({-gainUs, a});
  }
  llvm::sort(switches);
  return switches;
}

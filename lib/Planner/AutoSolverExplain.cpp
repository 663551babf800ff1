//===- AutoSolverExplain.cpp - Why auto decided what it did ---------------===//
//
// The reason each of auto's decisions carries (printed by `lethe plan`,
// written to the plan JSON and emitted as remarks): what it frees, for what
// re-run or copy time, and what the alternative would have cost.
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"
#include "PlannerUtils.h"

#include "llvm/Support/FormatVariadic.h"

using namespace lethe;
using namespace lethe::autosolver;
using planner::humanBytes;
using planner::humanUs;

std::string Solver::explain(size_t a, llvm::ArrayRef<Decision> decisions,
                            const Evaluation &eval) {
  const ActivationInfo &act = acts[a];
  // As the plan runs it (a checkpoint no chain reads is retained).
  const ActivationDecision &d = eval.placement->decisions[a];
  (void)decisions;
  switch (d.decision) {
  case Decision::Retain:
    if (!act.recomputable && !act.offloadable)
      return llvm::formatv("retained: cannot be recomputed ({0}) or "
                           "offloaded ({1})",
                           act.notRecomputableReason, act.notOffloadableReason);
    return "retained: the budget holds without dropping it";
  case Decision::Recompute: {
    std::string alternative =
        act.offloadable ? "offload would not hide its copies at the peak"
                        : "cannot be offloaded: " + act.notOffloadableReason;
    size_t n = act.recomputeNodes.size();
    return llvm::formatv(
        "recomputed: frees {0} from {1} to {2} for {3} of "
        "re-run ({4} node{5}); {6}",
        humanBytes(act.bytes), describeNode(graph, act.lastForwardUse),
        describeNode(graph, d.firstBackwardUse), humanUs(act.recomputeUs), n,
        n == 1 ? "" : "s", alternative);
  }
  case Decision::Offload: {
    std::string alternative =
        act.recomputable ? "recompute would cost " + humanUs(act.recomputeUs)
                         : "cannot be recomputed: " + act.notRecomputableReason;
    const PlannedCopyCosts copy = plannedCopyCosts(device);
    double copyUs = copy.d2hUs(act.bytes);
    const Placement &p = *eval.placement;
    double h2dUs = copy.h2dUs(act.bytes);
    double late = std::max(0.0, p.d2hEndUs[a] - p.nodeEndUs[d.releaseAfter]) +
                  std::max(0.0, p.h2dStartUs[a] + h2dUs -
                                    p.chainStartUs[d.firstBackwardUse]);
    std::string hidden = late > 0.0
                             ? "about " + humanUs(late) + " of it exposed"
                             : "hidden behind compute";
    return llvm::formatv("offloaded: frees {0} from {1} to {2}; {3} copy "
                         "each way, {4}; {5}",
                         humanBytes(act.bytes),
                         describeNode(graph, d.releaseAfter),
                         describeNode(graph, d.prefetchAfter), humanUs(copyUs),
                         hidden, alternative);
  }
  }
  return "";
}

void Solver::explainAll(AutoSolution &solution,
                        llvm::ArrayRef<std::string> notes) {
  solution.reasons.resize(acts.size());
  for (size_t a = 0; a < acts.size(); ++a) {
    solution.reasons[a] = explain(a, solution.decisions, solution.evaluation);
    if (a < notes.size() && !notes[a].empty())
      solution.reasons[a] += " [" + notes[a] + "]";
  }
}

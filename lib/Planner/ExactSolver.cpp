//===- ExactSolver.cpp - The exact `auto` solver (MILP, CBC) --------------===//

#include "lethe/Planner/ExactSolver.h"
#include "ExactMilp.h"

#include "lethe/Planner/ExactModel.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <optional>

using namespace lethe;

namespace {
using Clock = std::chrono::steady_clock;

/// Size limits of the MILP (docs/ExactSolver.md §5).
constexpr int kMaxIntegerColumns = 30000;
constexpr int64_t kMaxNonzeros = 1000000;

/// A solved MILP read back as a plan and measured by the model.
struct Solved {
  milp::Result result;
  double objectiveOffset = 0.0;
  std::vector<ActivationDecision> decisions;
  ExactModel::Evaluation eval;
  int rows = 0, columns = 0, integerColumns = 0;
};
} // namespace

static double secondsLeft(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

/// A valid plan of the model to start the search from.
struct StartPlan {
  std::vector<ActivationDecision> decisions;
  ExactModel::Evaluation eval;
};

/// The model's version of another solver's plan: its decisions, restore
/// points and releases by the model's rules, each prefetch moved into
/// [release, restore). None when it is not a valid plan that fits.
static std::optional<StartPlan>
startFrom(const ExactModel &model, llvm::ArrayRef<ActivationDecision> start) {
  if (start.empty())
    return std::nullopt;
  llvm::ArrayRef<ExactModel::Activation> acts = model.activations();
  std::vector<Decision> choice(acts.size(), Decision::Retain);
  std::vector<NodeId> after(acts.size(), -1);
  for (const ActivationDecision &d : start) {
    if (d.value < 0 ||
        static_cast<size_t>(d.value) >= model.getGraph().numValues())
      return std::nullopt;
    int a = model.getAnalysis().activationIndex(d.value);
    if (a < 0 || acts[a].value != d.value)
      return std::nullopt;
    choice[a] = d.decision;
    after[a] = d.prefetchAfter;
  }
  StartPlan plan;
  plan.decisions = model.makeDecisions(choice, after);
  for (ActivationDecision &d : plan.decisions) {
    if (d.decision != Decision::Offload)
      continue;
    NodeId lo = std::max(model.earliestPrefetchAfter(), d.releaseAfter);
    NodeId hi = d.firstBackwardUse - 1;
    if (lo > hi)
      return std::nullopt;
    d.prefetchAfter = std::clamp(d.prefetchAfter, lo, hi);
  }
  plan.eval = model.evaluate(plan.decisions);
  if (!plan.eval.valid || !plan.eval.fitsBudget)
    return std::nullopt;
  return plan;
}

static llvm::Expected<Solved> solveOnce(const ExactModel &model,
                                        ExactMilp::Goal goal,
                                        int64_t budgetBytes,
                                        Clock::time_point deadline,
                                        const StartPlan *start = nullptr) {
  ExactMilp milp(model, goal, budgetBytes);
  Solved solved;
  solved.rows = milp.getProblem().numRows();
  solved.columns = milp.getProblem().numColumns();
  solved.integerColumns = milp.numIntegerColumns();
  // CBC's time limit does not cover its presolve, root relaxation or the
  // processing of a starting plan, which on programs much larger than this
  // alone take minutes: refuse them rather than overrun the limit.
  const int64_t nonzeros = milp.getProblem().rowIndex.size();
  if (solved.integerColumns > kMaxIntegerColumns || nonzeros > kMaxNonzeros)
    return llvm::createStringError(llvm::formatv(
        "exact solver: the graph is too large ({0} activations give a MILP "
        "with {1} integer variables and {2} nonzeros; the limits are {3} "
        "and {4}); use the fast solver (solver=fast)",
        model.activations().size(), solved.integerColumns, nonzeros,
        kMaxIntegerColumns, kMaxNonzeros));
  solved.objectiveOffset = milp.objectiveOffset();
  milp::Options options;
  options.timeLimitSec = std::max(0.05, secondsLeft(deadline));
  if (start && start->eval.peakBytes <= budgetBytes)
    options.start = milp.encode(start->decisions, start->eval);
  solved.result = milp::solve(milp.getProblem(), options);
  if (solved.result.status == milp::Result::Status::Error)
    return llvm::createStringError(solved.result.error);
  if (solved.result.values.empty())
    return solved;
  std::vector<Decision> choice;
  std::vector<NodeId> prefetchAfter;
  milp.decode(solved.result.values, choice, prefetchAfter);
  solved.decisions = model.makeDecisions(choice, prefetchAfter);
  solved.eval = model.evaluate(solved.decisions);
  if (!solved.eval.valid)
    return llvm::createStringError(
        "exact solver: the MILP solution is not a valid plan (" +
        solved.eval.error + "); please report this graph");
  return solved;
}

static ExactSolveReport makeReport(const Solved &solved) {
  ExactSolveReport report;
  const milp::Result &result = solved.result;
  report.provenOptimal = result.status == milp::Result::Status::Optimal;
  report.hitTimeLimit = result.hitTimeLimit;
  report.objective = result.objective + solved.objectiveOffset;
  report.bound = result.bound + solved.objectiveOffset;
  report.gap = report.provenOptimal
                   ? 0.0
                   : (report.objective - report.bound) /
                         std::max(std::abs(report.objective), 1e-9);
  report.branchNodes = result.nodes;
  report.rows = solved.rows;
  report.columns = solved.columns;
  report.integerColumns = solved.integerColumns;
  return report;
}

static void explain(const ExactModel &model, const ExactSolveReport &report,
                    std::vector<ActivationDecision> &decisions) {
  std::string how = report.provenOptimal
                        ? "exact optimum"
                        : llvm::formatv("exact solver, gap {0:P2}", report.gap)
                              .str();
  for (auto [a, d] : llvm::enumerate(decisions)) {
    const ExactModel::Activation &act = model.activations()[a];
    switch (d.decision) {
    case Decision::Retain:
      d.reason = "retained (" + how + ")";
      break;
    case Decision::Recompute: {
      double us = 0.0;
      for (NodeId n : d.recomputeNodes)
        us += model.nodeTimeUs(n);
      d.reason = llvm::formatv("recomputed: re-runs {0} node(s), {1:F1} us "
                               "({2})",
                               d.recomputeNodes.size(), us, how)
                     .str();
      break;
    }
    case Decision::Offload:
      d.reason =
          llvm::formatv("offloaded: D2H {0:F1} us after {1}, H2D "
                        "{2:F1} us issued after {3} ({4})",
                        act.d2hUs, describeNode(model.getGraph(), act.producer),
                        act.h2dUs,
                        describeNode(model.getGraph(), d.prefetchAfter), how)
              .str();
      break;
    }
  }
}

llvm::Expected<Plan>
lethe::solveExact(const TrainingGraph &graph, const DeviceProfile &device,
                  const PlanOptions &options,
                  llvm::ArrayRef<ActivationDecision> startHint) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(options.exactTimeLimitSec));
  // The model needs the forward part first (the importers' order).
  NodeId firstBackward = graph.firstBackwardNode();
  for (NodeId i = firstBackward; i < static_cast<NodeId>(graph.numNodes());
       ++i)
    if (graph.getNode(i).phase == Phase::Fwd)
      return llvm::createStringError(llvm::formatv(
          "exact solver: forward {0}{1} comes after the first backward "
          "{2}; the planner needs every forward node first",
          describeNode(graph, i),
          graph.getNode(i).name.empty() ? ""
                                        : " '" + graph.getNode(i).name + "'",
          describeNode(graph, firstBackward)));
  ExactModel model(graph, device, options);
  Plan plan;
  plan.policy = Policy::Auto;
  plan.budgetBytes = options.budgetBytes;
  ExactModel::Evaluation baseline = model.evaluate(model.retainAll());
  plan.baselinePeakBytes = baseline.peakBytes;
  plan.baselineStepUs = baseline.stepUs;
  auto finish = [&](Plan &plan) {
    plan.solveMs =
        std::chrono::duration<double, std::milli>(Clock::now() - start)
            .count();
  };

  // Nothing is faster than the unplanned step: when it fits, it is optimal.
  if (baseline.fitsBudget) {
    plan.decisions = model.retainAll();
    plan.feasible = true;
    plan.peakBytes = baseline.peakBytes;
    plan.stepUs = baseline.stepUs;
    ExactSolveReport report;
    report.provenOptimal = true;
    report.objective = report.bound = baseline.stepUs;
    explain(model, report, plan.decisions);
    plan.exactReport = report;
    finish(plan);
    return plan;
  }

  // The MILP meets its memory rows up to CBC's tolerances; the model
  // measures the plan exactly, and a plan a few bytes over the budget is
  // solved again with the budget lowered by the excess.
  int64_t modelBudget = options.budgetBytes;
  bool infeasible = false;
  std::optional<StartPlan> startPlan = startFrom(model, startHint);
  for (int attempt = 0; attempt < 4; ++attempt) {
    llvm::Expected<Solved> solved =
        solveOnce(model, ExactMilp::Goal::MinTime, modelBudget, deadline,
                  startPlan ? &*startPlan : nullptr);
    if (!solved)
      return solved.takeError();
    milp::Result::Status status = solved->result.status;
    if (status == milp::Result::Status::Infeasible) {
      infeasible = true;
      break;
    }
    if (solved->decisions.empty() && !model.activations().empty())
      return llvm::createStringError(llvm::formatv(
          "exact solver: no plan found within {0} s (raise the time limit "
          "or use the fast solver)",
          options.exactTimeLimitSec));
    if (solved->eval.fitsBudget) {
      plan.decisions = std::move(solved->decisions);
      plan.feasible = true;
      plan.peakBytes = solved->eval.peakBytes;
      plan.stepUs = solved->eval.stepUs;
      plan.exactReport = makeReport(*solved);
      explain(model, *plan.exactReport, plan.decisions);
      finish(plan);
      return plan;
    }
    int64_t excess = solved->eval.peakBytes - options.budgetBytes;
    if (excess <= 0) // over the host budget: cannot be a rounding effect
      return llvm::createStringError(
          "exact solver: the MILP plan exceeds the host budget");
    modelBudget -= excess + std::max<int64_t>(1, modelBudget / 1000000);
  }
  if (!infeasible)
    return llvm::createStringError(
        "exact solver: could not meet the budget within the MILP's numerical "
        "tolerance");

  // Infeasible: the least peak any plan reaches is the least budget.
  llvm::Expected<Solved> least =
      solveOnce(model, ExactMilp::Goal::MinPeak, 0, deadline);
  if (!least)
    return least.takeError();
  if (least->decisions.empty())
    return llvm::createStringError(llvm::formatv(
        "exact solver: budget {0} B is infeasible, and no plan was found "
        "within {1} s to bound the least feasible budget",
        options.budgetBytes, options.exactTimeLimitSec));
  // Rounding in the first solve can call a budget infeasible that the
  // least-peak plan meets; then that plan is the answer.
  plan.feasible = least->eval.fitsBudget;
  plan.decisions = std::move(least->decisions);
  plan.peakBytes = least->eval.peakBytes;
  plan.stepUs = least->eval.stepUs;
  if (!plan.feasible)
    plan.leastFeasibleBudget = least->eval.peakBytes;
  plan.exactReport = makeReport(*least);
  explain(model, *plan.exactReport, plan.decisions);
  finish(plan);
  return plan;
}

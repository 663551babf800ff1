//===- PlanSearch.cpp - An independent search for plans faster than auto --===//
//
// lethe-plan-search --graph FILE.json [--budgets 50%,60%] [--seconds S]
//                   [--seed N] [--start-temperature T] [--profile h200]
// Which side of the certificate is loose (issue 20): for each budget (as
// `lethe plan --budget` reads it) it plans with auto and the bound as
// `lethe plan --bound` does (before the pipeline's packing check), then runs a
// simulated annealing over the per-activation decisions that shares nothing
// with auto's solver but the Evaluator (place, schedule, simulate): single
// decisions changed and a dropped activation retained with a retained one
// dropped, plans over the budget allowed at a price per byte, the fastest plan
// within the budget (device and host) kept. A plan it finds faster than auto's
// shows `auto` loose by at least the difference; the bound is a lower bound on
// it too. It also prints auto's plan priced by the bound's relaxation with
// auto's decisions fixed (boundStepTime's `fixed`): how much of the gap the
// relaxation's pricing misses on a plan it knows, and how much it gains by
// deciding otherwise.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Import/JsonImporter.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Bound.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <random>

using namespace lethe;

static llvm::cl::opt<std::string> graphFile("graph", llvm::cl::Required,
                                            llvm::cl::desc("graph JSON"));
static llvm::cl::opt<std::string> budgetList("budgets",
                                             llvm::cl::desc("budget fractions"),
                                             llvm::cl::init("50%,60%,70%"));
static llvm::cl::opt<double> seconds("seconds",
                                     llvm::cl::desc("search time per budget"),
                                     llvm::cl::init(40.0));
static llvm::cl::opt<unsigned> seed("seed", llvm::cl::init(1),
                                    llvm::cl::desc("random seed"));
static llvm::cl::opt<std::string> profileName("profile", llvm::cl::init("h200"),
                                              llvm::cl::desc("device profile"));

/// The annealing's temperature, as a share of the unplanned step, at the
/// start and end: a move that slows the step by that share is taken about
/// one time in e. On Llama-style 50% (bench/results/bound.md, 2026-11-26
/// 23:00; 20-30 s each), 2e-5 found 10.65%, 2e-4 10.66%, 2e-3 11.09%.
static llvm::cl::opt<bool> listChanges(
    "list-changes", llvm::cl::init(false),
    llvm::cl::desc("list the decisions the best plan found changes from "
                   "auto's (which side of the gap is loose, and how)"));
static llvm::cl::opt<double>
    startTemperature("start-temperature", llvm::cl::init(2e-5),
                     llvm::cl::desc("share of the step, at the start"));
constexpr double kEndTemperature = 2e-6;
/// The price of a byte over the budget: freeing 1% of the budget is worth
/// 4% of the step, above what any corpus plan pays per byte freed, so the
/// search returns within the budget.
constexpr double kOverBudgetPrice = 4.0;

namespace {

struct Search {
  const ActivationAnalysis &analysis;
  const PlanOptions &options;
  double baseStepUs;
  std::mt19937_64 rng;

  double cost(const Evaluation &e) const {
    double over = static_cast<double>(
        std::max<int64_t>(0, e.peakBytes - options.budgetBytes));
    double overHost = static_cast<double>(
        std::max<int64_t>(0, e.hostPeakBytes - options.hostBudgetBytes));
    return e.stepUs + kOverBudgetPrice * baseStepUs * (over + overHost) /
                          static_cast<double>(options.budgetBytes);
  }
  bool fits(const Evaluation &e) const {
    return e.peakBytes <= options.budgetBytes &&
           e.hostPeakBytes <= options.hostBudgetBytes;
  }
  bool allowed(size_t a, Decision d) const {
    const ActivationInfo &act = analysis.getActivations()[a];
    if (d == Decision::Recompute)
      return act.recomputable;
    if (d == Decision::Offload)
      return act.offloadable;
    return true;
  }
};

} // namespace

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv, "lethe-plan-search\n");
  auto buffer = llvm::MemoryBuffer::getFile(graphFile);
  if (!buffer) {
    llvm::errs() << "cannot read " << graphFile << "\n";
    return 1;
  }
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importGraphJson((*buffer)->getBuffer(), graphFile, &context);
  if (!module)
    return 1;
  // The costs `lethe plan` plans with: the pipeline's cost pass first.
  mlir::PassManager costs(&context);
  AnnotateCostsOptions costOptions;
  costOptions.device = profileName;
  costs.addPass(createAnnotateCosts(costOptions));
  if (mlir::failed(costs.run(*module)))
    return 1;
  mlir::func::FuncOp func = *module->getOps<mlir::func::FuncOp>().begin();
  llvm::Expected<DeviceProfile> profile = DeviceProfile::load(profileName);
  if (!profile) {
    llvm::errs() << llvm::toString(profile.takeError()) << "\n";
    return 1;
  }

  llvm::SmallVector<llvm::StringRef> budgets;
  llvm::StringRef(budgetList).split(budgets, ',');
  for (llvm::StringRef text : budgets) {
    // Planned as `lethe plan --budget TEXT --bound` plans (planStep), before
    // the pipeline checks that the plan packs.
    PlanActivationsOptions planOptions;
    planOptions.device = profileName;
    planOptions.budget = text.str();
    planOptions.bound = true;
    mlir::FailureOr<PlannedStep> step =
        planStep(func, planOptions, *profile, [](const llvm::Twine &error) {
          llvm::errs() << error << "\n";
        });
    if (mlir::failed(step))
      return 1;
    const Plan *plan = &step->plan;
    const PlanOptions &options = step->options;
    ActivationAnalysis analysis(step->graph, options);
    Evaluator evaluator(analysis, step->device,
                        planCopiesYield(step->graph, step->device, options));
    const size_t n = analysis.getActivations().size();
    const double base = plan->baselineStepUs;
    auto pct = [&](double stepUs) { return 100.0 * (stepUs / base - 1.0); };
    llvm::outs() << llvm::formatv(
        "{0} {1}: auto {2:F2}%{3}, bound {4:F2}%\n", graphFile, text,
        pct(plan->stepUs), plan->feasible ? "" : " (over)",
        plan->lowerBound ? 100.0 * plan->lowerBound->overhead : -1.0);
    if (!plan->feasible)
      continue;

    // auto's plan as the given policy replays it: decisions and copy hints.
    std::vector<Decision> dec(n, Decision::Retain);
    std::vector<CopyHint> hints(n);
    for (const ActivationDecision &d : plan->decisions) {
      int32_t a = analysis.activationIndex(d.value);
      if (a < 0)
        continue;
      dec[a] = d.decision;
      if (d.decision == Decision::Offload)
        hints[a] = {d.releaseAfter, d.prefetchAfter};
    }
    Search search{analysis, options, base, std::mt19937_64(seed.getValue())};
    llvm::Expected<Evaluation> cur = evaluator.evaluate(dec, hints);
    if (!cur)
      return 1;
    llvm::outs() << llvm::formatv("  auto replayed: {0:F2}%, peak {1} of {2}\n",
                                  pct(cur->stepUs), cur->peakBytes,
                                  options.budgetBytes);
    // Which side of the gap is loose: auto's plan priced by the relaxation
    // with its decisions fixed (docs/Bound.md, §3).
    llvm::Expected<OverheadBound> priced = boundStepTime(
        step->graph, step->device, options, base, plan->baselinePeakBytes, dec);
    if (!priced) {
      llvm::errs() << llvm::toString(priced.takeError()) << "\n";
      return 1;
    }
    if (priced->feasible && plan->lowerBound && plan->lowerBound->feasible)
      llvm::outs() << llvm::formatv(
          "  bound at auto's decisions: {0:F2}% (the relaxation prices "
          "auto's plan {1:F2} points under its step, and decides {2:F2} "
          "points under that)\n",
          100.0 * priced->overhead, pct(cur->stepUs) - 100.0 * priced->overhead,
          100.0 * (priced->overhead - plan->lowerBound->overhead));
    const std::vector<Decision> autoDec = dec;
    double curCost = search.cost(*cur);
    std::vector<Decision> bestDec = dec;
    double bestStep = search.fits(*cur) ? cur->stepUs : INFINITY;
    auto started = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           started)
          .count();
    };
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    unsigned evaluations = 0, accepted = 0;
    double t = 0.0;
    while ((t = elapsed()) < seconds) {
      const double temp =
          base * startTemperature *
          std::pow(kEndTemperature / startTemperature, t / seconds);
      std::vector<Decision> trial = dec;
      std::vector<CopyHint> trialHints = hints;
      auto change = [&](size_t a, Decision d) {
        trial[a] = d;
        trialHints[a] = CopyHint();
      };
      size_t a = pick(search.rng);
      if (unit(search.rng) < 0.5) {
        Decision d = static_cast<Decision>(
            (static_cast<int>(dec[a]) + 1 + (unit(search.rng) < 0.5)) % 3);
        if (!search.allowed(a, d))
          continue;
        change(a, d);
      } else {
        // A dropped one retained, a retained one dropped.
        size_t b = pick(search.rng);
        if (dec[a] == Decision::Retain || dec[b] != Decision::Retain)
          continue;
        Decision d =
            unit(search.rng) < 0.5 ? Decision::Recompute : Decision::Offload;
        if (!search.allowed(b, d))
          continue;
        change(a, Decision::Retain);
        change(b, d);
      }
      llvm::Expected<Evaluation> e = evaluator.evaluate(trial, trialHints);
      ++evaluations;
      if (!e) {
        llvm::consumeError(e.takeError());
        continue;
      }
      double c = search.cost(*e);
      if (c <= curCost || unit(search.rng) < std::exp((curCost - c) / temp)) {
        ++accepted;
        dec = std::move(trial);
        hints = std::move(trialHints);
        curCost = c;
        if (search.fits(*e) && e->stepUs < bestStep) {
          bestStep = e->stepUs;
          bestDec = dec;
        }
      }
    }
    if (listChanges) {
      static const char *names[] = {"R", "C", "O"};
      for (size_t i = 0; i < n; ++i) {
        if (autoDec[i] == bestDec[i])
          continue;
        const ActivationInfo &act = analysis.getActivations()[i];
        const GraphValue &value = step->graph.getValue(act.storage);
        llvm::outs() << llvm::formatv(
            "    {0} {1}->{2} {3:F2} MiB, last forward use {4}, first "
            "backward use {5}\n",
            step->graph.getNode(value.producer).name,
            names[static_cast<int>(autoDec[i])],
            names[static_cast<int>(bestDec[i])], act.bytes / 1048576.0,
            act.lastForwardUse, act.firstBackwardUse);
      }
    }
    unsigned changed[3][3] = {};
    for (size_t i = 0; i < n; ++i)
      ++changed[static_cast<int>(autoDec[i])][static_cast<int>(bestDec[i])];
    llvm::outs() << llvm::formatv(
        "  search: best {0:F2}% ({1:F2} points {2} auto), {3} evaluations, "
        "{4} accepted in {5:F1} s; R->C {6} R->O {7} C->R {8} C->O {9} O->R "
        "{10} O->C {11}\n",
        pct(bestStep), std::fabs(pct(plan->stepUs) - pct(bestStep)),
        bestStep < plan->stepUs ? "below" : "above", evaluations, accepted, t,
        changed[0][1], changed[0][2], changed[1][0], changed[1][2],
        changed[2][0], changed[2][1]);
  }
  return 0;
}

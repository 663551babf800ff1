//===- Pipelines.cpp - The Lethe compilation pipeline ---------------------===//

#include "lethe/Pipelines/Pipelines.h"

#include "PipelinePhases.h"

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanAttributes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Planner/AutoSolver.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Remarks.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

using namespace mlir;
using namespace lethe;
using namespace lethe::pipeline;

static std::optional<int64_t> getI64(ModuleOp module, StringRef name) {
  if (auto attr = module->getAttrOfType<IntegerAttr>(name))
    return attr.getInt();
  return std::nullopt;
}

static void recordDecisions(ModuleOp module,
                            std::vector<PipelineOutcome::Decision> &records) {
  records.clear();
  // Nodes and collectives (a received activation is one) carry decisions.
  module.walk([&](Operation *op) {
    std::optional<StringRef> name;
    StringRef kind;
    if (auto node = dyn_cast<NodeOp>(op)) {
      name = node.getName();
      kind = node.getKind();
    } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
      name = collective.getName();
      kind = stringifyCollectiveKind(collective.getKind());
    } else {
      return;
    }
    auto decisions =
        LetheDialect::DecisionsAttrHelper(op->getContext()).getAttr(op);
    if (!decisions)
      return;
    for (auto [index, entry] : llvm::enumerate(decisions)) {
      auto decision = dyn_cast<DecisionAttr>(entry);
      if (!decision || index >= op->getNumResults())
        continue;
      PipelineOutcome::Decision record;
      record.node = name ? name->str() : kind.str();
      if (auto id =
              LetheDialect::NodeIdAttrHelper(op->getContext()).getAttr(op))
        record.nodeId = id.getInt();
      record.result = index;
      record.bytes = getTypeBytes(op->getResult(index).getType());
      record.decision = stringifyDecision(decision.getValue()).str();
      records.push_back(std::move(record));
    }
  });
}

/// Whether the programs the arena-only callers measure are verified
/// (PipelineSearch::compilePlanned).
#ifdef NDEBUG
static constexpr bool kVerifyMeasuredPrograms = false;
#else
static constexpr bool kVerifyMeasuredPrograms = true;
#endif

namespace {

/// One try of the pipeline: plan for a budget, then materialize, schedule
/// and allocate.
struct Attempt {
  OwningOpRef<ModuleOp> module;
  /// The planner met the plan budget (else `diagnostics` say why).
  bool planned = false;
  /// The program phase failed: not a matter of budget.
  bool broken = false;
  /// The plan budget (resolved), the plan's peak and the packed arena.
  int64_t planBudget = -1;
  int64_t peak = 0;
  /// The packed arena; while `exactArena` is set, only an arena the
  /// program packs into, never less than the packed one (an arena-only
  /// attempt's allocation-order best fit, n log n).
  mutable int64_t arena = 0;
  /// The packed arena, computed where it is first needed: only where
  /// `arena` is over a budget (every plan a budget accepts is accepted by
  /// the bound or by the exact arena alike, and only arenas over budgets
  /// are reported or compared).
  mutable std::function<int64_t()> exactArena;
  /// What the attempt's passes said, replayed when it is the one kept.
  std::vector<Diagnostic> diagnostics;
  /// The plan's decisions, read before materialization consumes them.
  std::vector<PipelineOutcome::Decision> decisions;

  /// The budget this program meets: its arena, and never less than the
  /// planned peak (so that a plan is only ever taken for a budget it was
  /// made under).
  int64_t packed() const {
    if (exactArena) {
      arena = exactArena();
      exactArena = nullptr;
    }
    return std::max(arena, peak);
  }
  /// Whether the program meets `budget`: packed() <= budget, from the
  /// bound where it holds.
  bool fits(int64_t budget) const {
    return std::max(arena, peak) <= budget || packed() <= budget;
  }
};

/// The least budget the pipeline meets and the plan that meets it.
struct Least {
  int64_t packed = std::numeric_limits<int64_t>::max();
  int64_t peak = 0;
  int64_t arena = 0;

  void update(const Attempt &attempt) {
    if (attempt.packed() < packed)
      *this = {attempt.packed(), attempt.peak, attempt.arena};
  }
};

/// Plans and compiles one costed module for one budget after another.
///
/// The planner is a function of the plan budget P that picks the best plan
/// of a fixed family whose peak is at most P (fixed policies: one plan;
/// `auto`'s fast solver: its ladder and seeds). So plan(P') = plan(P) for
/// every P' in [peak(plan(P)), P], and walking P down from a budget B by
/// P = peak - 1 visits every plan the planner makes for some P <= B, each
/// once. Taking the first whose packed arena fits B makes success monotone:
/// a plan that fits B fits every larger budget, and the walk from there
/// reaches it. The least budget met is the least packed arena of those
/// plans (leastPacked).
class PipelineSearch {
public:
  PipelineSearch(ModuleOp costed, const LethePipelineConfig &config,
                 std::shared_ptr<AutoFamilies> families = nullptr)
      : costed(costed), config(config),
        exact(config.plan.planFile.empty() && config.plan.policy == "auto" &&
              config.plan.solver == "exact") {
    if (families)
      this->families = std::move(families);
  }

  Attempt attempt(StringRef budget) {
    Attempt result;
    ++attempts;
    MLIRContext *context = costed.getContext();
    result.module = costed.clone();
    ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
      result.diagnostics.push_back(std::move(diag));
      return success();
    });
    PassManager plan(context);
    addPlanPass(plan, config, budget, families);
    if (failed(plan.run(*result.module)))
      return result;
    compilePlanned(result);
    return result;
  }
  Attempt attempt(int64_t budget) { return attempt(std::to_string(budget)); }

  /// The attempt for `step`, planStep's plan of `func` (with the costs
  /// `costed` would have) for the pipeline's budget: what
  /// attempt(config.plan.budget) returns, without planning again, its
  /// program materialized from `step` itself (materializePlannedStep: no
  /// clone written and read back, ~8% of a `lethe plan` at 100k ops), or
  /// by the attribute route on `makeCosted()` where that one is not taken.
  Attempt attemptPlanned(func::FuncOp func, const PlannedStep &step,
                         llvm::function_ref<ModuleOp()> makeCosted) {
    Attempt result;
    {
      ScopedDiagnosticHandler capture(func.getContext(), [&](Diagnostic &diag) {
        result.diagnostics.push_back(std::move(diag));
        return success();
      });
      result.module =
          materializePlannedStep(func, step, !config.plan.budget.empty());
      if (result.module) {
        ++attempts;
        compilePlanned(result, /*materialized=*/true);
        return result;
      }
    }
    costed = makeCosted();
    if (!costed)
      return Attempt();
    return attemptWritten(func, step);
  }

  /// attemptPlanned by the attribute route: `step` written on a clone of
  /// `costed` (lethe-plan's attributes), then the whole program phase.
  Attempt attemptWritten(func::FuncOp func, const PlannedStep &step) {
    OwningOpRef<ModuleOp> module = costed.clone();
    auto funcs = module->getOps<func::FuncOp>();
    auto cloned = llvm::find_if(funcs, [&](func::FuncOp f) {
      return f.getSymName() == func.getSymName();
    });
    // `costed` is a clone of `func`'s module: its ops are the plan graph's,
    // in the same order, found by walking both at once.
    SmallVector<Operation *> from, to;
    func.walk([&](Operation *op) { from.push_back(op); });
    if (cloned != funcs.end())
      (*cloned).walk([&](Operation *op) { to.push_back(op); });
    if (from.size() != to.size())
      return attempt(config.plan.budget);
    IRMapping ops;
    for (auto [original, copy] : llvm::zip_equal(from, to))
      ops.map(original, copy);
    Attempt result;
    ++attempts;
    result.module = std::move(module);
    ScopedDiagnosticHandler capture(costed.getContext(), [&](Diagnostic &diag) {
      result.diagnostics.push_back(std::move(diag));
      return success();
    });
    writePlannedStep(*cloned, step, !config.plan.budget.empty(), &ops);
    compilePlanned(result);
    return result;
  }

  /// The program phase of `result`, whose module has its plan (and with
  /// `materialized`, its program: the phase from lethe-schedule on).
  void compilePlanned(Attempt &result, bool materialized = false) {
    result.planned = true;
    result.planBudget =
        getI64(*result.module,
               LetheDialect::BudgetBytesAttrHelper::getNameStr())
            .value_or(-1);
    for (auto func : result.module->getOps<func::FuncOp>())
      if (auto summary =
              LetheDialect::PlanAttrHelper(func->getContext()).getAttr(func))
        result.peak = std::max(result.peak, summary.getPeakBytes());
    // A materialized program carries no decisions; the arena-only callers
    // read none.
    if (!materialized)
      recordDecisions(*result.module, result.decisions);
    PassManager program(result.module->getContext());
    if (arenaOnly)
      buildProgramOrder(program, config, materialized, /*measured=*/true);
    else
      buildProgram(program, config, materialized);
    // The IR is verified once, after the phase, not after each of its three
    // passes: each verification walks the whole module (together ~3% of a
    // `lethe plan` at 100k ops). IR a pass left invalid is still refused,
    // at the end of the phase instead of at once.
    // The arena-only callers' programs are only measured, never kept:
    // `lethe compile` builds the same program (the same passes on the same
    // plan; materializePlannedStep writes what lethe-materialize writes) and
    // verifies it where it keeps it, and failing verification here only
    // left the plan as it was (a broken attempt: the compile's error to
    // report). Only builds with assertions verify them (~3% of a `lethe
    // plan` at 100k ops).
    program.enableVerifier(false);
    if (failed(program.run(*result.module)) ||
        ((!arenaOnly || kVerifyMeasuredPrograms) &&
         failed(verify(*result.module)))) {
      result.broken = true;
      return;
    }
    if (arenaOnly) {
      result.broken = failed(packDeviceArena(*result.module, result));
      return;
    }
    result.arena =
        getI64(*result.module,
               LetheDialect::DeviceArenaBytesAttrHelper::getNameStr())
            .value_or(0);
  }

  /// Sets `result`'s arena to the device arena lethe-assign-buffers would
  /// give `module` (the largest over its functions), without writing its
  /// offsets: at first allocation order's best fit, the exact one
  /// (packIntervals, which can cost O(n) a buffer) only when asked for.
  /// Fails where the pass would.
  LogicalResult packDeviceArena(ModuleOp module, Attempt &result) const {
    if (!isValidAlignment(config.plan.alignment))
      return failure();
    const int64_t alignment = config.plan.alignment;
    auto sets = std::make_shared<std::vector<std::vector<PackInterval>>>();
    int64_t bound = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FailureOr<ExplicitProgram> built = ExplicitProgram::build(func);
      if (failed(built))
        return failure();
      sets->push_back(arenaIntervals(*built, /*host=*/false));
      std::vector<int64_t> offsets;
      bound = std::max(bound,
                       placeByBeginBestFit(sets->back(), alignment, offsets));
    }
    result.arena = bound;
    result.exactArena = [sets, alignment] {
      int64_t arena = 0;
      for (const std::vector<PackInterval> &intervals : *sets)
        arena = std::max(arena, packIntervals(intervals, alignment).arenaBytes);
      return arena;
    };
    return success();
  }

  /// The plan budget after `tried` that the walk down from `budget` takes.
  int64_t next(const Attempt &tried, int64_t budget) const {
    int64_t below = tried.peak - 1;
    // The exact solver's plans are not a fixed family: every byte less can
    // give another plan. Leave room for the packing gap measured instead.
    if (exact)
      below = std::min(below, budget - (tried.packed() - tried.peak));
    return below;
  }

  /// From `first` (the plan for `budget`, resolved) down the walk, the
  /// first plan whose packed arena fits `budget`, or one whose program
  /// phase broke; none when the planner runs out of plans first. `seen`
  /// gathers the least packed arena of the plans over the budget;
  /// `onReplan` hears of each re-plan (the plan over, the next budget).
  std::optional<Attempt>
  walkDown(Attempt first, int64_t budget, Least &seen,
           llvm::function_ref<void(const Attempt &, int64_t)> onReplan) {
    if (budget < 0 || first.broken || first.fits(budget))
      return std::move(first);
    Attempt tried = std::move(first);
    while (true) {
      seen.update(tried);
      int64_t lower = next(tried, budget);
      onReplan(tried, lower);
      tried = attempt(lower);
      if (!tried.planned)
        return std::nullopt;
      if (tried.broken || tried.fits(budget))
        return std::move(tried);
    }
  }

  /// Lowers `least` with the plans for budgets in (`floor`, least), the
  /// only ones that can pack into less.
  void improve(Least &least, int64_t floor) {
    int64_t budget = least.packed - 1;
    while (budget > floor) {
      Attempt tried = attempt(budget);
      if (!tried.planned || tried.broken)
        return;
      least.update(tried);
      int64_t below = std::min(next(tried, budget), least.packed - 1);
      // The walk must go down. A plan above the budget it was asked for
      // (sizes past 2^53 bytes, which a double no longer tells apart, made
      // the walk ask for the same budget forever) leads nowhere lower.
      if (below >= budget)
        return;
      budget = below;
    }
  }

  /// The planner's own plan for the user's budget (resolved), or for
  /// `budget` bytes: it states the least peak the planner can meet.
  FailureOr<Plan> planDirectly(std::optional<int64_t> budget = std::nullopt) {
    auto funcs = costed.getOps<func::FuncOp>();
    auto func =
        llvm::find_if(funcs, [](func::FuncOp f) { return !f.isExternal(); });
    if (func == funcs.end())
      return failure();
    llvm::Expected<DeviceProfile> device =
        DeviceProfile::load(config.plan.device);
    if (!device) {
      llvm::consumeError(device.takeError());
      return failure();
    }
    PlanActivationsOptions options = config.plan;
    if (budget)
      options.budget = std::to_string(*budget);
    // Its errors are the failed attempt's, already recorded.
    ScopedDiagnosticHandler quiet(costed.getContext(),
                                  [](Diagnostic &) { return success(); });
    FailureOr<PlannedStep> step = planStep(
        *func, options, *device, [](const llvm::Twine &) {}, families.get());
    if (failed(step))
      return failure();
    return std::move(step->plan);
  }

  /// The least budget the pipeline meets, from the least peak the planner
  /// meets (`planLeast`).
  FailureOr<Least> leastPacked(int64_t planLeast) {
    Attempt bottom = attempt(planLeast);
    if (!bottom.planned || bottom.broken)
      return failure();
    Least least;
    least.update(bottom);
    improve(least, planLeast - 1);
    return least;
  }

  ModuleOp costed;
  const LethePipelineConfig &config;
  bool exact;
  /// The attempts' programs are only measured, never kept (the
  /// feasibility check of `lethe plan`, the least budget): their buffers
  /// are packed for the arena, but no offsets are written (~4% of a
  /// `lethe plan` at 100k ops).
  bool arenaOnly = false;
  int attempts = 0;
  /// Every attempt plans `costed` with `config` but for the budget: `auto`
  /// builds its ladder once for all of them, as far as the lowest budget
  /// needs (AutoSolverOptions::family).
  std::shared_ptr<AutoFamilies> families = std::make_shared<AutoFamilies>();
};

} // namespace

/// "budget B is below the least budget policy P can meet on this graph: L"
/// for the least budget the whole pipeline meets.
static std::string belowLeastMessage(const LethePipelineConfig &config,
                                     int64_t budget, const Least &least,
                                     std::optional<int64_t> withReplay = {}) {
  Plan plan;
  plan.leastWithRngReplay = withReplay;
  plan.policy = !config.plan.planFile.empty()
                    ? Policy::Given
                    : parsePolicy(config.plan.policy).value_or(Policy::Auto);
  plan.budgetBytes = budget;
  plan.leastFeasibleBudget = least.packed;
  std::string message = infeasibleMessage(plan);
  if (least.arena > least.peak)
    message += llvm::formatv(" (a plan peaking at {0} B, packed into an arena "
                             "of {1} B)",
                             least.peak, least.arena)
                   .str();
  return message;
}

static void replay(MLIRContext *context, std::vector<Diagnostic> &diags) {
  for (Diagnostic &diag : diags)
    context->getDiagEngine().emit(std::move(diag));
  diags.clear();
}

FailureOr<int64_t>
lethe::findLeastPipelineBudget(ModuleOp module,
                               const LethePipelineConfig &config,
                               std::shared_ptr<AutoFamilies> families) {
  MLIRContext *context = module.getContext();
  OwningOpRef<ModuleOp> costed = module.clone();
  if (failed(runCostPass(*costed, config)))
    return failure();
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  // The caller's ladders serve only where the costs stay as they were.
  PipelineSearch search(*costed, config,
                        config.annotateCosts ? nullptr : std::move(families));
  search.arenaOnly = true;
  FailureOr<Plan> plan = search.planDirectly(/*budget=*/0);
  if (failed(plan))
    return failure();
  if (plan->feasible)
    return 0;
  if (!plan->leastFeasibleBudget)
    return failure();
  FailureOr<Least> least = search.leastPacked(*plan->leastFeasibleBudget);
  if (failed(least))
    return failure();
  return least->packed;
}

LogicalResult
lethe::resolveLeastBudget(ModuleOp module, LethePipelineConfig &config,
                          std::shared_ptr<AutoFamilies> families) {
  if (!isLeastBudget(config.plan.budget))
    return success();
  FailureOr<int64_t> least =
      findLeastPipelineBudget(module, config, std::move(families));
  if (failed(least))
    return emitError(module.getLoc())
           << "lethe-plan: no least budget found for this step";
  config.plan.budget = std::to_string(*least);
  return success();
}

/// `module` with `func` alone (the other functions left out).
static OwningOpRef<ModuleOp> withOnly(ModuleOp module, func::FuncOp func) {
  OwningOpRef<ModuleOp> step = module.clone();
  for (Operation &op : llvm::make_early_inc_range(*step->getBody()))
    if (auto other = dyn_cast<func::FuncOp>(op);
        other && other.getSymName() != func.getSymName())
      op.erase();
  return step;
}

LogicalResult lethe::agreeWithPipeline(
    ModuleOp module, func::FuncOp func, const LethePipelineConfig &config,
    const DeviceProfile &device, PlannedStep &step,
    std::shared_ptr<AutoFamilies> families) {
  Plan &plan = step.plan;
  if (!plan.feasible) {
    // The infeasible plan built `auto`'s whole ladder: the search replays it.
    FailureOr<int64_t> least =
        findLeastFunctionBudget(module, func, config, std::move(families));
    if (succeeded(least))
      plan.leastFeasibleBudget = *least;
    return success();
  }
  // `one`: `module` with `func` alone and its costs, what the search plans
  // on; made where it is needed: with the cost pass, and otherwise only for
  // the re-plans of a plan that does not pack.
  OwningOpRef<ModuleOp> one;
  auto makeOne = [&]() -> ModuleOp {
    one = withOnly(module, func);
    if (failed(runCostPass(*one, config)))
      one = nullptr;
    return one ? *one : ModuleOp();
  };
  if (config.annotateCosts && !makeOne())
    return failure();
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  // The caller's ladders serve only where the costs stay as `step`'s were.
  // Without `one` yet, the search's module is `module` until `one` is
  // made, which is before the search plans or clones anything.
  PipelineSearch search(one ? *one : module, config,
                        config.annotateCosts ? nullptr : std::move(families));
  search.arenaOnly = true;
  // `step` is the plan the pass would make on `one` when the cost pass
  // leaves the costs as they are (the driver's pipeline): compiled as it
  // is instead of planned a second time (attemptPlanned).
  Attempt first = config.annotateCosts
                      ? search.attempt(config.plan.budget)
                      : search.attemptPlanned(func, step, makeOne);
  // A plan the program phase cannot take is the compile's error to report.
  if (!first.planned || first.broken)
    return success();
  const int64_t budget = first.planBudget;
  if (budget < 0 || first.fits(budget))
    return success();
  if (!one) {
    if (!makeOne())
      return failure();
    search.costed = *one;
  }
  Least seen;
  std::optional<Attempt> kept = search.walkDown(
      std::move(first), budget, seen, [](const Attempt &, int64_t) {});
  if (kept && kept->broken)
    return success();
  if (!kept) {
    search.improve(seen, budget);
    plan.feasible = false;
    plan.leastFeasibleBudget = seen.packed;
    return success();
  }
  // The plan compiling keeps: planned again for its budget (the planner is
  // a function of the budget), stated for the budget asked for.
  // The lower bound stays the one for the budget asked for: a bound for
  // less does not bound every plan under it.
  // Where the cost pass leaves the costs as they are, `func` plans as the
  // search's module does (attemptPlanned): its ladder is the search's.
  PlanActivationsOptions options = config.plan;
  options.budget = std::to_string(kept->planBudget);
  options.bound = false;
  FailureOr<PlannedStep> replanned = planStep(
      func, options, device, [](const llvm::Twine &) {},
      config.annotateCosts ? nullptr : search.families.get());
  if (failed(replanned) || !replanned->plan.feasible)
    return failure();
  replanned->plan.budgetBytes = plan.budgetBytes;
  replanned->plan.lowerBound = plan.lowerBound;
  replanned->options.budgetBytes = step.options.budgetBytes;
  step = std::move(*replanned);
  return success();
}

FailureOr<int64_t>
lethe::findLeastFunctionBudget(ModuleOp module, func::FuncOp func,
                               const LethePipelineConfig &config,
                               std::shared_ptr<AutoFamilies> families) {
  return findLeastPipelineBudget(*withOnly(module, func), config,
                                 std::move(families));
}

LogicalResult lethe::runLethePipeline(ModuleOp module,
                                      const LethePipelineConfig &config,
                                      PipelineOutcome *outcome,
                                      bool keepRemarks) {
  MLIRContext *context = module.getContext();
  PipelineOutcome local;
  PipelineOutcome &result = outcome ? *outcome : local;
  result = PipelineOutcome();
  // Remarks are for lethe-opt users; the driver prints its own summary.
  ScopedDiagnosticHandler dropRemarks(context, [keepRemarks](Diagnostic &diag) {
    return success(!keepRemarks &&
                   diag.getSeverity() == DiagnosticSeverity::Remark);
  });

  OwningOpRef<ModuleOp> costed = module.clone();
  if (failed(runCostPass(*costed, config)))
    return failure();
  LethePipelineConfig resolved = config;
  if (failed(resolveLeastBudget(*costed, resolved)))
    return failure();
  PipelineSearch search(*costed, resolved);
  Attempt first = search.attempt(resolved.plan.budget);
  result.attempts = search.attempts;
  Location loc = module.getLoc();
  for (auto func : costed->getOps<func::FuncOp>())
    if (!func.isExternal())
      loc = func.getLoc();

  if (!first.planned || first.broken) {
    // A budget below the planner's least: say what the whole pipeline
    // needs, packing included. Any other error stands as it was.
    FailureOr<Plan> direct =
        first.planned ? FailureOr<Plan>(failure()) : search.planDirectly();
    if (failed(direct) || direct->feasible || !direct->leastFeasibleBudget) {
      replay(context, first.diagnostics);
      return failure();
    }
    FailureOr<Least> least = search.leastPacked(*direct->leastFeasibleBudget);
    result.attempts = search.attempts;
    if (failed(least)) {
      replay(context, first.diagnostics);
      return failure();
    }
    result.budgetBytes = direct->budgetBytes;
    result.leastBudgetBytes = least->packed;
    return emitError(loc) << "lethe-plan: "
                          << belowLeastMessage(
                                 config, direct->budgetBytes, *least,
                                 leastWithRngReplay(module, nullptr, config,
                                                    least->packed));
  }

  const int64_t budget = first.planBudget;
  result.budgetBytes = budget;
  Least seen;
  std::optional<Attempt> kept =
      search.walkDown(std::move(first), budget, seen,
                      [&](const Attempt &tried, int64_t lower) {
                        if (keepRemarks)
                          remark::analysis(
                              loc, remark::RemarkOpts::name("replan").category(
                                       kPipelineArgument))
                              << llvm::formatv(
                                     "the packed device arena ({0} bytes) "
                                     "exceeds the budget ({1} bytes); "
                                     "planning again for {2} bytes",
                                     tried.arena, budget, lower)
                                     .str();
                      });
  result.attempts = search.attempts;
  if (kept && kept->broken) {
    replay(context, kept->diagnostics);
    return failure();
  }
  if (!kept) {
    // No plan under the budget packs into it: the least budget that one
    // does is above it, among the plans for budgets in (budget, seen).
    search.improve(seen, budget);
    result.attempts = search.attempts;
    result.leastBudgetBytes = seen.packed;
    return emitError(loc) << "lethe-pipeline: the packed device arena "
                             "exceeds the budget for every plan under it; "
                          << belowLeastMessage(config, budget, seen);
  }

  result.planBudgetBytes = kept->planBudget;
  result.decisions = std::move(kept->decisions);
  replay(context, kept->diagnostics);
  // The program is checked against the budget the user asked for.
  if (budget >= 0)
    (*kept->module)
        ->setAttr(LetheDialect::BudgetBytesAttrHelper::getNameStr(),
                  Builder(context).getI64IntegerAttr(budget));
  PassManager verify(context);
  verify.addPass(createVerifyProgram());
  if (failed(verify.run(*kept->module)))
    return failure();
  module.getBodyRegion().takeBody(kept->module->getBodyRegion());
  module->setAttrs((*kept->module)->getAttrDictionary());
  return success();
}

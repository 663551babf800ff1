//===- PlanAttributesTest.cpp - Plans name nodes by id --------------------===//
//
// A plan on the IR names nodes by their `lethe.node_id`, never by position:
// read back from the same function with its nodes in another topological
// order, it gives the same decisions, restore points, copy points and
// re-run nodes (by id). Read by position, it would not: the emitted ids are
// not positions, and the order changes.
//
//===----------------------------------------------------------------------===//

#include "../Planner/RandomGraph.h"
#include "EmitGraph.h"

#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/NodeIds.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanAttributes.h"
#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Planner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

using namespace mlir;
using namespace lethe;
using namespace lethe::testing;

namespace {

/// Moves the ops of `func`'s body into a random topological order.
void shuffleTopologically(func::FuncOp func, uint64_t seed) {
  Block &body = func.getBody().front();
  Operation *terminator = body.getTerminator();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  DenseMap<Operation *, unsigned> waiting;
  DenseMap<Operation *, SmallVector<Operation *>> users;
  for (Operation *op : ops) {
    DenseSet<Operation *> producers;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        producers.insert(def);
    waiting[op] = producers.size();
    for (Operation *def : producers)
      users[def].push_back(op);
  }
  SmallVector<Operation *> ready;
  for (Operation *op : ops)
    if (waiting[op] == 0)
      ready.push_back(op);
  std::mt19937_64 rng(seed);
  while (!ready.empty()) {
    size_t pick =
        std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng);
    Operation *op = ready[pick];
    ready.erase(ready.begin() + pick);
    op->moveBefore(terminator);
    for (Operation *user : users[op])
      if (--waiting[user] == 0)
        ready.push_back(user);
  }
}

/// A decision with every node named by its id.
struct ById {
  Decision decision;
  int64_t restore, release, prefetch;
  std::vector<int64_t> nodes;
  bool operator==(const ById &o) const {
    return std::tie(decision, restore, release, prefetch, nodes) ==
           std::tie(o.decision, o.restore, o.release, o.prefetch, o.nodes);
  }
};

/// The decisions about moved values, keyed by (producer id, result).
std::map<std::pair<int64_t, int32_t>, ById>
byId(const TrainingGraph &graph, ArrayRef<ActivationDecision> decisions) {
  auto id = [&](NodeId node) {
    return node < 0 ? -1 : *graph.getNode(node).sourceId;
  };
  std::map<std::pair<int64_t, int32_t>, ById> out;
  for (const ActivationDecision &d : decisions) {
    if (d.decision == Decision::Retain)
      continue;
    const GraphValue &value = graph.getValue(d.value);
    ById &entry = out[{id(value.producer), value.resultIndex}];
    entry = {d.decision,
             id(d.firstBackwardUse),
             id(d.releaseAfter),
             id(d.prefetchAfter),
             {}};
    for (NodeId node : d.recomputeNodes)
      entry.nodes.push_back(id(node));
  }
  return out;
}

/// The policy a test seed picks (offload-all, full or auto; every value may
/// be offloaded), solved fast.
PlanOptions seededOptions(uint64_t seed) {
  PlanOptions options;
  options.policy = seed % 3 == 0   ? Policy::OffloadAll
                   : seed % 3 == 1 ? Policy::Full
                                   : Policy::Auto;
  options.minOffloadBytes = 0;
  options.solver = SolverKind::Fast;
  return options;
}

/// `graph` planned under `options` at 70% of its unplanned peak (the budget
/// is set in `options`).
llvm::Expected<Plan> planAt70(const TrainingGraph &graph,
                              const DeviceProfile &device,
                              PlanOptions &options) {
  llvm::Expected<Plan> unplanned =
      planTrainingStep(graph, device, PlanOptions{});
  if (!unplanned)
    return unplanned.takeError();
  options.budgetBytes = static_cast<int64_t>(
      0.7 * static_cast<double>(unplanned->baselinePeakBytes));
  return planTrainingStep(graph, device, options);
}

TEST(PlanAttributesTest, ReadBackFromReorderedFunction) {
  MLIRContext context;
  context.loadDialect<LetheDialect, func::FuncDialect>();
  DeviceProfile device = testDeviceProfile();
  int moved = 0, reordered = 0;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TrainingGraph random = randomLayeredGraph(seed);
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
    func::FuncOp func = emitGraph(random, *module);
    FailureOr<TrainingGraph> planned = TrainingGraph::fromFunction(func);
    ASSERT_TRUE(succeeded(planned));
    PlanOptions options = seededOptions(seed);
    llvm::Expected<Plan> plan = planAt70(*planned, device, options);
    ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
    writePlanAttributes(*planned, *plan);
    auto expected = byId(*planned, plan->decisions);
    moved += expected.size();

    std::vector<Operation *> before;
    for (const GraphNode &node : planned->getNodes())
      before.push_back(node.irOp);
    shuffleTopologically(func, seed);
    FailureOr<TrainingGraph> shuffled = TrainingGraph::fromFunction(func);
    ASSERT_TRUE(succeeded(shuffled));
    bool changed = false;
    for (auto [index, node] : llvm::enumerate(shuffled->getNodes()))
      changed |= node.irOp != before[index];
    reordered += changed;
    ActivationAnalysis analysis(*shuffled, options);
    FailureOr<PlanOnIR> read = readPlanAttributes(*shuffled, analysis);
    ASSERT_TRUE(succeeded(read));
    EXPECT_EQ(byId(*shuffled, read->decisions), expected);
  }
  // The test means something: values moved, and orders changed.
  EXPECT_GT(moved, 50);
  EXPECT_GT(reordered, 20);
}

// The plan read back from the IR (readScheduledPlan, what lethe-materialize
// emits) is the planner's own: the same placed decisions, read under the
// planner's options (with and without RNG replay, over graphs with
// dropouts), give the schedule the planner simulated, op for op, and
// nothing is placed again (the profile is never asked for).
TEST(PlanAttributesTest, ReadScheduledPlanIsThePlannersSchedule) {
  MLIRContext context;
  context.loadDialect<LetheDialect, func::FuncDialect>();
  DeviceProfile device = testDeviceProfile();
  int dropped = 0, replayed = 0;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
    func::FuncOp func = emitGraph(randomLayeredGraph(seed), *module);
    FailureOr<TrainingGraph> planned = TrainingGraph::fromFunction(func);
    ASSERT_TRUE(succeeded(planned));
    PlanOptions options = seededOptions(seed);
    options.replayRng = seed % 2 == 1;
    llvm::Expected<Plan> plan = planAt70(*planned, device, options);
    ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
    Schedule expected;
    llvm::Expected<SimResult> simulated =
        simulatePlan(*planned, device, options, *plan, &expected);
    ASSERT_TRUE(static_cast<bool>(simulated))
        << llvm::toString(simulated.takeError());
    writePlanAttributes(*planned, *plan);
    LetheDialect::PlanAttrHelper(&context).setAttr(
        func, PlanAttr::get(
                  &context, plan->policy, plan->budgetBytes, plan->feasible,
                  plan->peakBytes, plan->baselinePeakBytes, plan->stepUs,
                  plan->baselineStepUs, 0.0, std::nullopt, options.replayRng));

    FailureOr<TrainingGraph> reread = TrainingGraph::fromFunction(func);
    ASSERT_TRUE(succeeded(reread));
    FailureOr<ScheduledPlan> read = readScheduledPlan(
        func, *reread,
        [&]() -> const DeviceProfile * {
          ADD_FAILURE() << "a planned function was placed again";
          return nullptr;
        },
        [](const llvm::Twine &message) { ADD_FAILURE() << message.str(); });
    ASSERT_TRUE(succeeded(read));
    std::string want, got;
    llvm::raw_string_ostream wantOs(want), gotOs(got);
    expected.print(wantOs, *planned);
    read->schedule.print(gotOs, *reread);
    EXPECT_EQ(got, want);
    for (const ActivationDecision &d : read->decisions)
      dropped += d.decision != Decision::Retain;
    replayed += options.replayRng;
  }
  // The test means something: decisions were read back, with and without
  // replay.
  EXPECT_GT(dropped, 50);
  EXPECT_GT(replayed, 5);
}

/// `op` printed with its locations.
std::string printed(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os, OpPrintingFlags().enableDebugInfo());
  return text;
}

// materializePlannedStep (the pipeline's feasibility check) writes the
// program lethe-materialize writes from the plan writePlannedStep leaves on
// the IR, op for op and location for location, from the planner's graph
// and decisions (offload-all, full and auto plans, with and without RNG
// replay and alignment), module attributes included, and leaves the
// planned function as it was.
TEST(PlanAttributesTest, MaterializePlannedStepIsTheAttributeRoute) {
  MLIRContext context;
  context.loadDialect<LetheDialect, func::FuncDialect>();
  DeviceProfile device = testDeviceProfile();
  int dropped = 0, thresholdApplied = 0;
  for (uint64_t seed = 0; seed < 18; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
    func::FuncOp func = emitGraph(randomLayeredGraph(seed), *module);
    const char *policy = seed % 3 == 0   ? "offload-all"
                         : seed % 3 == 1 ? "full"
                                         : "auto";
    // An offload threshold the graph's activations straddle (seed % 5 ==
    // 4) leaves the planner's analysis other than the plan's reading.
    llvm::Expected<PlanActivationsOptions> options =
        parsePlanActivationsOptions(llvm::formatv(
            "budget=70% policy={0} solver=fast min-offload-bytes={3} "
            "replay-rng={1} alignment={2}",
            policy, seed % 2 ? "true" : "false", seed % 4 < 2 ? 1 : 4096,
            seed % 5 == 4 ? "64KiB" : "0")
            .str());
    ASSERT_TRUE(static_cast<bool>(options))
        << llvm::toString(options.takeError());
    // Planned in place: the direct route reuses the planner's analysis.
    auto step = std::make_unique<PlannedStep>();
    ASSERT_TRUE(succeeded(planStepInPlace(
        *step, func, *options, device,
        [](const llvm::Twine &message) { ADD_FAILURE() << message.str(); })));
    ASSERT_TRUE(step->planned.of(step->graph));
    for (const ActivationDecision &d : step->plan.decisions)
      dropped += d.decision != Decision::Retain;
    thresholdApplied +=
        step->planned.of(step->graph)->isOffloadThresholdApplied();

    // The attribute route: the plan written on a clone, then the pass.
    OwningOpRef<ModuleOp> written = module->clone();
    func::FuncOp writtenFunc = *written->getOps<func::FuncOp>().begin();
    SmallVector<Operation *> from, to;
    func.walk([&](Operation *op) { from.push_back(op); });
    writtenFunc.walk([&](Operation *op) { to.push_back(op); });
    ASSERT_EQ(from.size(), to.size());
    IRMapping ops;
    for (auto [original, copy] : llvm::zip_equal(from, to))
      ops.map(original, copy);
    writePlannedStep(writtenFunc, *step, /*budgetGiven=*/true, &ops);
    PassManager pm(&context);
    pm.addPass(createMaterialize());
    ASSERT_TRUE(succeeded(pm.run(*written)));

    // The direct route, into a module of its own.
    std::string before = printed(func);
    OwningOpRef<ModuleOp> direct =
        materializePlannedStep(func, *step, /*budgetGiven=*/true);
    ASSERT_TRUE(direct);
    EXPECT_EQ(printed(*direct), printed(*written));
    EXPECT_EQ(printed(func), before);
    EXPECT_TRUE(succeeded(verify(*direct)));
    // A moved step has no analysis (it referred to the graph moved from):
    // the direct route analyses the graph itself, to the same program.
    PlannedStep moved = std::move(*step);
    EXPECT_FALSE(moved.planned.of(moved.graph));
    OwningOpRef<ModuleOp> again =
        materializePlannedStep(func, moved, /*budgetGiven=*/true);
    ASSERT_TRUE(again);
    EXPECT_EQ(printed(*again), printed(*written));
  }
  // The test means something: plans recompute and offload, and both kinds
  // of analysis (threshold applied or not) are met.
  EXPECT_GT(dropped, 50);
  EXPECT_GT(thresholdApplied, 0);
}

TEST(PlanAttributesTest, AssignNodeIds) {
  MLIRContext context;
  context.loadDialect<LetheDialect, func::FuncDialect>();
  for (uint64_t seed = 0; seed < 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
    func::FuncOp func = emitGraph(randomLayeredGraph(seed), *module);
    // Some nodes keep an id (INT64_MAX among them: the next ids wrap
    // around), some lose theirs, some repeat an earlier one.
    std::mt19937_64 rng(seed);
    LetheDialect::NodeIdAttrHelper helper(&context);
    Builder builder(&context);
    SmallVector<Operation *> nodes;
    func.walk([&](NodeOp op) { nodes.push_back(op); });
    for (auto [index, op] : llvm::enumerate(nodes)) {
      switch (rng() % 4) {
      case 0:
        helper.removeAttr(op);
        break;
      case 1:
        if (seed % 2)
          helper.setAttr(op, builder.getI64IntegerAttr(
                                 std::numeric_limits<int64_t>::max() -
                                 static_cast<int64_t>(index % 2)));
        break;
      default:
        break;
      }
    }
    Operation *repeat = nodes.back();
    helper.setAttr(repeat, helper.getAttr(nodes.front())
                               ? helper.getAttr(nodes.front())
                               : builder.getI64IntegerAttr(-5));
    auto idsOf = [&] {
      std::vector<std::optional<int64_t>> ids;
      for (Operation *op : nodes)
        ids.push_back(helper.getAttr(op)
                          ? std::optional<int64_t>(helper.getAttr(op).getInt())
                          : std::nullopt);
      return ids;
    };
    // Repeats renumbered, the first of each id kept; nodes without one
    // still without.
    std::vector<std::optional<int64_t>> start = idsOf();
    renumberRepeatedNodeIds(func);
    std::vector<std::optional<int64_t>> renumbered = idsOf();
    std::set<int64_t> seen;
    for (size_t index = 0; index < nodes.size(); ++index) {
      const std::optional<int64_t> &id = renumbered[index];
      EXPECT_EQ(id.has_value(), start[index].has_value());
      if (!id)
        continue;
      EXPECT_TRUE(seen.insert(*id).second) << "id " << *id << " repeats";
      if (llvm::count(ArrayRef(start).take_front(index), start[index]) == 0)
        EXPECT_EQ(id, start[index]);
    }
    // Then every node gets one, unique; those that had one keep it; the
    // same IR gets the same ids.
    std::vector<std::optional<int64_t>> named = idsOf();
    assignNodeIds(func);
    std::vector<std::optional<int64_t>> all = idsOf();
    seen.clear();
    for (auto [had, id] : llvm::zip(named, all)) {
      ASSERT_TRUE(id.has_value());
      EXPECT_TRUE(seen.insert(*id).second) << "id " << *id << " repeats";
      if (had)
        EXPECT_EQ(had, id);
    }
    assignNodeIds(func);
    EXPECT_EQ(idsOf(), all);
    EXPECT_TRUE(succeeded(TrainingGraph::fromFunction(func)));
  }
}

} // namespace

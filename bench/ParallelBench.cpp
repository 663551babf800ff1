//===- ParallelBench.cpp - FSDP and pipeline stages in simulation ---------===//
//
// lethe-parallel-bench --graph FILE.json [--mode fsdp|pipeline|all]
//
// Simulation only (no GPU): the planner's discrete-event simulator on the
// device profiles, with the step rewritten by the parallel passes.
//
// fsdp: the step in its FSDP form (lethe-insert-fsdp-collectives) at each
// world size, timed by lethe-annotate-costs on each device profile; at each
// budget (a fraction of the unplanned peak) it plans without offload
// (recompute only), plans with `auto` and simulates that plan with copies
// overlapping collectives (naive) and kept out of their windows (the rule
// lethe-schedule applies when the profile says they contend), and prints
// all-gather / reduce-scatter time, step time and peak per rank.
//
// --programs=S0.mlir,S1.mlir,...: allocated stage programs (the output of
// lethe-pipeline or lethe compile, in rank order) simulated together the
// same way, over the programs themselves (what bench/gpu_pp.sh runs on
// GPUs): per-stage and pipeline step time, printed and, with --json, saved.
//
// pipeline: every stage of the step split by lethe-expand-pipeline-schedule,
// planned with each policy at one budget for every stage (the last stage's
// unplanned peak, issue 11's target) and simulated together: a receive
// starts no earlier than its peer's send, iterated to a fixed point.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Import/JsonImporter.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"
#include "lethe/Simulator/ProgramSchedule.h"
#include "lethe/Simulator/Simulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <limits>
#include <map>

using namespace lethe;

static llvm::cl::opt<std::string> graphFile("graph",
                                            llvm::cl::desc("graph JSON"));
static llvm::cl::opt<std::string> programFiles(
    "programs",
    llvm::cl::desc("allocated stage programs (.mlir, rank order) to simulate "
                   "together instead of a graph"));
static llvm::cl::opt<std::string>
    jsonFile("json", llvm::cl::desc("with --programs: write the result here"));
static llvm::cl::opt<std::string>
    mode("mode", llvm::cl::desc("fsdp | pipeline | all"), llvm::cl::init("all"));
static llvm::cl::opt<std::string>
    worlds("worlds", llvm::cl::desc("FSDP world sizes"), llvm::cl::init("2,4,8"));
static llvm::cl::opt<std::string>
    stagesList("stages", llvm::cl::desc("pipeline depths"), llvm::cl::init("2,4"));
static llvm::cl::opt<int> microbatches("microbatches",
                                       llvm::cl::desc("micro-batches"),
                                       llvm::cl::init(8));
static llvm::cl::opt<std::string>
    pipelineDevice("pipeline-device",
                   llvm::cl::desc("device profile for the pipeline runs"),
                   llvm::cl::init("h200-nvlink"));

namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
double ms(double us) { return us / 1000.0; }
std::string signedPercent(double fraction) {
  return llvm::formatv("{0}{1:F1}%", fraction >= 0 ? "+" : "",
                       100.0 * fraction)
      .str();
}

std::vector<int> parseInts(llvm::StringRef list) {
  std::vector<int> values;
  llvm::SmallVector<llvm::StringRef> parts;
  list.split(parts, ',', -1, false);
  for (llvm::StringRef part : parts) {
    int value = 0;
    if (!part.trim().getAsInteger(10, value))
      values.push_back(value);
  }
  return values;
}

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "lethe-parallel-bench: " << message << "\n";
  std::exit(1);
}

/// Imports the graph and runs `passes` (a textual pipeline on the module).
mlir::OwningOpRef<mlir::ModuleOp> prepare(mlir::MLIRContext &context,
                                          llvm::StringRef json,
                                          llvm::StringRef passes) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importGraphJson(json, graphFile, &context);
  if (!module)
    fail("cannot import " + graphFile);
  mlir::PassManager pm(&context);
  if (mlir::failed(mlir::parsePassPipeline(passes, pm)))
    fail("bad pass pipeline: " + passes);
  if (mlir::failed(pm.run(*module)))
    fail("pipeline failed: " + passes);
  return module;
}

TrainingGraph graphOf(mlir::ModuleOp module) {
  mlir::func::FuncOp step;
  module.walk([&](mlir::func::FuncOp func) {
    if (!step && !func.isExternal())
      step = func;
  });
  mlir::FailureOr<TrainingGraph> graph = TrainingGraph::fromFunction(step);
  if (mlir::failed(graph))
    fail("cannot build the training graph");
  return std::move(*graph);
}

DeviceProfile loadDevice(llvm::StringRef name) {
  llvm::Expected<DeviceProfile> device = DeviceProfile::load(name);
  if (!device)
    fail(llvm::toString(device.takeError()));
  return std::move(*device);
}

Plan planOrDie(const TrainingGraph &graph, const DeviceProfile &device,
               const PlanOptions &options) {
  llvm::Expected<Plan> plan = planTrainingStep(graph, device, options);
  if (!plan)
    fail(llvm::toString(plan.takeError()));
  return std::move(*plan);
}

Schedule scheduleOf(const TrainingGraph &graph, const PlanOptions &options,
                    const Plan &plan) {
  ActivationAnalysis analysis(graph, options);
  llvm::Expected<Schedule> schedule = buildSchedule(analysis, plan.decisions);
  if (!schedule)
    fail(llvm::toString(schedule.takeError()));
  return std::move(*schedule);
}

SimResult simulateOrDie(const Schedule &schedule, const DeviceProfile &device,
                        const SimOptions &options = {}) {
  llvm::Expected<SimResult> result = simulate(schedule, device, options);
  if (!result)
    fail(llvm::toString(result.takeError()));
  return std::move(*result);
}

/// Collective time by kind ("all_gather", "reduce_scatter", ...), from the
/// timeline: what the comm stream spent on each.
std::map<std::string, double> collectiveTimes(const TrainingGraph &graph,
                                              const Schedule &schedule,
                                              const SimResult &result) {
  std::map<std::string, double> times;
  for (auto [index, op] : llvm::enumerate(schedule.ops)) {
    if (op.stream != Stream::Comm || op.node < 0)
      continue;
    llvm::StringRef kind = graph.getNode(op.node).kind;
    // lethe.collective.<kind> (collectiveNodeKind): the kind.
    kind.consume_front(lethe::CollectiveOp::getOperationName());
    kind.consume_front(".");
    times[kind.str()] +=
        result.timeline[index].endUs - result.timeline[index].startUs;
  }
  return times;
}

int64_t offloadedBytes(const Schedule &schedule) {
  int64_t bytes = 0;
  for (const ScheduleOp &op : schedule.ops)
    if (op.kind == ScheduleOpKind::Offload)
      bytes += op.copyBytes;
  return bytes;
}

//===----------------------------------------------------------------------===//
// FSDP
//===----------------------------------------------------------------------===//

void runFsdp(mlir::MLIRContext &context, llvm::StringRef json) {
  llvm::outs() << "\n## FSDP (lethe-insert-fsdp-collectives), per rank\n\n"
               << "Budgets are fractions of the rank's unplanned peak. "
                  "`off`: planned without offload (recompute only); "
                  "`naive`: the auto plan, copies overlap collectives; "
                  "`separate`: the same plan, every copy after the "
                  "collectives issued before it and every collective after "
                  "the copies issued before it (lethe-schedule "
                  "contention=on); `yield`: the same plan, "
                  "copies in chunks that pause while a collective runs "
                  "(the runtime's yielding copies: a chunk in flight when "
                  "a collective starts finishes beside it), with the "
                  "chunk lethe-schedule would pick (the largest from 8 MiB "
                  "down that keeps collectives within 5%); `aware`: the variant "
                  "lethe-schedule's contention=auto picks (overlap where "
                  "the profile does not contend, else the fastest step "
                  "whose collectives stay within 5% of their time without "
                  "copies). The auto plan is made under the copy model the "
                  "planner uses for the profile (yielding copies where they "
                  "contend). Rows "
                  "with offload appear only when the plan offloads. AG / RS: "
                  "all-gather / reduce-scatter time on the comm stream. "
                  "`(over)`: peak above the budget.\n\n"
               << "| profile | world | budget | variant | peak MiB | "
                  "offloaded MiB | AG ms | RS ms | exposed comm ms | step ms "
                  "| vs off |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::map<std::pair<std::string, int>, int64_t> leastFeasible;
  for (const char *profile : {"h200-nvlink", "h200-pcie"}) {
    DeviceProfile device = loadDevice(profile);
    for (int world : parseInts(worlds)) {
      std::string passes = llvm::formatv(
          "func.func(lethe-insert-fsdp-collectives{{world={0}}),"
          "lethe-annotate-costs{{device={1}}",
          world, profile);
      mlir::OwningOpRef<mlir::ModuleOp> module =
          prepare(context, json, passes);
      TrainingGraph graph = graphOf(*module);
      PlanOptions none;
      none.policy = Policy::None;
      Plan unplanned = planOrDie(graph, device, none);
      for (double fraction : {1.0, 0.65, 0.5}) {
        PlanOptions options;
        options.budgetBytes =
            static_cast<int64_t>(fraction * unplanned.peakBytes);
        PlanOptions noOffload = options;
        noOffload.minOffloadBytes = std::numeric_limits<int64_t>::max();
        Plan offPlan = planOrDie(graph, device, noOffload);
        Plan autoPlan = planOrDie(graph, device, options);
        Schedule off = scheduleOf(graph, noOffload, offPlan);
        Schedule naive = scheduleOf(graph, options, autoPlan);
        Schedule separated = separateCopiesFromCollectives(naive);
        // lethe-schedule's contention=auto choice, and the chunk size it
        // would give yielding copies.
        llvm::Expected<CopyContentionChoice> choice =
            chooseCopyContention(naive, device);
        if (!choice)
          fail(llvm::toString(choice.takeError()));
        SimOptions yieldOptions;
        yieldOptions.copiesYieldToCollectives = true;
        yieldOptions.yieldChunkBytes = choice->yieldChunkBytes;
        SimResult offSim = simulateOrDie(off, device);
        SimResult naiveSim = simulateOrDie(naive, device);
        SimResult separatedSim = simulateOrDie(separated, device);
        SimResult yieldSim = simulateOrDie(naive, device, yieldOptions);
        auto row = [&](llvm::StringRef variant, const Schedule &schedule,
                       const SimResult &sim) {
          std::map<std::string, double> coll =
              collectiveTimes(graph, schedule, sim);
          bool feasible = sim.peakBytes <= options.budgetBytes;
          llvm::outs() << llvm::formatv(
              "| {0} | {1} | {2:P0} | {3}{4} | {5:F0} | {6:F0} | {7:F2} | "
              "{8:F2} | {9:F2} | {10:F2} | {11} |\n",
              profile, world, fraction, variant, feasible ? "" : " (over)",
              mib(sim.peakBytes), mib(offloadedBytes(schedule)),
              ms(coll["all_gather"]), ms(coll["reduce_scatter"]),
              ms(sim.exposedCommUs), ms(sim.stepUs),
              signedPercent(sim.stepUs / offSim.stepUs - 1.0));
        };
        row("off", off, offSim);
        if (!autoPlan.feasible && autoPlan.leastFeasibleBudget)
          leastFeasible[{profile, world}] = *autoPlan.leastFeasibleBudget;
        if (offloadedBytes(naive) == 0)
          continue;
        row("naive", naive, naiveSim);
        row("separate", separated, separatedSim);
        row(llvm::formatv("yield ({0} KiB)", choice->yieldChunkBytes >> 10)
                .str(),
            naive, yieldSim);
        // What lethe-schedule's contention=auto runs: overlap where the
        // profile does not contend, else its simulated choice.
        CopyContention aware = copiesContendWithCollectives(device)
                                   ? choice->chosen
                                   : CopyContention::Overlap;
        std::string awareName =
            ("aware: " + stringifyCopyContention(aware)).str();
        if (aware == CopyContention::Separate)
          row(awareName, separated, separatedSim);
        else
          row(awareName, naive,
              aware == CopyContention::Yield ? yieldSim : naiveSim);
      }
    }
  }
  llvm::outs() << "\nLeast budget auto meets where a budget was over:";
  for (auto [key, bytes] : leastFeasible)
    llvm::outs() << llvm::formatv(" {0} world {1}: {2:F0} MiB;", key.first,
                                  key.second, mib(bytes));
  llvm::outs() << "\n";
}

//===----------------------------------------------------------------------===//
// Pipeline
//===----------------------------------------------------------------------===//

struct StageRun {
  TrainingGraph graph;
  Schedule schedule;
  SimResult result;
  Plan plan;
};

/// The peer transfer of a schedule op: (send?, name without the
/// "pp.send." / "pp.recv." prefix, peer), or nothing.
std::optional<std::tuple<bool, std::string, int>>
transferOf(const TrainingGraph &graph, const ScheduleOp &op) {
  if (op.node < 0 || op.kind != ScheduleOpKind::Node)
    return std::nullopt;
  auto coll = llvm::dyn_cast_or_null<CollectiveOp>(graph.getNode(op.node).irOp);
  if (!coll || !coll.isPointToPoint() || !coll.getName())
    return std::nullopt;
  llvm::StringRef name = *coll.getName();
  bool send = coll.getKind() == CollectiveKind::Send;
  if (!name.consume_front(send ? "pp.send." : "pp.recv."))
    return std::nullopt;
  return std::make_tuple(send, name.str(), static_cast<int>(*coll.getPeer()));
}

/// The transfer of op `index` of a stage's schedule, as transferOf says.
using TransferOf = std::function<std::optional<std::tuple<bool, std::string,
                                                          int>>(OpIndex)>;

/// Simulates stage schedules together: each receive starts no earlier than
/// its send, found by name and order on the pair. Fills `results`; returns
/// the number of iterations to the fixed point.
int simulateSchedules(llvm::ArrayRef<const Schedule *> schedules,
                      llvm::ArrayRef<TransferOf> transfers,
                      const DeviceProfile &device,
                      std::vector<SimResult> &results) {
  int numStages = static_cast<int>(schedules.size());
  results.resize(numStages);
  // partner[stage][op] = (other stage, other op).
  std::vector<std::map<OpIndex, std::pair<int, OpIndex>>> partner(numStages);
  std::map<std::tuple<int, int, std::string>, std::vector<OpIndex>> sends,
      recvs;
  for (int s = 0; s < numStages; ++s)
    for (OpIndex index = 0,
                 e = static_cast<OpIndex>(schedules[s]->ops.size());
         index < e; ++index)
      if (auto t = transfers[s](index)) {
        auto [send, name, peer] = *t;
        if (send)
          sends[{s, peer, name}].push_back(index);
        else
          recvs[{peer, s, name}].push_back(index);
      }
  for (auto &[key, sendOps] : sends) {
    auto [from, to, name] = key;
    std::vector<OpIndex> &recvOps = recvs[key];
    if (recvOps.size() != sendOps.size())
      fail(llvm::formatv("stage {0} sends {1} '{2}' to stage {3}, which "
                         "receives {4}",
                         from, sendOps.size(), name, to, recvOps.size()));
    // A receive starts no earlier than its send. Sends do not wait for
    // their receive: the stage's comm stream is serial here, while the
    // program issues a unit's sends and the next unit's receives as one
    // NCCL group that progresses them together.
    for (size_t k = 0; k < sendOps.size(); ++k)
      partner[to][recvOps[k]] = {from, sendOps[k]};
  }
  std::vector<SimOptions> options(numStages);
  for (int s = 0; s < numStages; ++s)
    options[s].earliestStartUs.assign(schedules[s]->ops.size(), 0.0);
  for (int iteration = 1; iteration <= 1000; ++iteration) {
    for (int s = 0; s < numStages; ++s)
      results[s] = simulateOrDie(*schedules[s], device, options[s]);
    double change = 0.0;
    for (int s = 0; s < numStages; ++s)
      for (auto [op, other] : partner[s]) {
        double start = results[other.first].timeline[other.second].startUs;
        change = std::max(change, start - options[s].earliestStartUs[op]);
        options[s].earliestStartUs[op] =
            std::max(options[s].earliestStartUs[op], start);
      }
    if (change < 1e-3)
      return iteration;
  }
  fail("the joint simulation of the stages did not converge");
}

int simulateTogether(std::vector<StageRun> &stages,
                     const DeviceProfile &device) {
  std::vector<const Schedule *> schedules;
  std::vector<TransferOf> transfers;
  for (const StageRun &run : stages) {
    schedules.push_back(&run.schedule);
    transfers.push_back([&run](OpIndex index) {
      return transferOf(run.graph, run.schedule.ops[index]);
    });
  }
  std::vector<SimResult> results;
  int iterations = simulateSchedules(schedules, transfers, device, results);
  for (auto [run, result] : llvm::zip_equal(stages, results))
    run.result = std::move(result);
  return iterations;
}

/// Micro-batch of a node (its `lethe.mb`), or -1.
int microbatchOf(const TrainingGraph &graph, NodeId node) {
  mlir::Operation *op = graph.getNode(node).irOp;
  if (!op)
    return -1;
  auto mb = lethe::LetheDialect::MbAttrHelper(op->getContext()).getAttr(op);
  return mb ? static_cast<int>(mb.getInt()) : -1;
}

struct PipelineConfig {
  int stages;
  std::string schedule;
  int vpp;
};

void runPipelineConfig(mlir::MLIRContext &context, llvm::StringRef json,
                       const DeviceProfile &device,
                       const PipelineConfig &config) {
  int numStages = config.stages;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
  std::vector<TrainingGraph> graphs;
  for (int s = 0; s < numStages; ++s) {
    std::string passes = llvm::formatv(
        "func.func(lethe-expand-pipeline-schedule{{stages={0} stage={1} "
        "microbatches={2} schedule={3} vpp={4}}),lethe-annotate-costs{{"
        "device={5}}",
        numStages, s, static_cast<int>(microbatches), config.schedule,
        config.vpp, pipelineDevice);
    modules.push_back(prepare(context, json, passes));
    graphs.push_back(graphOf(*modules.back()));
  }
  PlanOptions none;
  none.policy = Policy::None;
  std::vector<int64_t> unplannedPeak;
  for (const TrainingGraph &graph : graphs)
    unplannedPeak.push_back(planOrDie(graph, device, none).peakBytes);

  // Budgets: every stage at the last stage's unplanned peak (issue 11), and
  // every stage at 60% of its own unplanned peak.
  for (int scenario = 0; scenario < 2; ++scenario) {
    std::vector<int64_t> budgets;
    for (int64_t peak : unplannedPeak)
      budgets.push_back(scenario == 0 ? unplannedPeak.back()
                                      : static_cast<int64_t>(0.6 * peak));
    llvm::outs() << "### " << numStages << " stages, " << config.schedule;
    if (config.vpp > 1)
      llvm::outs() << " (vpp " << config.vpp << ")";
    llvm::outs() << ", budget "
                 << (scenario == 0 ? "= last stage's unplanned peak"
                                   : "= 60% of each stage's unplanned peak")
                 << ":";
    for (int64_t budget : budgets)
      llvm::outs() << llvm::formatv(" {0:F0}", mib(budget));
    llvm::outs() << " MiB\n\n| policy |";
    for (int s = 0; s < numStages; ++s)
      llvm::outs() << " stage " << s << " peak |";
    llvm::outs() << " step ms | overhead | iterations |\n|---|";
    for (int s = 0; s < numStages + 3; ++s)
      llvm::outs() << "---|";
    llvm::outs() << "\n";
    double noneStep = 0.0;
    std::string perMicrobatch;
    for (Policy policy : {Policy::None, Policy::Full, Policy::EveryN,
                          Policy::OffloadAll, Policy::Auto}) {
      std::vector<StageRun> stages;
      for (auto [s, graph] : llvm::enumerate(graphs)) {
        PlanOptions options;
        options.policy = policy;
        options.budgetBytes = budgets[s];
        StageRun run{std::move(graph), {}, {}, {}};
        run.plan = planOrDie(run.graph, device, options);
        run.schedule = scheduleOf(run.graph, options, run.plan);
        stages.push_back(std::move(run));
      }
      int iterations = simulateTogether(stages, device);
      double step = 0.0;
      for (const StageRun &run : stages)
        step = std::max(step, run.result.stepUs);
      if (policy == Policy::None)
        noneStep = step;
      llvm::outs() << "| " << stringifyPolicy(policy) << " |";
      for (auto [s, run] : llvm::enumerate(stages))
        llvm::outs() << llvm::formatv(" {0:F0}{1} |", mib(run.result.peakBytes),
                                      run.result.peakBytes > budgets[s] ? "*"
                                                                        : "");
      llvm::outs() << llvm::formatv(" {0:F2} | {1} | {2} |\n", ms(step),
                                    signedPercent(step / noneStep - 1.0),
                                    iterations);
      if (policy == Policy::Auto) {
        // Stage 0's decisions per micro-batch: offloaded / recomputed MiB.
        const StageRun &first = stages.front();
        std::map<int, std::pair<int64_t, int64_t>> byMicrobatch;
        ActivationAnalysis analysis(first.graph, PlanOptions());
        for (const ActivationDecision &d : first.plan.decisions) {
          int32_t a = analysis.activationIndex(d.value);
          if (a < 0 || d.decision == Decision::Retain)
            continue;
          const ActivationInfo &act = analysis.getActivations()[a];
          auto &entry = byMicrobatch[microbatchOf(first.graph, act.producer)];
          (d.decision == Decision::Offload ? entry.first : entry.second) +=
              act.bytes;
        }
        llvm::raw_string_ostream os(perMicrobatch);
        os << "auto on stage 0, per micro-batch (offloaded / recomputed "
              "MiB):";
        for (auto [mb, bytes] : byMicrobatch)
          os << llvm::formatv(" mb{0} {1:F0} / {2:F0};", mb, mib(bytes.first),
                              mib(bytes.second));
      }
      graphs.clear();
      for (StageRun &run : stages)
        graphs.push_back(std::move(run.graph));
    }
    llvm::outs() << "\n" << perMicrobatch << "\n\n";
  }
  llvm::outs() << "Unplanned peaks:";
  for (int64_t peak : unplannedPeak)
    llvm::outs() << llvm::formatv(" {0:F0}", mib(peak));
  llvm::outs() << " MiB\n\n";
}

void runPipeline(mlir::MLIRContext &context, llvm::StringRef json) {
  DeviceProfile device = loadDevice(pipelineDevice);
  llvm::outs() << "\n## Pipeline stages (lethe-expand-pipeline-schedule, M = "
               << microbatches << ", profile " << pipelineDevice << ")\n\n"
               << "Peaks per stage in MiB (`*`: over the stage's budget); "
                  "step: the pipeline's step time, all stages simulated "
                  "together (a receive starts no earlier than its send); "
                  "overhead against `none`.\n\n";
  std::vector<PipelineConfig> configs;
  for (int numStages : parseInts(stagesList))
    configs.push_back({numStages, "1f1b", 1});
  configs.push_back({2, "interleaved", 2});
  for (const PipelineConfig &config : configs)
    runPipelineConfig(context, json, device, config);
}

//===----------------------------------------------------------------------===//
// Allocated stage programs
//===----------------------------------------------------------------------===//

/// The transfer of a program op: a point-to-point collective named
/// pp.send.* / pp.recv.* by lethe-expand-pipeline-schedule.
std::optional<std::tuple<bool, std::string, int>>
programTransferOf(mlir::Operation *op) {
  auto coll = llvm::dyn_cast_or_null<CollectiveOp>(op);
  if (!coll || !coll.isPointToPoint() || !coll.getName())
    return std::nullopt;
  llvm::StringRef name = *coll.getName();
  bool send = coll.getKind() == CollectiveKind::Send;
  if (!name.consume_front(send ? "pp.send." : "pp.recv."))
    return std::nullopt;
  return std::make_tuple(send, name.str(), static_cast<int>(*coll.getPeer()));
}

void runPrograms(mlir::MLIRContext &context) {
  const DeviceProfile loaded = loadDevice(pipelineDevice);
  DeviceProfile device = loaded;
  llvm::SmallVector<llvm::StringRef> paths;
  llvm::StringRef(programFiles).split(paths, ',', -1, false);
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
  std::vector<ProgramSchedule> programs;
  for (llvm::StringRef path : paths) {
    modules.push_back(mlir::parseSourceFile<mlir::ModuleOp>(path, &context));
    if (!modules.back())
      fail("cannot parse " + path);
    mlir::func::FuncOp step;
    modules.back()->walk([&](mlir::func::FuncOp func) {
      if (!step && !func.isExternal())
        step = func;
    });
    if (!step)
      fail(path + " has no function");
    // The stages share the host as their functions say
    // (lethe.ranks_per_host, recorded by lethe-expand-pipeline-schedule).
    DeviceProfile stageDevice = deviceForFunction(loaded, step);
    if (modules.size() > 1 && stageDevice.ranksPerHost != device.ranksPerHost)
      fail(path + " has another lethe.ranks_per_host than the first stage");
    device = stageDevice;
    mlir::FailureOr<ProgramSchedule> program = buildProgramSchedule(step);
    if (mlir::failed(program))
      fail("cannot simulate " + path);
    programs.push_back(std::move(*program));
  }
  std::vector<const Schedule *> schedules;
  std::vector<TransferOf> transfers;
  std::vector<SimResult> alone;
  for (const ProgramSchedule &program : programs) {
    schedules.push_back(&program.schedule);
    transfers.push_back([&program](OpIndex index) {
      return programTransferOf(program.irOps[index]);
    });
    alone.push_back(simulateOrDie(program.schedule, device));
  }
  std::vector<SimResult> results;
  int iterations = simulateSchedules(schedules, transfers, device, results);
  double step = 0.0;
  for (const SimResult &result : results)
    step = std::max(step, result.stepUs);
  llvm::outs() << "| stage | program | alone step ms | together step ms | "
                  "peak MiB |\n|---|---|---|---|---|\n";
  for (auto [s, path] : llvm::enumerate(paths))
    llvm::outs() << llvm::formatv("| {0} | {1} | {2:F2} | {3:F2} | {4:F0} |\n",
                                  s, path, ms(alone[s].stepUs),
                                  ms(results[s].stepUs),
                                  mib(results[s].peakBytes));
  llvm::outs() << llvm::formatv(
      "\nPipeline step {0:F2} ms ({1} iterations, profile {2}).\n", ms(step),
      iterations, pipelineDevice);
  if (jsonFile.empty())
    return;
  std::error_code error;
  llvm::raw_fd_ostream out(jsonFile, error);
  if (error)
    fail("cannot write " + jsonFile + ": " + error.message());
  out << llvm::formatv("{{\"device\": \"{0}\", \"step_us\": {1:F3}, "
                       "\"iterations\": {2}, \"stages\": [",
                       pipelineDevice, step, iterations);
  for (size_t s = 0; s < results.size(); ++s)
    out << llvm::formatv("{0}{{\"program\": \"{1}\", \"alone_step_us\": "
                         "{2:F3}, \"step_us\": {3:F3}, \"peak_bytes\": {4}}",
                         s ? ", " : "", paths[s], alone[s].stepUs,
                         results[s].stepUs, results[s].peakBytes);
  out << "]}\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv, "Lethe parallel benchmark\n");
  mlir::DialectRegistry registry;
  registry.insert<LetheDialect, mlir::func::FuncDialect>();
  registerLethePasses();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Remarks of the passes (padding, splits) are not benchmark output.
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Remark)
      return mlir::success();
    return mlir::failure();
  });
  if (!programFiles.empty()) {
    runPrograms(context);
    return 0;
  }
  if (graphFile.empty())
    fail("give --graph FILE.json or --programs S0.mlir,S1.mlir,...");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(graphFile);
  if (!buffer)
    fail("cannot read " + graphFile);
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  llvm::outs() << "# lethe-parallel-bench (simulation) on " << graphFile << ", "
               << date << "\n";
  auto started = std::chrono::steady_clock::now();
  if (mode == "fsdp" || mode == "all")
    runFsdp(context, (*buffer)->getBuffer());
  if (mode == "pipeline" || mode == "all")
    runPipeline(context, (*buffer)->getBuffer());
  llvm::outs() << llvm::formatv(
      "\nWall time {0:F1} s.\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count());
  return 0;
}

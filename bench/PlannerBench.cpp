//===- PlannerBench.cpp - Plan quality and solve time of every policy -----===//
//
// lethe-planner-bench [--graph FILE.json]... [--random N] [--budgets a,b,..]
//                     [--csv FILE]
// For each graph and budget (a fraction of the unplanned peak) it plans with
// auto, every fixed policy and the knapsack baselines, simulates each plan
// on the device profile and prints peak, overhead and solve time.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Import/JsonImporter.h"
#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Evaluator.h"
#include "lethe/Planner/Knapsack.h"
#include "lethe/Planner/Placement.h"
#include "lethe/Planner/Planner.h"
#include "lethe/Planner/Policies.h"

#include "../unittests/Planner/RandomGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <ctime>
#include <map>

using namespace lethe;

static llvm::cl::list<std::string> graphFiles("graph",
                                              llvm::cl::desc("graph JSON"));
static llvm::cl::opt<unsigned>
    numRandom("random", llvm::cl::desc("random graphs"), llvm::cl::init(0));
static llvm::cl::opt<unsigned>
    randomLayers("random-layers",
                 llvm::cl::desc("layers of the random graphs (0: 2-8)"),
                 llvm::cl::init(0));
static llvm::cl::opt<std::string>
    budgetList("budgets", llvm::cl::desc("budget fractions"),
               llvm::cl::init("0.3,0.4,0.5,0.6,0.7,0.8,0.9"));
static llvm::cl::opt<std::string> csvFile("csv", llvm::cl::desc("CSV output"),
                                          llvm::cl::init(""));
static llvm::cl::opt<bool>
    explain("explain",
            llvm::cl::desc("print what may be recomputed and why not"));
static llvm::cl::opt<bool> evalTiming(
    "eval-timing",
    llvm::cl::desc("time placement, schedule building and simulation of one "
                   "plan (every 3rd activation recomputed, every 7th "
                   "offloaded) per graph, and exit"));
static llvm::cl::opt<bool> showDecisions(
    "show-decisions",
    llvm::cl::desc("print every plan's non-retain decisions and placements"));
static llvm::cl::opt<unsigned>
    repeat("repeat",
           llvm::cl::desc("plan this many times, report the least solve time"),
           llvm::cl::init(1));
static llvm::cl::opt<double> exactTimeLimit(
    "exact-time-limit",
    llvm::cl::desc("time limit of the exact solver (policy `exact`), s"),
    llvm::cl::init(30.0));
static llvm::cl::opt<std::string>
    policyList("policies",
               llvm::cl::desc("policies to run (`exact`: auto with the exact "
                              "MILP solver; not in the default list)"),
               llvm::cl::init("auto,full,every-n,selective-op,"
                              "selective-op-offload,offload-all,"
                              "knapsack-greedy,knapsack-dp"));

/// Imports a graph JSON (graphs/SCHEMA.md) as lethe-translate does and
/// builds its TrainingGraph.
static llvm::Expected<TrainingGraph> loadJsonGraph(llvm::StringRef path,
                                                   mlir::MLIRContext &context) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read %s",
                                   path.str().c_str());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importGraphJson((*buffer)->getBuffer(), path, &context);
  if (!module)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot import %s", path.str().c_str());
  auto func = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::FailureOr<TrainingGraph> graph = TrainingGraph::fromFunction(func);
  if (mlir::failed(graph))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s is not a training graph",
                                   path.str().c_str());
  // The graph keeps pointers into the module; the bench only needs the
  // index data, so the module may go.
  return std::move(*graph);
}

static llvm::cl::opt<std::string>
    deviceName("device", llvm::cl::desc("device profile (name or JSON path)"),
               llvm::cl::init("h200"));

struct Row {
  std::string graph, policy;
  double fraction;
  int64_t budget, peak;
  bool feasible;
  double stepUs, baseStepUs, solveMs;
  /// Exact solver: the MILP gap (0 when proven optimal), else negative.
  double exactGap = -1.0;
  size_t nodes = 0;
};

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv, "Lethe planner benchmark\n");
  std::vector<std::pair<std::string, TrainingGraph>> graphs;
  mlir::MLIRContext context;
  for (const std::string &file : graphFiles) {
    llvm::Expected<TrainingGraph> g = loadJsonGraph(file, context);
    if (!g) {
      llvm::errs() << file << ": " << llvm::toString(g.takeError()) << "\n";
      return 1;
    }
    graphs.emplace_back(llvm::sys::path::filename(file).str(), std::move(*g));
  }
  for (unsigned i = 0; i < numRandom; ++i) {
    lethe::testing::RandomGraphOptions opts;
    if (randomLayers) {
      opts.minLayers = opts.maxLayers = randomLayers;
    }
    graphs.emplace_back(llvm::formatv("random-{0}", i).str(),
                        lethe::testing::randomLayeredGraph(1000 + i, opts));
  }
  std::vector<double> fractions;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(budgetList).split(parts, ',');
  for (llvm::StringRef p : parts)
    fractions.push_back(std::stod(p.str()));
  llvm::SmallVector<llvm::StringRef> policies;
  llvm::StringRef(policyList).split(policies, ',');
  llvm::Expected<DeviceProfile> loaded = DeviceProfile::load(deviceName);
  if (!loaded) {
    llvm::errs() << llvm::toString(loaded.takeError()) << "\n";
    return 1;
  }
  DeviceProfile device = std::move(*loaded);

  if (evalTiming) {
    for (auto &entry : graphs) {
      PlanOptions po;
      ActivationAnalysis analysis(entry.second, po);
      std::vector<Decision> dec(analysis.getActivations().size(),
                                Decision::Retain);
      for (size_t a = 0; a < dec.size(); ++a) {
        const ActivationInfo &act = analysis.getActivations()[a];
        if (a % 3 == 0 && act.recomputable)
          dec[a] = Decision::Recompute;
        else if (a % 7 == 1 && act.offloadable)
          dec[a] = Decision::Offload;
      }
      double t[3] = {0, 0, 0};
      const int runs = 20;
      size_t numOps = 0;
      for (int r = 0; r < runs; ++r) {
        std::clock_t c0 = std::clock();
        llvm::Expected<Placement> p = placeDecisions(analysis, device, dec);
        std::clock_t c1 = std::clock();
        llvm::Expected<Schedule> sch = buildSchedule(analysis, p->decisions);
        std::clock_t c2 = std::clock();
        SimOptions so;
        so.recordTimeline = false;
        llvm::Expected<SimResult> sim = simulate(*sch, device, so);
        std::clock_t c3 = std::clock();
        if (!sim)
          llvm::consumeError(sim.takeError());
        numOps = sch->ops.size();
        t[0] += c1 - c0;
        t[1] += c2 - c1;
        t[2] += c3 - c2;
      }
      double ms = 1000.0 / CLOCKS_PER_SEC / runs;
      llvm::outs() << llvm::formatv(
          "{0}: {1} nodes, {2} ops: place {3:F2} ms, build {4:F2} ms, "
          "simulate {5:F2} ms\n",
          entry.first, entry.second.numNodes(), numOps, t[0] * ms, t[1] * ms,
          t[2] * ms);
    }
    return 0;
  }

  std::vector<Row> rows;
  for (auto &entry : graphs) {
    const std::string &name = entry.first;
    TrainingGraph &g = entry.second;
    PlanOptions base;
    base.policy = Policy::None;
    llvm::Expected<Plan> none = planTrainingStep(g, device, base);
    if (!none) {
      llvm::errs() << name << ": " << llvm::toString(none.takeError()) << "\n";
      return 1;
    }
    llvm::outs() << llvm::formatv(
        "== {0}: {1} nodes, unplanned peak {2:F3} GB, step {3:F2} ms\n", name,
        g.numNodes(), none->peakBytes / 1e9, none->stepUs / 1e3);
    if (explain) {
      PlanOptions o;
      ActivationAnalysis analysis(g, o);
      std::map<std::string, std::pair<int, int64_t>> reasons;
      for (const ActivationInfo &a : analysis.getActivations()) {
        auto &e =
            reasons[a.recomputable ? std::string("recomputable")
                                   : a.notRecomputableReason.substr(0, 60)];
        e.first++;
        e.second += a.bytes;
      }
      size_t total = 0, maxLen = 0, n = 0;
      for (const ActivationInfo &a : analysis.getActivations())
        if (a.recomputable) {
          total += a.recomputeNodes.size();
          maxLen = std::max(maxLen, a.recomputeNodes.size());
          ++n;
        }
      llvm::outs() << "  chain length avg " << (n ? double(total) / n : 0)
                   << " max " << maxLen << "\n";
      for (auto &[k, v] : reasons)
        llvm::outs() << "  " << k << ": " << v.first << " (" << v.second / 1e6
                     << " MB)\n";
    }
    llvm::outs() << llvm::formatv("{0,-22} {1,6} {2,9} {3,9} {4,10} {5,9}\n",
                                  "policy", "budget", "feasible", "peak%",
                                  "overhead%", "solve ms");
    for (double f : fractions) {
      int64_t budget = static_cast<int64_t>(f * none->peakBytes);
      for (llvm::StringRef policy : policies) {
        PlanOptions options;
        options.budgetBytes = budget;
        Row row{name, policy.str(), f, budget, 0, false, 0, none->stepUs, 0};
        auto once = [&]() -> llvm::Expected<Plan> {
          if (policy.starts_with("knapsack")) {
            KnapsackOptions ko;
            ko.solver = policy == "knapsack-dp" ? KnapsackSolver::DP
                                                : KnapsackSolver::Greedy;
            return planKnapsack(g, device, options, ko);
          }
          if (policy == "exact") {
            options.policy = Policy::Auto;
            options.solver = SolverKind::Exact;
            options.exactTimeLimitSec = exactTimeLimit;
            return planTrainingStep(g, device, options);
          }
          if (policy == "selective-op-offload") {
            options.policy = Policy::SelectiveOp;
            options.offloadKept = true;
          } else {
            options.policy = *parsePolicy(policy);
          }
          return planTrainingStep(g, device, options);
        };
        // CPU time of the solve: the machine may be shared.
        auto timed = [&]() -> llvm::Expected<Plan> {
          std::clock_t c0 = std::clock();
          llvm::Expected<Plan> p = once();
          if (p)
            p->solveMs = 1000.0 * (std::clock() - c0) / CLOCKS_PER_SEC;
          return p;
        };
        llvm::Expected<Plan> plan = timed();
        for (unsigned r = 1; r < repeat && plan; ++r) {
          llvm::Expected<Plan> again = timed();
          if (!again) {
            plan = again.takeError();
            break;
          }
          again->solveMs = std::min(again->solveMs, plan->solveMs);
          plan = std::move(again);
        }
        if (!plan && policy == "exact") {
          // Beyond the exact solver's size limits: report and go on.
          llvm::outs() << llvm::formatv("{0,-22} {1,5:F0}%  skipped: {2}\n",
                                        policy, f * 100,
                                        llvm::toString(plan.takeError()));
          continue;
        }
        if (!plan) {
          llvm::errs() << name << " " << policy << ": "
                       << llvm::toString(plan.takeError()) << "\n";
          return 1;
        }
        if (showDecisions) {
          for (const ActivationDecision &d : plan->decisions)
            if (d.decision != Decision::Retain)
              llvm::outs() << llvm::formatv(
                  "    %{0} {1} bytes {2} restore {3} release {4} prefetch "
                  "{5} nodes {6}\n",
                  d.value, stringifyDecision(d.decision),
                  g.storageBytes(d.value), d.firstBackwardUse, d.releaseAfter,
                  d.prefetchAfter, d.recomputeNodes.size());
        }
        row.peak = plan->peakBytes;
        row.feasible = plan->peakBytes <= budget;
        row.stepUs = plan->stepUs;
        row.solveMs = plan->solveMs;
        std::string note;
        if (plan->exactReport) {
          row.exactGap = plan->exactReport->gap;
          note = plan->exactReport->provenOptimal
                     ? "optimal"
                     : llvm::formatv("gap {0:F2}%", 100 * row.exactGap).str();
          note +=
              llvm::formatv(" ({0} rows, {1} columns, {2} integer)",
                            plan->exactReport->rows, plan->exactReport->columns,
                            plan->exactReport->integerColumns)
                  .str();
        }
        row.nodes = g.numNodes();
        rows.push_back(row);
        llvm::outs() << llvm::formatv(
            "{0,-22} {1,5:F0}% {2,9} {3,8:F1}% {4,9:F2}% {5,9:F1} {6}\n",
            policy, f * 100, row.feasible ? "yes" : "NO",
            100.0 * row.peak / none->peakBytes,
            100.0 * (row.stepUs / row.baseStepUs - 1.0), row.solveMs, note);
      }
    }
  }
  if (!csvFile.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(csvFile, ec);
    os << "graph,policy,fraction,budget_bytes,peak_bytes,feasible,step_us,"
          "baseline_step_us,solve_ms,exact_gap,nodes\n";
    for (const Row &r : rows)
      os << llvm::formatv(
          "{0},{1},{2},{3},{4},{5},{6:F3},{7:F3},{8:F3},{9},{10}\n", r.graph,
          r.policy, r.fraction, r.budget, r.peak, r.feasible ? 1 : 0, r.stepUs,
          r.baseStepUs, r.solveMs,
          r.exactGap < 0 ? std::string()
                         : llvm::formatv("{0:F6}", r.exactGap).str(),
          r.nodes);
  }
  return 0;
}

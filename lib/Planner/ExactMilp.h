//===- ExactMilp.h - The exact model as a MILP ------------------*- C++ -*-===//
//
// Builds the mixed-integer program of docs/ExactSolver.md §3 from an
// ExactModel and reads plans back from its solutions.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_EXACTMILP_H
#define LETHE_LIB_PLANNER_EXACTMILP_H

#include "Milp.h"

#include "lethe/Planner/ExactModel.h"

#include <map>

namespace lethe {

class ExactMilp {
public:
  enum class Goal {
    /// Least step time with every point within `budgetBytes`.
    MinTime,
    /// Least peak (the least feasible budget); `budgetBytes` is ignored.
    MinPeak,
  };

  ExactMilp(const ExactModel &model, Goal goal, int64_t budgetBytes);

  const milp::Problem &getProblem() const { return problem; }
  int numIntegerColumns() const;
  /// What the objective leaves out: MinTime minimises the step time minus
  /// this constant (the forward part and the backward nodes' own times).
  double objectiveOffset() const { return offset; }

  /// Values of the integer columns for a valid plan of the model (a MIP
  /// start): `decisions` as made by ExactModel::makeDecisions and `eval`
  /// its evaluation.
  std::vector<double>
  encode(llvm::ArrayRef<ActivationDecision> decisions,
         const ExactModel::Evaluation &eval) const;

  /// Reads the per-activation choices and prefetch placements from a
  /// solution.
  void decode(const std::vector<double> &values, std::vector<Decision> &choice,
              std::vector<NodeId> &prefetchAfter) const;

private:
  using Expr = std::vector<std::pair<int, double>>;
  enum Kind { Recompute = 0, Offload = 1 };

  int binary() { return problem.addColumn(0.0, 1.0, 0.0, true); }
  int continuous(double lower, double upper, double cost = 0.0) {
    return problem.addColumn(lower, upper, cost, false);
  }
  static void add(Expr &expr, int column, double coef) {
    if (column >= 0)
      expr.push_back({column, coef});
  }
  /// Column "activation `act` restored by `kind` at a point <= `node`"
  /// (-1: not possible).
  int restoredBy(int act, Kind kind, NodeId node) const;
  /// Adds coef * (restored by `kind` exactly at `point`).
  void addRestoredAt(Expr &expr, int act, Kind kind, NodeId point,
                     double coef) const;
  /// Adds coef * (restored by `kind` at the point (segment before `node`,
  /// or `node`) or later).
  void addRestoredFrom(Expr &expr, int act, Kind kind, NodeId node,
                       bool segment, double coef) const;
  /// Column "prefetch of `act` issued by the end of node `after`" (the
  /// offload column from its first backward use - 1 on, -1 before the
  /// backward part).
  int issuedBy(int act, NodeId after) const;
  int inFlightAt(int act, int point) const;
  /// Column: node `node` runs in the chain before `point` (-1: never).
  int chainColumn(NodeId node, NodeId point) const;

  void buildDecisions();
  void buildRestores();
  void buildPrefetchIssue();
  void buildD2H();
  void buildWindows();
  void buildMemory();

  const ExactModel &model;
  Goal goal;
  double budgetMiB;
  milp::Problem problem;
  double offset = 0.0;

  std::vector<int> retainCol, recomputeCol, offloadCol;
  /// Per activation and kind, one column per restore point.
  std::vector<std::vector<int>> restoreCol[2];
  /// Per activation, G columns for prefetchAfter = firstBackward()-1 ..
  /// firstBackwardUse-2.
  std::vector<std::vector<int>> issueCol;
  std::vector<int> d2hDoneCol;
  std::vector<int> inFlightFirst;
  std::vector<std::vector<int>> inFlight;
  /// (node, point) -> chain column.
  std::map<std::pair<NodeId, NodeId>, int> chainCol;
  int peakCol = -1;
};

} // namespace lethe

#endif // LETHE_LIB_PLANNER_EXACTMILP_H

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
  /// What the objective leaves out: MinTime minimises the step time minus
  /// this constant (the forward part and the backward nodes' own times).
  double objectiveOffset() const { return offset; }
  int numIntegerColumns() const;

  /// Reads the per-activation choices and prefetch placements from a
  /// solution.
  void decode(const std::vector<double> &values, std::vector<Decision> &choice,
              std::vector<NodeId> &prefetchAfter) const;

private:
  using Expr = std::vector<std::pair<int, double>>;

  int binary(double cost = 0.0, double upper = 1.0);
  int continuous(double lower, double upper, double cost = 0.0);
  static void add(Expr &expr, int column, double coef) {
    if (column >= 0)
      expr.push_back({column, coef});
  }
  /// W column of `node` at its last re-run point <= `point` (-1: none).
  int doneBy(NodeId node, NodeId point) const;
  int lastRerun(NodeId node) const;
  /// Adds coef * (node re-run exactly before `point`).
  void addCreated(Expr &expr, NodeId node, NodeId point, double coef) const;
  /// Adds coef * (node re-run at a point after the slot preceding `point`
  /// (segment) or after `point` itself (node)).
  void addNeed(Expr &expr, NodeId node, NodeId at, bool segment,
               double coef) const;
  /// Whether `node` may still re-run at or after the given slot.
  bool mayNeed(NodeId node, NodeId at, bool segment) const;
  /// G column: prefetch of activation `act` issued by the end of node
  /// `after` (o_a beyond its range, -1 before it).
  int issuedBy(int act, NodeId after) const;

  void buildDecisions();
  void buildRecompute();
  void buildPrefetchPlacement();
  void buildD2H();
  void buildWindows();
  void buildMemory();
  /// The in-flight column of activation `act` at point `point` (-1: the
  /// copy cannot be running there).
  int inFlightAt(int act, int point) const;

  const ExactModel &model;
  Goal goal;
  double budgetMiB;
  milp::Problem problem;

  std::vector<int> retainCol, recomputeCol, offloadCol;
  /// Per node, one column per entry of rerunPoints(node).
  std::vector<std::vector<int>> rerunCol;
  /// Per activation, G columns for prefetchAfter = firstBackward()-1 ..
  /// firstBackwardUse-2.
  std::vector<std::vector<int>> issueCol;
  std::vector<int> d2hDoneCol;
  std::vector<double> d2hLatest;
  std::vector<int> inFlightFirst;
  std::vector<std::vector<int>> inFlight;
  int peakCol = -1;
  double offset = 0.0;
};

} // namespace lethe

#endif // LETHE_LIB_PLANNER_EXACTMILP_H

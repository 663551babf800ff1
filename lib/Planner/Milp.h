//===- Milp.h - A mixed-integer program and its solver ----------*- C++ -*-===//
//
// A plain container for a MILP (minimise c·x subject to row bounds, column
// bounds and integrality) and the calls that solve it with COIN-OR: CBC for
// the MILP, CLP for a linear program. COIN throws C++ exceptions, and LLVM
// code is built without them, so the only file that includes COIN
// (CbcBackend.cpp) is compiled with exceptions and turns every failure into
// a Result.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_MILP_H
#define LETHE_LIB_PLANNER_MILP_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lethe::milp {

struct Problem {
  std::vector<double> colLower, colUpper, objective;
  std::vector<bool> isInteger;
  /// Rows, stored row by row.
  std::vector<double> rowLower, rowUpper;
  std::vector<int> rowStart{0};
  std::vector<int> rowIndex;
  std::vector<double> rowValue;

  int addColumn(double lower, double upper, double cost, bool integer) {
    colLower.push_back(lower);
    colUpper.push_back(upper);
    objective.push_back(cost);
    isInteger.push_back(integer);
    return static_cast<int>(colLower.size()) - 1;
  }
  /// Adds lower <= sum(coef * x[col]) <= upper; terms on the same column
  /// are merged.
  void addRow(double lower, double upper,
              std::vector<std::pair<int, double>> terms);
  int numColumns() const { return static_cast<int>(colLower.size()); }
  int numRows() const { return static_cast<int>(rowLower.size()); }
};

struct Options {
  double timeLimitSec = 30.0;
  int seed = 1;
  /// Optional starting solution (values of the integer columns are used).
  std::vector<double> start;
};

struct Result {
  enum class Status {
    Optimal,    // proven optimal within CBC's tolerances
    Feasible,   // a solution, search stopped by a limit
    Infeasible, // proven infeasible
    Unknown,    // stopped by a limit without a solution
    Error,      // CBC failed; see `error`
  };
  Status status = Status::Error;
  std::vector<double> values;
  double objective = 0.0;
  /// Best lower bound CBC proved (equals `objective` when optimal).
  double bound = 0.0;
  int64_t nodes = 0;
  bool hitTimeLimit = false;
  std::string error;
};

Result solve(const Problem &problem, const Options &options);

/// Solves `problem` as a linear program (integrality ignored) with COIN-OR
/// CLP, within `timeLimitSec` of simplex time. `bound` is the objective
/// when optimal.
Result solveLp(const Problem &problem, double timeLimitSec);

} // namespace lethe::milp

#endif // LETHE_LIB_PLANNER_MILP_H

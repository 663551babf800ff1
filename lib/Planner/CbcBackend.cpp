//===- CbcBackend.cpp - Solve a MILP with COIN-OR CBC, an LP with CLP -----===//
//
// The only translation unit that calls COIN-OR (CBC for the exact solver's
// MILP, CLP for the lower bound's LP). It is compiled with exceptions (COIN
// reports errors by throwing CoinError) and lets none escape.
//
//===----------------------------------------------------------------------===//

#include "Milp.h"

#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>
#include <coin/CoinError.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>

using namespace lethe::milp;

void Problem::addRow(double lower, double upper,
                     std::vector<std::pair<int, double>> terms) {
  std::sort(terms.begin(), terms.end());
  for (size_t i = 0; i < terms.size(); ++i) {
    double value = terms[i].second;
    while (i + 1 < terms.size() && terms[i + 1].first == terms[i].first)
      value += terms[++i].second;
    if (value == 0.0)
      continue;
    rowIndex.push_back(terms[i].first);
    rowValue.push_back(value);
  }
  rowLower.push_back(lower);
  rowUpper.push_back(upper);
  rowStart.push_back(static_cast<int>(rowIndex.size()));
}

namespace {
struct ModelDeleter {
  void operator()(Cbc_Model *model) const { Cbc_deleteModel(model); }
};
} // namespace

namespace {
/// The problem's row-major matrix column by column, as CBC and CLP take it.
struct ColumnMajor {
  std::vector<CoinBigIndex> colStart;
  std::vector<int> rowOf;
  std::vector<double> valueOf;

  explicit ColumnMajor(const Problem &problem)
      : colStart(problem.numColumns() + 1, 0),
        rowOf(problem.rowIndex.size()), valueOf(problem.rowIndex.size()) {
    const int numCols = problem.numColumns();
    for (int index : problem.rowIndex)
      ++colStart[index + 1];
    for (int c = 0; c < numCols; ++c)
      colStart[c + 1] += colStart[c];
    std::vector<CoinBigIndex> fill(colStart.begin(), colStart.end() - 1);
    for (int r = 0; r < problem.numRows(); ++r)
      for (int k = problem.rowStart[r]; k < problem.rowStart[r + 1]; ++k) {
        CoinBigIndex at = fill[problem.rowIndex[k]]++;
        rowOf[at] = r;
        valueOf[at] = problem.rowValue[k];
      }
  }
};
} // namespace

static Result solveOrThrow(const Problem &problem, const Options &options) {
  const int numCols = problem.numColumns();
  const int numRows = problem.numRows();
  ColumnMajor matrix(problem);

  std::unique_ptr<Cbc_Model, ModelDeleter> model(Cbc_newModel());
  Cbc_loadProblem(model.get(), numCols, numRows, matrix.colStart.data(),
                  matrix.rowOf.data(), matrix.valueOf.data(),
                  problem.colLower.data(),
                  problem.colUpper.data(), problem.objective.data(),
                  problem.rowLower.data(), problem.rowUpper.data());
  std::vector<int> startCols;
  std::vector<double> startValues;
  for (int c = 0; c < numCols; ++c) {
    if (!problem.isInteger[c])
      continue;
    Cbc_setInteger(model.get(), c);
    // Every integer value, zeros included: CBC leaves unnamed ones free.
    if (!options.start.empty()) {
      startCols.push_back(c);
      startValues.push_back(options.start[c]);
    }
  }
  if (!options.start.empty())
    Cbc_setMIPStartI(model.get(), static_cast<int>(startCols.size()),
                     startCols.data(), startValues.data());
  // Deterministic: one thread, fixed seeds; quiet.
  std::string seed = std::to_string(options.seed);
  const char *log = std::getenv("LETHE_CBC_LOG") ? "1" : "0";
  Cbc_setParameter(model.get(), "log", log);
  Cbc_setParameter(model.get(), "slog", log);
  Cbc_setParameter(model.get(), "threads", "0");
  Cbc_setParameter(model.get(), "timeMode", "elapsed");
  Cbc_setParameter(model.get(), "randomSeed", seed.c_str());
  Cbc_setParameter(model.get(), "randomCbcSeed", seed.c_str());
  // CBC 2.10's preprocessing crashes in CglPreProcess::postProcess when
  // some searches stop at the time limit; the model is already tight.
  Cbc_setParameter(model.get(), "preprocess", "off");
  Cbc_setParameter(model.get(), "ratioGap", "0");
  Cbc_setParameter(model.get(), "allowableGap", "1e-9");
  Cbc_setMaximumSeconds(model.get(), std::max(0.01, options.timeLimitSec));
  Cbc_setLogLevel(model.get(), std::getenv("LETHE_CBC_LOG") ? 1 : 0);

  Cbc_solve(model.get());

  Result result;
  result.nodes = Cbc_getNodeCount(model.get());
  result.hitTimeLimit = Cbc_isSecondsLimitReached(model.get());
  int status = Cbc_status(model.get());
  bool haveSolution = Cbc_bestSolution(model.get()) != nullptr &&
                      Cbc_numberSavedSolutions(model.get()) > 0;
  if (Cbc_isProvenOptimal(model.get()))
    result.status = Result::Status::Optimal;
  else if (Cbc_isProvenInfeasible(model.get()))
    result.status = Result::Status::Infeasible;
  else if (status == 2 || Cbc_isAbandoned(model.get())) {
    result.status = Result::Status::Error;
    result.error = "CBC abandoned the search (numerical difficulties)";
  } else
    result.status =
        haveSolution ? Result::Status::Feasible : Result::Status::Unknown;
  if (haveSolution || result.status == Result::Status::Optimal) {
    const double *x = Cbc_getColSolution(model.get());
    result.values.assign(x, x + numCols);
    result.objective = Cbc_getObjValue(model.get());
    result.bound = Cbc_getBestPossibleObjValue(model.get());
    if (result.status == Result::Status::Optimal)
      result.bound = std::min(result.bound, result.objective);
  }
  return result;
}

Result lethe::milp::solve(const Problem &problem, const Options &options) {
  try {
    return solveOrThrow(problem, options);
  } catch (const CoinError &error) {
    Result result;
    result.error = "CBC: " + error.className() + "::" + error.methodName() +
                   ": " + error.message();
    return result;
  } catch (const std::exception &error) {
    Result result;
    result.error = std::string("CBC: ") + error.what();
    return result;
  } catch (...) {
    Result result;
    result.error = "CBC: unknown exception";
    return result;
  }
}

namespace {
struct ClpDeleter {
  void operator()(Clp_Simplex *model) const { Clp_deleteModel(model); }
};
} // namespace

static Result solveLpOrThrow(const Problem &problem, double timeLimitSec) {
  const int numCols = problem.numColumns();
  const int numRows = problem.numRows();
  ColumnMajor matrix(problem);
  std::unique_ptr<Clp_Simplex, ClpDeleter> model(Clp_newModel());
  Clp_setLogLevel(model.get(), std::getenv("LETHE_CBC_LOG") ? 1 : 0);
  Clp_loadProblem(model.get(), numCols, numRows, matrix.colStart.data(),
                  matrix.rowOf.data(), matrix.valueOf.data(),
                  problem.colLower.data(),
                  problem.colUpper.data(), problem.objective.data(),
                  problem.rowLower.data(), problem.rowUpper.data());
  Clp_setMaximumSeconds(model.get(), std::max(0.01, timeLimitSec));
  // Dual simplex: row generation adds rows the last answer breaks, the
  // case it is made for (primal was no faster on the corpus; the barrier
  // was several times slower).
  Clp_initialDualSolve(model.get());
  Result result;
  if (Clp_isProvenOptimal(model.get())) {
    result.status = Result::Status::Optimal;
    const double *x = Clp_getColSolution(model.get());
    result.values.assign(x, x + numCols);
    result.objective = Clp_getObjValue(model.get());
    result.bound = result.objective;
  } else if (Clp_isProvenPrimalInfeasible(model.get())) {
    result.status = Result::Status::Infeasible;
  } else {
    result.status = Result::Status::Unknown;
    result.hitTimeLimit = true;
    result.error = "CLP stopped with status " +
                   std::to_string(Clp_status(model.get()));
  }
  return result;
}

Result lethe::milp::solveLp(const Problem &problem, double timeLimitSec) {
  try {
    return solveLpOrThrow(problem, timeLimitSec);
  } catch (const CoinError &error) {
    Result result;
    result.error = "CLP: " + error.className() + "::" + error.methodName() +
                   ": " + error.message();
    return result;
  } catch (const std::exception &error) {
    Result result;
    result.error = std::string("CLP: ") + error.what();
    return result;
  } catch (...) {
    Result result;
    result.error = "CLP: unknown exception";
    return result;
  }
}

//===- AutoSolverFamily.cpp - What a solve keeps for the next ones --------===//
//
// A family (AutoFamily, AutoSolverImpl.h) keeps the ladder a solve built and
// where its loop checked its end condition; a later solve of the same step
// at another budget replays that condition on it (docs/Planner.md, "Work
// done once"), and a solve asked again for the same budget is answered with
// the last solution kept.
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

using namespace lethe;
using namespace lethe::autosolver;

void Solver::keepSolved(const AutoSolution &solution) const {
  if (answersAgain && usedFamily)
    usedFamily->solved =
        AutoFamily::Solved{options.budgetBytes, solverOptions.refine, solution};
}

AutoFamily::Replay AutoFamily::replay(int64_t budget) const {
  // Solver::buildLadder's loop: firstFit is the first member that fits, set
  // where an iteration ends; the loop ends once kLookBelow members follow
  // it, or by itself (the last check of a complete ladder).
  Replay result;
  for (size_t t = 0; t < checks.size(); ++t) {
    if (complete && t + 1 == checks.size()) {
      result.end = t;
      return result;
    }
    size_t members = checks[t].members;
    if (!result.firstFit && ladder[members - 1].peak <= budget)
      result.firstFit = members - 1;
    if (result.firstFit && members > *result.firstFit + kLookBelow) {
      result.end = t;
      return result;
    }
  }
  return result;
}

AutoFamilies::AutoFamilies() = default;
AutoFamilies::~AutoFamilies() = default;

AutoFamily &AutoFamilies::get(llvm::StringRef step) {
  std::unique_ptr<AutoFamily> &family = families[step.str()];
  if (!family)
    family = std::make_unique<AutoFamily>();
  return *family;
}

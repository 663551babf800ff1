//===- AutoSolverThreads.cpp - Searches forked to other threads -----------===//
//
// A fork is a copy of the solver that runs a search the serial code would
// run later from the same plan; the caller takes its plan where the serial
// code would have reached it, else discards it. Both run the same code on
// the same plan, and an evaluation is a function of its decisions and
// hints, so the plans are those of the serial solve (docs/Planner.md,
// "Threads").
//
//===----------------------------------------------------------------------===//

#include "AutoSolverImpl.h"

using namespace lethe;
using namespace lethe::autosolver;

struct Forked::Run {
  const Evaluator &evaluator;
  std::function<llvm::Error()> work;
  /// The evaluator's count where the work was handed over, and the
  /// evaluations the work made.
  size_t evaluationsBefore = 0, evaluations = 0;
  std::atomic<bool> stop{false};
  llvm::Error err = llvm::Error::success();
  Run(const Evaluator &evaluator, std::function<llvm::Error()> work)
      : evaluator(evaluator), work(std::move(work)),
        evaluationsBefore(evaluator.getEvaluations()) {}
  ~Run() { llvm::consumeError(std::move(err)); }
};

Forked::Forked(Workers &workers, const Evaluator &evaluator,
               std::function<llvm::Error()> work)
    : run(std::make_shared<Run>(evaluator, std::move(work))) {
  task = workers.spawn([run = run] {
    Evaluator::ThreadScope scope(run->evaluator, &run->stop,
                                 run->evaluationsBefore);
    run->err = run->work();
    run->evaluations = scope.getEvaluations();
  });
}

Forked::~Forked() {
  if (!run)
    return;
  run->stop.store(true, std::memory_order_relaxed);
  task->discard();
  // Work that already runs may read the caller's frame: it is waited for
  // (its next evaluation fails, and it ends).
  task->wait();
}

llvm::Error Forked::join() {
  task->wait();
  if (llvm::Error err = std::move(run->err))
    return err;
  run->evaluator.addEvaluations(run->evaluations);
  return llvm::Error::success();
}

Fork Solver::fork(std::function<llvm::Error(Solver &)> search) const {
  Fork f;
  f.copy = std::make_shared<Solver>(*this);
  f.reusedBefore = reusedEvaluations;
  f.forked.emplace(
      *workers, evaluator,
      [copy = f.copy, search = std::move(search)] { return search(*copy); });
  return f;
}

llvm::Expected<Solver *> Solver::join(Fork &f) {
  if (llvm::Error err = f.forked->join())
    return std::move(err);
  reusedEvaluations += f.copy->reusedEvaluations - f.reusedBefore;
  return f.copy.get();
}

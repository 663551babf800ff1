//===- Workers.h - Threads for work a search may discard --------*- C++ -*-===//
//
// The `auto` solver's searches try several plans whose results are only
// compared afterwards; Workers runs some of them on other threads while the
// caller runs the first (docs/Planner.md, "Threads").
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_PLANNER_WORKERS_H
#define LETHE_LIB_PLANNER_WORKERS_H

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace lethe::autosolver {

/// Threads that take work from the caller's thread. Work is run by a free
/// thread, else by the first caller that waits for it, so waiting never
/// blocks on work nobody runs (a worker waiting on its own forks runs
/// them), and with one thread everything runs on the caller's, in order. A
/// thread waiting for work another runs runs queued work meanwhile (that
/// work's own forks, mostly).
class Workers {
public:
  /// `threads` working in all, the caller's included (1: no other).
  explicit Workers(unsigned threads);
  ~Workers();
  Workers(const Workers &) = delete;
  Workers &operator=(const Workers &) = delete;

  /// Threads to use where the caller asks for `requested` (0: the cores
  /// no other thread of the machine is running on now, this one's
  /// included, at most `most`). A fork that waits for a core is slower
  /// than no fork: the caller then waits for it.
  static unsigned choose(unsigned requested, unsigned most);

  unsigned getThreads() const { return threads; }
  /// The work handed over so far.
  size_t getSpawned() const { return spawned.load(); }

  class Task {
  public:
    /// Runs the work here where no thread took it yet, else waits for it.
    void wait();
    /// The work is not wanted: it never runs where no thread took it yet,
    /// else it runs on (the caller tells it to stop early).
    void discard();

  private:
    friend class Workers;
    explicit Task(Workers &workers) : workers(workers) {}
    /// Whether this thread takes the work (only one does).
    bool claim() { return !claimed.exchange(true); }
    void runClaimed();

    Workers &workers;
    std::function<void()> work;
    std::atomic<bool> claimed{false};
    /// Under the workers' mutex.
    bool done = false;
  };

  /// Hands `work` to the other threads (none: it waits for Task::wait).
  std::shared_ptr<Task> spawn(std::function<void()> work);

private:
  /// A thread of the pool: runs queued work until the workers close.
  void serve();

  unsigned threads;
  /// Work may be handed over from any of the threads (a fork's own forks).
  std::atomic<size_t> spawned{0};
  std::vector<std::thread> pool;
  std::mutex mutex;
  /// Work queued, work done, or closing.
  std::condition_variable changed;
  std::deque<std::shared_ptr<Task>> queue;
  bool closing = false;
};

} // namespace lethe::autosolver

#endif // LETHE_LIB_PLANNER_WORKERS_H

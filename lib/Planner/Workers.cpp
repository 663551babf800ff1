//===- Workers.cpp - Threads for work a search may discard ----------------===//

#include "Workers.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <optional>

using namespace lethe::autosolver;

// Not llvm::StdThreadPool: work on its threads hands over work of its own (a
// fork's forks), and the pool's destructor, joining its threads while a
// discarded fork still ran, blocked that fork's hand-over for good.
Workers::Workers(unsigned threads) : threads(std::max(1u, threads)) {
  for (unsigned i = 1; i < this->threads; ++i)
    pool.emplace_back([this] { serve(); });
}

Workers::~Workers() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    closing = true;
  }
  changed.notify_all();
  // A thread may still run discarded work (told to stop, it ends soon);
  // what is queued is discarded (every waited-for task was waited for).
  for (std::thread &thread : pool)
    thread.join();
}

/// The threads running on the machine now, this one included (Linux:
/// /proc/stat's procs_running), or none where unknown.
static std::optional<unsigned> runningThreads() {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> stat =
      llvm::MemoryBuffer::getFileAsStream("/proc/stat");
  if (!stat)
    return std::nullopt;
  const llvm::StringRef key = "\nprocs_running ";
  llvm::StringRef text = (*stat)->getBuffer();
  size_t at = text.find(key);
  unsigned running = 0;
  if (at == llvm::StringRef::npos ||
      text.drop_front(at + key.size())
          .take_until([](char c) { return c == '\n'; })
          .getAsInteger(10, running))
    return std::nullopt;
  return running;
}

unsigned Workers::choose(unsigned requested, unsigned most) {
  if (requested)
    return requested;
  unsigned cores = llvm::hardware_concurrency().compute_thread_count();
  // On the shared 2-core machine a second thread that shared its core with
  // another process made the slow corpus solves up to 19% slower
  // (bench/results/corpus.md, 2026-11-28, S24).
  if (std::optional<unsigned> running = runningThreads())
    cores = cores > *running ? cores - *running + 1 : 1;
  return std::clamp(cores, 1u, most);
}

void Workers::serve() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    changed.wait(lock, [&] { return closing || !queue.empty(); });
    if (closing)
      return;
    std::shared_ptr<Task> task = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    if (task->claim())
      task->runClaimed();
    lock.lock();
  }
}

void Workers::Task::runClaimed() {
  work();
  // The work may hold what holds this task.
  work = nullptr;
  {
    std::lock_guard<std::mutex> lock(workers.mutex);
    done = true;
  }
  workers.changed.notify_all();
}

void Workers::Task::wait() {
  if (claim()) {
    runClaimed();
    return;
  }
  std::unique_lock<std::mutex> lock(workers.mutex);
  while (!done) {
    if (workers.queue.empty()) {
      workers.changed.wait(lock);
      continue;
    }
    std::shared_ptr<Task> other = std::move(workers.queue.front());
    workers.queue.pop_front();
    lock.unlock();
    if (other->claim())
      other->runClaimed();
    lock.lock();
  }
}

void Workers::Task::discard() {
  if (claim()) {
    work = nullptr;
    std::lock_guard<std::mutex> lock(workers.mutex);
    done = true;
  }
}

std::shared_ptr<Workers::Task> Workers::spawn(std::function<void()> work) {
  ++spawned;
  std::shared_ptr<Task> task(new Task(*this));
  task->work = std::move(work);
  if (!pool.empty()) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back(task);
    }
    changed.notify_all();
  }
  return task;
}

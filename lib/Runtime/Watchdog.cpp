//===- Watchdog.cpp - Bound every blocking call of the runtime ------------===//
//
// A collective whose peer died, or a peer that never joined, blocks its
// caller forever: NCCL kernels spin on data that never comes, so
// cudaStreamSynchronize never returns. A watchdog thread bounds every
// blocking call the runtime makes (synchronizes, NCCL calls, joining the
// communicator) by $LETHE_RT_TIMEOUT_S. When a call overruns, or NCCL
// reports an asynchronous error (a peer's connection closed), it aborts the
// communicator with ncclCommAbort from this thread, as NCCL documents for
// hung communicators: the kernels see the abort flag and exit, the blocked
// call returns, and BlockingCall::finish turns the cause into the sticky
// LETHE_RT_TIMEOUT. A call that still does not return (nothing to abort, or
// the abort did not free it) cannot be recovered in this process: the
// watchdog prints the cause and exits with status 1.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <unistd.h>

using namespace lethe::rt;
using Clock = std::chrono::steady_clock;

namespace lethe::rt {

struct Watchdog {
  std::mutex mutex;
  std::condition_variable changed;
  std::thread thread;
  bool stop = false;
  /// The blocking call in progress: armed, since when, and which.
  bool armed = false;
  uint64_t generation = 0;
  Clock::time_point since;
  std::string what;
  /// Set once a call overran or NCCL failed; the cause, for finish().
  bool fired = false;
  std::string cause;
};

} // namespace lethe::rt

/// How often an armed watchdog asks NCCL for asynchronous errors: a dead
/// peer is reported within this, a healthy call pays nothing (the main
/// thread is blocked anyway).
static constexpr std::chrono::milliseconds kPollInterval(200);
/// How long an aborted call may take to return before the process gives up
/// on it: NCCL's kernels poll the abort flag continuously, so seconds are
/// plenty.
static constexpr std::chrono::seconds kAbortGrace(10);
/// The default bound on a blocking call: far above any step or collective
/// Lethe runs (a step of a large model takes seconds), far below a CI job's
/// limit.
static constexpr double kDefaultTimeoutS = 300;

/// Prints the cause and ends the process: the blocked thread cannot be
/// freed, and returning would hang the caller (or its exit) instead.
[[noreturn]] static void giveUp(const std::string &cause, const char *why) {
  std::fprintf(stderr, "lethe runtime: %s; %s: exiting\n", cause.c_str(),
               why);
  std::fflush(stderr);
  _exit(1);
}

static void watch(LetheRt *rt) {
  Watchdog &w = *rt->watchdog;
  std::unique_lock<std::mutex> lock(w.mutex);
  auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(rt->timeoutS));
  while (!w.stop) {
    if (!w.armed || w.fired) {
      w.changed.wait(lock);
      continue;
    }
    uint64_t generation = w.generation;
    auto deadline = w.since + timeout;
    auto next = std::min(deadline, Clock::now() + kPollInterval);
    if (w.changed.wait_until(lock, next, [&] {
          return w.stop || !w.armed || w.generation != generation;
        }))
      continue;
    std::string cause;
    if (std::string nccl = commAsyncError(rt); !nccl.empty())
      cause = w.what + ": NCCL reported " + nccl +
              " (a peer rank failed or its connection closed)";
    else if (Clock::now() >= deadline)
      cause = w.what + " did not finish within " + timeoutText(rt) +
              (rt->comm ? ": a peer rank died, hung or never joined"
                        : ": the device hung");
    else
      continue;
    if (!commReady(rt))
      giveUp(cause, "no communicator to abort, the call cannot return");
    // Published before the abort: the call may return as soon as it starts.
    w.fired = true;
    w.cause = cause + "; the NCCL communicator was aborted";
    lock.unlock();
    abortComm(rt);
    lock.lock();
    if (!w.changed.wait_for(lock, kAbortGrace, [&] {
          return w.stop || !w.armed || w.generation != generation;
        }))
      giveUp(w.cause, "the call did not return after the abort");
  }
}

std::string lethe::rt::timeoutText(const LetheRt *rt) {
  std::ostringstream os;
  os << rt->timeoutS << " s ($LETHE_RT_TIMEOUT_S)";
  return os.str();
}

LetheRtStatus lethe::rt::readTimeout(LetheRt *rt) {
  // $LETHE_NCCL_TIMEOUT_S is the older name (it bounded only the wait for
  // the rendezvous file).
  const char *name = "LETHE_RT_TIMEOUT_S";
  const char *text = std::getenv(name);
  if (!text) {
    name = "LETHE_NCCL_TIMEOUT_S";
    text = std::getenv(name);
  }
  rt->timeoutS = kDefaultTimeoutS;
  if (!text)
    return LETHE_RT_OK;
  char *end = nullptr;
  double value = std::strtod(text, &end);
  // A day: longer is a typo, and the conversion to a duration must not
  // overflow.
  if (end == text || *end || !(value > 0 && value <= 86400))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                std::string("letheRtCreate: $") + name +
                    " must be a number of seconds in (0, 86400], got '" +
                    text + "'");
  rt->timeoutS = value;
  return LETHE_RT_OK;
}

LetheRtStatus lethe::rt::startWatchdog(LetheRt *rt) {
  rt->watchdog = new Watchdog();
  try {
    rt->watchdog->thread = std::thread(watch, rt);
  } catch (const std::system_error &e) {
    delete rt->watchdog;
    rt->watchdog = nullptr;
    return fail(rt, LETHE_RT_UNSUPPORTED,
                std::string("letheRtCreate: cannot start the watchdog "
                            "thread: ") +
                    e.what());
  }
  return LETHE_RT_OK;
}

void lethe::rt::stopWatchdog(LetheRt *rt) {
  if (!rt->watchdog)
    return;
  {
    std::lock_guard<std::mutex> lock(rt->watchdog->mutex);
    rt->watchdog->stop = true;
  }
  rt->watchdog->changed.notify_all();
  rt->watchdog->thread.join();
  delete rt->watchdog;
  rt->watchdog = nullptr;
}

bool lethe::rt::watchdogFired(const LetheRt *rt) {
  if (!rt->watchdog)
    return false;
  std::lock_guard<std::mutex> lock(rt->watchdog->mutex);
  return rt->watchdog->fired;
}

BlockingCall::BlockingCall(LetheRt *rt, const std::string &at,
                           const char *call)
    : rt(rt) {
  if (!rt->watchdog)
    return;
  {
    std::lock_guard<std::mutex> lock(rt->watchdog->mutex);
    Watchdog &w = *rt->watchdog;
    w.armed = true;
    ++w.generation;
    w.since = Clock::now();
    w.what = at + ": " + call;
  }
  rt->watchdog->changed.notify_all();
}

LetheRtStatus BlockingCall::finish() {
  if (!rt->watchdog)
    return LETHE_RT_OK;
  std::string cause;
  {
    std::lock_guard<std::mutex> lock(rt->watchdog->mutex);
    Watchdog &w = *rt->watchdog;
    w.armed = false;
    if (!w.fired)
      return LETHE_RT_OK;
    cause = w.cause;
  }
  rt->watchdog->changed.notify_all();
  return fail(rt, LETHE_RT_TIMEOUT, cause);
}

BlockingCall::~BlockingCall() {
  if (!rt->watchdog)
    return;
  {
    std::lock_guard<std::mutex> lock(rt->watchdog->mutex);
    rt->watchdog->armed = false;
  }
  rt->watchdog->changed.notify_all();
}

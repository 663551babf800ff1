//===- Simulator.cpp - Discrete-event run of a schedule -------------------===//
//
// A fluid discrete-event simulation: between two events (an op starting or
// ending) every running op progresses at a constant rate, so the next event
// is the earliest finish at the current rates.
//
//===----------------------------------------------------------------------===//

#include "lethe/Simulator/Simulator.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace lethe;

char ScheduleOpError::ID = 0;

static llvm::Error simError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static unsigned streamIndex(Stream stream) {
  return static_cast<unsigned>(stream);
}

static bool isCopy(const ScheduleOp &op) {
  return op.kind == ScheduleOpKind::Offload ||
         op.kind == ScheduleOpKind::Prefetch;
}

llvm::StringRef lethe::stringifyLaunchMode(LaunchMode mode) {
  return mode == LaunchMode::Graph ? "graph" : "eager";
}

/// Adds to `work` what launching the step costs on the GPU's streams: the
/// replay floor of a kernel in a graph, a wait's cost to the op that waits
/// on another stream, an event record's to the op waited for (eager). Only
/// waits the streams do not already imply cost anything, as the scheduled
/// program issues them: a vector clock per op says how far along each
/// stream it is known to start (its stream's earlier ops, what they and
/// its dependencies waited for), and a dependency already behind that
/// clock needs no wait. Stepped op by op in program order (`add`, then
/// `finish` once), within simulate's one pass over the ops.
namespace {
class LaunchCosts {
public:
  LaunchCosts(const DeviceProfile &device, LaunchMode launch, size_t numOps) {
    const bool graph = launch == LaunchMode::Graph;
    waitUs = graph ? device.graphWaitUs : device.waitUs;
    recordUs = graph ? 0.0 : device.eventRecordUs;
    floorUs = graph ? device.graphKernelUs : 0.0;
    // Written as the test it was (a NaN figure enables it).
    enabled = !(waitUs <= 0.0 && recordUs <= 0.0 && floorUs <= 0.0);
    if (!enabled)
      return;
    clock.resize(numOps);
    position.assign(numOps, 0);
    recorded.assign(numOps, 0);
    streamOf.resize(numOps);
  }

  /// Op `index`, whose work without launch costs is in work[index].
  void add(size_t index, const ScheduleOp &op, std::vector<double> &work) {
    if (!enabled)
      return;
    if (op.kernel != KernelClass::None && work[index] < floorUs)
      work[index] = floorUs;
    unsigned s = streamIndex(op.stream);
    streamOf[index] = static_cast<uint8_t>(s);
    Clock now = streamClock[s];
    for (OpIndex dep : op.deps) {
      if (dep < 0 || static_cast<size_t>(dep) >= index)
        continue;
      unsigned t = streamOf[dep];
      if (t == s || now[t] >= position[dep])
        continue;
      work[index] += waitUs;
      recorded[dep] = 1;
      Clock known = withLane(clock[dep], t, position[dep]);
      now = now > known ? now : known;
    }
    const int32_t place = streamClock[s][s] + 1;
    position[index] = place;
    clock[index] = withLane(now, s, place - 1);
    streamClock[s] = withLane(now, s, place);
  }

  /// After every op: the event records' costs.
  void finish(std::vector<double> &work) const {
    if (!enabled || !(recordUs > 0.0))
      return;
    for (size_t index = 0; index < recorded.size(); ++index)
      if (recorded[index])
        work[index] += recordUs;
  }

private:
  // One lane per stream, stored and loaded whole: with an array, setting
  // one lane and then loading the clock could not be store-forwarded and
  // stalled once per op (a quarter of the simulation's time).
  static_assert(kNumStreams == 4, "a clock has one lane per stream");
  typedef int32_t Clock __attribute__((vector_size(16)));
  static Clock withLane(Clock clock, unsigned lane, int32_t value) {
    const Clock lanes = {0, 1, 2, 3};
    return lanes == static_cast<int32_t>(lane) ? Clock{} + value : clock;
  }

  double waitUs = 0.0, recordUs = 0.0, floorUs = 0.0;
  bool enabled = false;
  // clock[op][s]: ops of stream s (counted in its order) done before op
  // starts; position[op]: op's place on its stream, from 1.
  std::vector<Clock> clock;
  std::vector<int32_t> position;
  std::array<Clock, kNumStreams> streamClock = {};
  std::vector<uint8_t> recorded;
  /// Each op's stream: a dependency's, read here instead of from its op
  /// (136 bytes apart, a cache miss each on a large schedule).
  std::vector<uint8_t> streamOf;
};
} // namespace

/// When an op may start: once the host has enqueued every kernel and copy
/// before it (eager: `host_launch_us` each, in program order; the first
/// starts at 0) or once the graph is launched (`graph_launch_us`). Stepped
/// op by op in program order; `issued` stays empty when neither costs
/// anything.
namespace {
struct IssueTimes {
  IssueTimes(const DeviceProfile &device, LaunchMode launch, size_t numOps) {
    const bool graph = launch == LaunchMode::Graph;
    perOpUs = graph ? 0.0 : device.hostLaunchUs;
    host = graph ? device.graphLaunchUs : 0.0;
    if (!(perOpUs <= 0.0 && host <= 0.0))
      issued.resize(numOps);
  }
  void add(size_t index, const ScheduleOp &op) {
    if (issued.empty())
      return;
    issued[index] = host;
    bool copy = op.kind == ScheduleOpKind::Offload ||
                op.kind == ScheduleOpKind::Prefetch;
    if (copy || op.kernel != KernelClass::None)
      host += perOpUs;
  }
  double perOpUs = 0.0;
  /// When the host enqueues the next op.
  double host = 0.0;
  std::vector<double> issued;
};
} // namespace

/// A copy's rate factor beside a kernel of `kernel`'s class.
static double copyFactorBeside(const DeviceProfile &device,
                               KernelClass kernel) {
  switch (kernel) {
  case KernelClass::None:
    return 1.0;
  case KernelClass::Matrix:
    return device.copySlowdownWithMatmul > 0 ? device.copySlowdownWithMatmul
                                             : 1.0;
  case KernelClass::MemoryBound:
    return device.copySlowdownWithMemoryBound > 0
               ? device.copySlowdownWithMemoryBound
               : 1.0;
  }
  return 1.0;
}

double lethe::kernelSlowdown(const DeviceProfile &device, KernelClass kernel,
                             bool d2h, bool h2d, double memoryShare) {
  if (kernel == KernelClass::None || !(d2h || h2d))
    return 1.0;
  bool matrix = kernel == KernelClass::Matrix;
  double factor =
      d2h && h2d ? (matrix ? device.matmulSlowdownWithBothCopies
                           : device.memoryBoundSlowdownWithBothCopies)
                 : (matrix ? device.matmulSlowdownWithCopies
                           : device.memoryBoundSlowdownWithCopies);
  // The copies slow the kernel's memory traffic, not the rest of its time:
  // max(time, factor x traffic time), as in a roofline.
  if (!matrix)
    factor *= memoryShare;
  return factor >= 1.0 ? factor : 1.0;
}

double lethe::memoryShare(const DeviceProfile &device, KernelClass kernel,
                          double durationUs, double bytes) {
  if (kernel != KernelClass::MemoryBound || !(durationUs > 0) ||
      !(device.memoryKernelBytesPerSec > 0))
    return 1.0;
  return std::min(1.0,
                  bytes / device.memoryKernelBytesPerSec * 1e6 / durationUs);
}

/// The part of memory-bound `op`'s time that moving its bytes (buffers
/// read and allocated) takes at the profile's memory-kernel rate, at most
/// 1; 1 for other ops or where the rate is not measured.
static double memoryShareOf(const Schedule &schedule,
                            const DeviceProfile &device, const ScheduleOp &op) {
  if (!(device.memoryKernelBytesPerSec > 0) ||
      op.kernel != KernelClass::MemoryBound || !(op.durationUs > 0))
    return 1.0;
  double bytes = 0;
  for (BufferId b : op.reads)
    if (b >= 0 && static_cast<size_t>(b) < schedule.buffers.size())
      bytes += static_cast<double>(schedule.buffers[b].bytes);
  for (BufferId b : op.allocs)
    if (b >= 0 && static_cast<size_t>(b) < schedule.buffers.size())
      bytes += static_cast<double>(schedule.buffers[b].bytes);
  return memoryShare(device, op.kernel, op.durationUs, bytes);
}

/// Caps the copy rates (fractions of the lone D2H / H2D bandwidths) at this
/// rank's share of what the host reaches: 1/ranksPerHost of host_d2h,
/// host_h2d, and of host_both for the two directions together. The ranks
/// are taken to copy at the same time (they run the same program, or
/// pipeline stages in step).
static void shareHostBandwidth(const DeviceProfile &device, bool d2hBusy,
                               bool h2dBusy, double &d2hRate,
                               double &h2dRate) {
  const double ranks =
      static_cast<double>(std::max<int64_t>(1, device.ranksPerHost));
  double d2h = d2hBusy ? d2hRate * device.d2hBytesPerSec : 0.0;
  double h2d = h2dBusy ? h2dRate * device.h2dBytesPerSec : 0.0;
  bool capped = false;
  if (device.hostD2HBytesPerSec > 0 &&
      d2h > device.hostD2HBytesPerSec / ranks) {
    d2h = device.hostD2HBytesPerSec / ranks;
    capped = true;
  }
  if (device.hostH2DBytesPerSec > 0 &&
      h2d > device.hostH2DBytesPerSec / ranks) {
    h2d = device.hostH2DBytesPerSec / ranks;
    capped = true;
  }
  if (d2hBusy && h2dBusy && device.hostBothBytesPerSec > 0 &&
      d2h + h2d > device.hostBothBytesPerSec / ranks) {
    double scale = device.hostBothBytesPerSec / ranks / (d2h + h2d);
    d2h *= scale;
    h2d *= scale;
    capped = true;
  }
  if (!capped)
    return;
  if (d2hBusy)
    d2hRate = d2h / device.d2hBytesPerSec;
  if (h2dBusy)
    h2dRate = h2d / device.h2dBytesPerSec;
}

PlannedCopyCosts lethe::plannedCopyCosts(const DeviceProfile &device) {
  PlannedCopyCosts costs;
  if (!(device.d2hBytesPerSec > 0 && device.h2dBytesPerSec > 0))
    return costs;
  double d2hAlone = 1.0, unused = 0.0;
  shareHostBandwidth(device, /*d2hBusy=*/true, /*h2dBusy=*/false, d2hAlone,
                     unused);
  const double duplex = device.duplexFactor > 0 ? device.duplexFactor : 1.0;
  double d2hBeside = duplex, h2dBeside = duplex;
  shareHostBandwidth(device, /*d2hBusy=*/true, /*h2dBusy=*/true, d2hBeside,
                     h2dBeside);
  costs.d2hBytesPerSec = d2hAlone * device.d2hBytesPerSec;
  costs.h2dBytesPerSec = h2dBeside * device.h2dBytesPerSec;
  // The fixed cost is part of the copy's work and slows down with it.
  costs.d2hFixedUs = std::max(0.0, device.d2hFixedUs) / d2hAlone;
  costs.h2dFixedUs = std::max(0.0, device.h2dFixedUs) / h2dBeside;
  return costs;
}

bool lethe::copiesContendWithCollectives(const DeviceProfile &device,
                                         double threshold) {
  return device.collectiveSlowdownWithCopies > threshold ||
         device.collectiveSlowdownWithBothCopies > threshold ||
         device.copySlowdownWithCollectives * threshold < 1.0;
}

llvm::Expected<SimResult> lethe::simulate(const Schedule &schedule,
                                          const DeviceProfile &device,
                                          const SimOptions &options) {
  const size_t numOps = schedule.ops.size();
  SimResult result;

  // One pass over the ops (a schedule of 10,000 ops is 1.3 MB, read again
  // by every pass): each op's work in microseconds at full rate and what
  // launching it adds, when the host issues it, its stream's queue. Each
  // is computed as in a pass of its own, in program order.
  std::vector<double> work(numOps, 0.0);
  LaunchCosts launchCosts(device, options.launch, numOps);
  IssueTimes issueTimes(device, options.launch, numOps);
  std::array<std::vector<OpIndex>, kNumStreams> queues;
  // Most ops are the compute stream's: no regrowth.
  queues[streamIndex(Stream::Compute)].reserve(numOps);
  for (auto [index, op] : llvm::enumerate(schedule.ops)) {
    if (streamIndex(op.stream) >= kNumStreams)
      return simError(llvm::formatv("op {0} is on an unknown stream", index));
    switch (op.kind) {
    case ScheduleOpKind::Node:
    case ScheduleOpKind::Recompute:
      work[index] = std::max(0.0, op.durationUs);
      break;
    case ScheduleOpKind::Offload:
    case ScheduleOpKind::Prefetch: {
      double bandwidth = op.kind == ScheduleOpKind::Offload
                             ? device.d2hBytesPerSec
                             : device.h2dBytesPerSec;
      if (!(bandwidth > 0.0))
        return simError(llvm::formatv(
            "device profile '{0}' has no {1} bandwidth, needed to copy "
            "value %{2}",
            device.name, op.kind == ScheduleOpKind::Offload ? "D2H" : "H2D",
            op.storage));
      work[index] = static_cast<double>(op.copyBytes) / bandwidth * 1e6 +
                    (op.kind == ScheduleOpKind::Offload ? device.d2hFixedUs
                                                        : device.h2dFixedUs);
      break;
    }
    case ScheduleOpKind::Release:
      work[index] = 0.0;
      break;
    }
    if (!std::isfinite(work[index]))
      return llvm::make_error<ScheduleOpError>(
          static_cast<OpIndex>(index), op.node,
          llvm::formatv("op {0} ({1}{2}) has no finite duration", index,
                        stringifyScheduleOpKind(op.kind),
                        op.node >= 0 ? ", graph node " + std::to_string(op.node)
                                     : std::string())
              .str());
    launchCosts.add(index, op, work);
    issueTimes.add(index, op);
    queues[streamIndex(op.stream)].push_back(static_cast<OpIndex>(index));
  }
  launchCosts.finish(work);
  auto positiveOr = [](double value, double fallback) {
    return value > 0.0 ? value : fallback;
  };
  const double duplex = positiveOr(device.duplexFactor, 1.0);
  const double copySlowdown =
      positiveOr(device.copySlowdownWithCollectives, 1.0);
  const double commSlowdown =
      positiveOr(device.collectiveSlowdownWithCopies, 1.0);
  // A profile that gives only the one-direction factor slows collectives at
  // least that much when both directions copy.
  const double commSlowdownBoth = std::max(
      commSlowdown, positiveOr(device.collectiveSlowdownWithBothCopies, 1.0));
  if (!options.earliestStartUs.empty() &&
      options.earliestStartUs.size() != numOps)
    return simError(llvm::formatv("earliestStartUs has {0} entries for {1} ops",
                                  options.earliestStartUs.size(), numOps));
  // No op starts before the host has enqueued it (eager) or before the graph
  // is launched.
  const std::vector<double> &issued = issueTimes.issued;
  // The issue times themselves where nothing else bounds the starts and
  // none is negative (the maximum with 0 would change nothing): no copy.
  std::vector<double> bounded;
  const std::vector<double> *earliestOf = &options.earliestStartUs;
  if (!issued.empty() && options.earliestStartUs.empty() &&
      issueTimes.perOpUs >= 0.0 && issued.front() >= 0.0) {
    earliestOf = &issued;
  } else if (!issued.empty()) {
    bounded = options.earliestStartUs;
    bounded.resize(numOps, 0.0);
    for (size_t index = 0; index < numOps; ++index)
      bounded[index] = std::max(bounded[index], issued[index]);
    earliestOf = &bounded;
  }
  const std::vector<double> &earliest = *earliestOf;
  auto releasedAt = [&](OpIndex op) {
    return earliest.empty() ? 0.0 : earliest[op];
  };

  std::vector<OpTiming> timing(numOps);
  std::vector<double> remaining = work;
  std::vector<uint8_t> done(numOps, 0);
  std::array<size_t, kNumStreams> head = {0, 0, 0, 0};
  std::array<OpIndex, kNumStreams> active = {-1, -1, -1, -1};
  // Yielding copies: the collective whose start set the allowances, and per
  // copy stream the work (full-rate microseconds) it may still do beside
  // that collective (the rest of its chunk).
  OpIndex allowanceFor = -1;
  std::array<double, kNumStreams> allowance = {0.0, 0.0, 0.0, 0.0};
  auto chunkWork = [&](unsigned s) {
    double bandwidth = s == streamIndex(Stream::D2H) ? device.d2hBytesPerSec
                                                     : device.h2dBytesPerSec;
    return static_cast<double>(options.yieldChunkBytes) / bandwidth * 1e6;
  };
  size_t numDone = 0;
  double now = 0.0;
  // Compute-stream work not started yet, for stopAfterUs: the step lasts at
  // least now + this + what the running compute op has left (the stream
  // runs one op at a time, never faster than full rate). `slack` covers
  // the rounding of the sums and ops that end within 1e-9 of their work.
  const unsigned computeStream = streamIndex(Stream::Compute);
  const bool mayStop =
      options.stopAfterUs < std::numeric_limits<double>::infinity();
  double computeUnstarted = 0.0;
  for (OpIndex op : queues[computeStream])
    computeUnstarted += work[op];
  const double slack = 1e-6 * computeUnstarted;
  bool stopped = false;
  // The memory share (memoryShareOf) of compute op `shareOp`.
  OpIndex shareOp = -1;
  double share = 1.0;

  // Whether stream s's head has every dependency done. Ops are done for
  // good, so the deps found done are not read again while it waits
  // (depsDone[s] of them, from the first; reset as the head moves on).
  std::array<size_t, kNumStreams> depsDone = {0, 0, 0, 0};
  auto headReady = [&](unsigned s) {
    llvm::ArrayRef<OpIndex> deps = schedule.ops[queues[s][head[s]]].deps;
    for (size_t &k = depsDone[s]; k < deps.size(); ++k) {
      OpIndex dep = deps[k];
      if (dep < 0 || static_cast<size_t>(dep) >= numOps || !done[dep])
        return false;
    }
    return true;
  };
  // Stream s's active op ends now.
  auto finish = [&](unsigned s) {
    OpIndex op = active[s];
    remaining[op] = 0.0;
    // The next copy on this stream waits for the window like any chunk.
    allowance[s] = 0.0;
    timing[op].endUs = now;
    done[op] = 1;
    ++numDone;
    active[s] = -1;
  };

  while (numDone < numOps) {
    // Start every op that can start now; zero-work ops finish at once.
    bool progress = true;
    while (progress) {
      progress = false;
      for (unsigned s = 0; s < kNumStreams; ++s) {
        if (active[s] >= 0 || head[s] >= queues[s].size())
          continue;
        OpIndex op = queues[s][head[s]];
        if (!headReady(s) || releasedAt(op) > now)
          continue;
        ++head[s];
        depsDone[s] = 0;
        timing[op].startUs = now;
        if (s == computeStream)
          computeUnstarted -= work[op];
        if (remaining[op] <= 0.0) {
          timing[op].endUs = now;
          done[op] = 1;
          ++numDone;
          // Another pass: a head waiting for it may start now. (An op that
          // only starts running changes no other head's readiness.)
          progress = true;
        } else {
          active[s] = op;
        }
      }
    }
    if (numDone == numOps)
      break;
    if (mayStop) {
      OpIndex running = active[computeStream];
      double left =
          computeUnstarted + (running >= 0 ? remaining[running] : 0.0);
      if (now + left - slack > options.stopAfterUs) {
        stopped = true;
        break;
      }
    }

    // The compute op alone runs: at full rate (nothing slows it), until it
    // ends or an idle stream's head is released (one whose dependencies
    // are met waits only for its release: it would have started above),
    // as the event step below finds, without its rates (most events).
    const OpIndex alone = active[computeStream];
    if (alone >= 0 && active[streamIndex(Stream::D2H)] < 0 &&
        active[streamIndex(Stream::H2D)] < 0 &&
        active[streamIndex(Stream::Comm)] < 0) {
      allowanceFor = -1;
      const double step = remaining[alone];
      double release = std::numeric_limits<double>::infinity();
      for (unsigned st = 0; st < kNumStreams; ++st)
        if (st != computeStream && head[st] < queues[st].size() &&
            headReady(st))
          release = std::min(release, releasedAt(queues[st][head[st]]));
      if (release - now < step) {
        remaining[alone] -= release - now;
        now = release;
        continue;
      }
      now += step;
      finish(computeStream);
      continue;
    }

    std::array<double, kNumStreams> rate = {1.0, 1.0, 1.0, 1.0};
    bool d2hBusy = active[streamIndex(Stream::D2H)] >= 0;
    bool h2dBusy = active[streamIndex(Stream::H2D)] >= 0;
    bool commBusy = active[streamIndex(Stream::Comm)] >= 0;
    OpIndex computeOp = active[streamIndex(Stream::Compute)];
    KernelClass kernel =
        computeOp >= 0 ? schedule.ops[computeOp].kernel : KernelClass::None;
    double commFactor = commBusy ? copySlowdown : 1.0;
    double besideKernel = copyFactorBeside(device, kernel);
    rate[streamIndex(Stream::D2H)] =
        (h2dBusy ? duplex : 1.0) * commFactor * besideKernel;
    rate[streamIndex(Stream::H2D)] =
        (d2hBusy ? duplex : 1.0) * commFactor * besideKernel;
    shareHostBandwidth(device, d2hBusy, h2dBusy,
                       rate[streamIndex(Stream::D2H)],
                       rate[streamIndex(Stream::H2D)]);
    rate[streamIndex(Stream::Comm)] = d2hBusy && h2dBusy
                                          ? 1.0 / commSlowdownBoth
                                      : d2hBusy || h2dBusy ? 1.0 / commSlowdown
                                                           : 1.0;

    // Copies issued in chunks that yield to collectives: paused while one
    // runs, which then runs at full rate -- except for the rest of the
    // chunk each copy was in when the collective started.
    bool allowanceEvents = false;
    if (options.copiesYieldToCollectives && commBusy) {
      OpIndex comm = active[streamIndex(Stream::Comm)];
      if (comm != allowanceFor) {
        allowanceFor = comm;
        for (Stream copy : {Stream::D2H, Stream::H2D}) {
          unsigned c = streamIndex(copy);
          allowance[c] = 0.0;
          if (active[c] < 0 || options.yieldChunkBytes <= 0)
            continue;
          double chunk = chunkWork(c);
          double done = work[active[c]] - remaining[active[c]];
          double into = std::fmod(done, chunk);
          // A copy that has not moved a byte has not started a chunk yet.
          if (done > 1e-9 && into > 1e-9 * chunk)
            allowance[c] = chunk - into;
        }
      }
      bool d2hGoes = d2hBusy && allowance[streamIndex(Stream::D2H)] > 0.0;
      bool h2dGoes = h2dBusy && allowance[streamIndex(Stream::H2D)] > 0.0;
      if (!d2hGoes)
        rate[streamIndex(Stream::D2H)] = 0.0;
      if (!h2dGoes)
        rate[streamIndex(Stream::H2D)] = 0.0;
      rate[streamIndex(Stream::Comm)] =
          d2hGoes && h2dGoes   ? 1.0 / commSlowdownBoth
          : d2hGoes || h2dGoes ? 1.0 / commSlowdown
                               : 1.0;
      allowanceEvents = d2hGoes || h2dGoes;
    } else if (!commBusy) {
      allowanceFor = -1;
    }
    // The kernel on the compute stream, slowed by the copies moving now.
    bool d2hMoves = d2hBusy && rate[streamIndex(Stream::D2H)] > 0.0;
    bool h2dMoves = h2dBusy && rate[streamIndex(Stream::H2D)] > 0.0;
    // Its memory share only where it is read (kernelSlowdown reads it for
    // a memory-bound kernel beside moving copies): most kernels run with
    // no copy beside them, and the share divides twice.
    if (kernel == KernelClass::MemoryBound && (d2hMoves || h2dMoves) &&
        shareOp != computeOp) {
      shareOp = computeOp;
      share = memoryShareOf(schedule, device, schedule.ops[computeOp]);
    }
    double slowdown = kernelSlowdown(device, kernel, d2hMoves, h2dMoves,
                                     shareOp == computeOp ? share : 1.0);
    // x / 1 is x: no division where nothing slows the kernel.
    rate[streamIndex(Stream::Compute)] = slowdown == 1.0 ? 1.0 : 1.0 / slowdown;

    double step = std::numeric_limits<double>::infinity();
    unsigned first = kNumStreams;
    for (unsigned s = 0; s < kNumStreams; ++s) {
      if (active[s] < 0)
        continue;
      if (rate[s] <= 0.0)
        continue;
      // x / 1 is x: no division at full rate (most events).
      double finish = rate[s] == 1.0 ? remaining[active[s]]
                                     : remaining[active[s]] / rate[s];
      if (finish < step) {
        step = finish;
        first = s;
      }
    }
    // The next release of a stream's head whose dependencies are met.
    double release = std::numeric_limits<double>::infinity();
    for (unsigned st = 0; st < kNumStreams; ++st)
      if (active[st] < 0 && head[st] < queues[st].size() && headReady(st))
        release = std::min(release, releasedAt(queues[st][head[st]]));
    // A yielding copy reaching its chunk's end pauses: an event.
    double allowanceEnd = std::numeric_limits<double>::infinity();
    if (allowanceEvents)
      for (Stream copy : {Stream::D2H, Stream::H2D}) {
        unsigned c = streamIndex(copy);
        if (rate[c] > 0.0 && allowance[c] > 0.0 &&
            allowance[c] < remaining[active[c]])
          allowanceEnd = std::min(allowanceEnd, now + allowance[c] / rate[c]);
      }
    auto advanceTo = [&](double time) {
      double advance = time - now;
      for (unsigned st = 0; st < kNumStreams; ++st)
        if (active[st] >= 0) {
          remaining[active[st]] -= rate[st] * advance;
          if (allowanceEvents && rate[st] > 0.0 &&
              (st == streamIndex(Stream::D2H) ||
               st == streamIndex(Stream::H2D)))
            allowance[st] = std::max(0.0, allowance[st] - rate[st] * advance);
        }
      now = time;
    };
    if (allowanceEnd - now < step && allowanceEnd <= release) {
      advanceTo(allowanceEnd);
      for (Stream copy : {Stream::D2H, Stream::H2D}) {
        unsigned c = streamIndex(copy);
        if (allowance[c] <= 1e-9 * std::max(1.0, chunkWork(c)))
          allowance[c] = 0.0;
      }
      continue;
    }
    if (release - now < step) {
      advanceTo(release);
      continue;
    }
    if (first == kNumStreams) {
      // Nothing runs and nothing can start: a dependency is never met.
      for (unsigned s = 0; s < kNumStreams; ++s)
        if (head[s] < queues[s].size())
          return simError(llvm::formatv(
              "schedule deadlocks: op {0} on the {1} stream waits for a "
              "dependency that never completes",
              queues[s][head[s]], stringifyStream(static_cast<Stream>(s))));
      return simError("schedule deadlocks");
    }
    now += step;
    for (unsigned s = 0; s < kNumStreams; ++s) {
      OpIndex op = active[s];
      if (op < 0)
        continue;
      remaining[op] -= rate[s] * step;
      if (allowanceEvents && s != streamIndex(Stream::Compute) &&
          s != streamIndex(Stream::Comm))
        allowance[s] = std::max(0.0, allowance[s] - rate[s] * step);
      if (s == first || remaining[op] <= 1e-9 * work[op])
        finish(s);
    }
  }

  // Step time, busy time per stream, exposed waits on the compute stream:
  // stream by stream, each in program order (the sums as over all ops in
  // program order), so that only a compute op after a gap is read again.
  if (stopped) {
    result.stopped = true;
    result.stepUs = std::numeric_limits<double>::infinity();
  }
  for (unsigned s = 0; s < kNumStreams && !stopped; ++s) {
    double busy = 0.0;
    for (OpIndex index : queues[s]) {
      const OpTiming &t = timing[index];
      result.stepUs = std::max(result.stepUs, t.endUs);
      busy += t.endUs - t.startUs;
    }
    result.busyUs[s] = busy;
  }
  double previousComputeEnd = 0.0;
  for (OpIndex index : stopped ? llvm::ArrayRef<OpIndex>()
                               : llvm::ArrayRef(queues[computeStream])) {
    const OpTiming &t = timing[index];
    double gap = t.startUs - previousComputeEnd;
    previousComputeEnd = t.endUs;
    if (gap <= 1e-9)
      continue;
    // Blame the dependency that completed last.
    OpIndex culprit = -1;
    for (OpIndex dep : schedule.ops[index].deps)
      if (culprit < 0 || timing[dep].endUs > timing[culprit].endUs)
        culprit = dep;
    if (culprit < 0)
      continue;
    // Waiting for the host to enqueue it is not waiting for the copy.
    if (!issued.empty() && issued[index] > timing[culprit].endUs + 1e-9)
      continue;
    if (isCopy(schedule.ops[culprit]))
      result.exposedCopyUs += gap;
    else if (schedule.ops[culprit].stream == Stream::Comm)
      result.exposedCommUs += gap;
  }

  if (options.walkMemory) {
    MemoryWalk walk = walkMemory(schedule);
    result.peakBytes = walk.peakBytes;
    result.hostPeakBytes = walk.hostPeakBytes;
    result.memoryAtOp = std::move(walk.deviceAtOp);
  }

  if (options.recordTimeline && options.walkMemory && !stopped) {
    // Memory changes at compute-stream positions: an op's allocations when
    // the compute stream reaches it, its frees when it ends (for ops on
    // other streams: when the compute stream issued them).
    double anchor = 0.0;
    result.memoryCurve.reserve(2 * numOps + 1);
    result.memoryCurve.push_back({0.0, 0});
    for (auto [index, op] : llvm::enumerate(schedule.ops)) {
      bool onCompute = op.stream == Stream::Compute;
      double start = onCompute ? timing[index].startUs : anchor;
      double end = onCompute ? timing[index].endUs : anchor;
      int64_t during = result.memoryAtOp[index];
      int64_t freed = 0;
      for (BufferId buffer : op.frees)
        if (!schedule.buffers[buffer].isHost())
          freed += schedule.buffers[buffer].bytes;
      result.memoryCurve.push_back({start, during});
      if (freed)
        result.memoryCurve.push_back({end, during - freed});
      if (onCompute)
        anchor = timing[index].endUs;
    }
    result.timeline = std::move(timing);
  }
  return result;
}

llvm::Expected<CopyContentionChoice>
lethe::chooseCopyContention(const Schedule &schedule,
                            const DeviceProfile &device, double tolerance,
                            int64_t maxChunkBytes) {
  CopyContentionChoice choice;
  for (const ScheduleOp &op : schedule.ops)
    if (op.stream == Stream::Comm)
      choice.collectivesAloneUs += op.durationUs;
  double limitUs = choice.collectivesAloneUs * (1.0 + tolerance) + 1e-6;
  // What copies cost the collectives is read without the waits the variant
  // issues: those are launch costs, not contention (on the calibrated H200
  // a 1.5 us wait reads as +11% on a 13 us collective), and the step counts
  // them.
  DeviceProfile withoutWaits = device;
  withoutWaits.waitUs = withoutWaits.eventRecordUs = withoutWaits.graphWaitUs =
      0.0;
  auto run = [&](const Schedule &variant, bool yield,
                 int64_t chunk) -> llvm::Expected<CopyContentionChoice::Variant> {
    SimOptions options;
    options.recordTimeline = false;
    options.copiesYieldToCollectives = yield;
    options.yieldChunkBytes = chunk;
    llvm::Expected<SimResult> result = simulate(variant, device, options);
    if (!result)
      return result.takeError();
    llvm::Expected<SimResult> collectives =
        simulate(variant, withoutWaits, options);
    if (!collectives)
      return collectives.takeError();
    return CopyContentionChoice::Variant{
        result->stepUs, collectives->busyUs[streamIndex(Stream::Comm)]};
  };
  auto store = [&](CopyContention mode,
                   llvm::Expected<CopyContentionChoice::Variant> variant)
      -> llvm::Error {
    if (!variant)
      return variant.takeError();
    choice.variants[static_cast<unsigned>(mode)] = *variant;
    return llvm::Error::success();
  };
  if (llvm::Error err = store(CopyContention::Overlap,
                              run(schedule, /*yield=*/false, 0)))
    return std::move(err);
  if (llvm::Error err =
          store(CopyContention::Separate,
                run(separateCopiesFromCollectives(schedule), false, 0)))
    return std::move(err);
  int64_t chunk = std::max(maxChunkBytes, kMinYieldChunkBytes);
  while (true) {
    if (llvm::Error err =
            store(CopyContention::Yield, run(schedule, /*yield=*/true, chunk)))
      return std::move(err);
    choice.yieldChunkBytes = chunk;
    if (choice.variants[static_cast<unsigned>(CopyContention::Yield)]
                .collectiveUs <= limitUs ||
        chunk / 2 < kMinYieldChunkBytes)
      break;
    chunk /= 2;
  }
  int best = -1;
  for (int index = 0; index < 3; ++index) {
    const CopyContentionChoice::Variant &variant = choice.variants[index];
    if (variant.collectiveUs <= limitUs &&
        (best < 0 || variant.stepUs < choice.variants[best].stepUs))
      best = index;
  }
  // Yielding copies win near-ties: they bound what a collective can lose to
  // copies (one chunk) also where the profile's pairwise measurement sees no
  // contention. On GPUs, whole FSDP programs over NVLink ran 2-14% faster
  // with yielding copies than overlapping ones although the microbenchmark
  // showed x1.01 (bench/results/gpu-fsdp.md): every rank copies while it
  // computes, and a slowed rank makes its peers' collectives wait.
  const double yieldPreference = 0.01;
  const unsigned yieldIndex = static_cast<unsigned>(CopyContention::Yield);
  const CopyContentionChoice::Variant &yielding = choice.variants[yieldIndex];
  if (best >= 0 && best != static_cast<int>(yieldIndex) &&
      yielding.collectiveUs <= limitUs &&
      yielding.stepUs <=
          choice.variants[best].stepUs * (1.0 + yieldPreference))
    best = static_cast<int>(yieldIndex);
  choice.chosen = best < 0 ? CopyContention::Separate
                           : static_cast<CopyContention>(best);
  return choice;
}

std::string CopyContentionChoice::describe(llvm::StringRef device,
                                           double tolerance) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto percent = [&](double us) {
    double change = collectivesAloneUs > 0
                        ? (us / collectivesAloneUs - 1.0) * 100.0
                        : 0.0;
    if (std::abs(change) < 0.05)
      change = 0.0;
    return llvm::formatv("{0}{1:F1}%", change < 0 ? "" : "+", change).str();
  };
  os << "chose " << stringifyCopyContention(chosen) << " on '" << device
     << "' (collectives " << llvm::formatv("{0:F1}", collectivesAloneUs)
     << " us without copies, tolerance "
     << llvm::formatv("{0:F1}", tolerance * 100.0) << "%):";
  for (unsigned index = 0; index < 3; ++index)
    os << (index ? ";" : "") << " "
       << stringifyCopyContention(static_cast<CopyContention>(index))
       << (index == static_cast<unsigned>(CopyContention::Yield)
               ? llvm::formatv(" ({0} KiB chunks)", yieldChunkBytes >> 10)
                     .str()
               : std::string())
       << " step " << llvm::formatv("{0:F1}", variants[index].stepUs)
       << " us, collectives " << percent(variants[index].collectiveUs);
  return text;
}

//===- Simulator.h - Discrete-event run of a schedule -----------*- C++ -*-===//
//
// Runs a Schedule on a device profile and predicts the step time, the
// memory curve and a per-op timeline.
//
// Time model (docs/Planner.md states it in full):
// - Each stream runs its ops one at a time in program order; an op starts
//   when its stream is free and its dependencies have completed.
// - Compute and comm ops take their duration; copies take bytes / bandwidth
//   of their direction (the profile's D2H / H2D figure).
// - Rates change while streams overlap: a copy runs at `duplexFactor` of its
//   rate while the other direction copies too and at
//   `copySlowdownWithCollectives` while a collective runs; a collective runs
//   `collectiveSlowdownWithCopies` times slower while one copy direction
//   runs and `collectiveSlowdownWithBothCopies` times slower (at least as
//   slow) while both do. The simulation is fluid: remaining work is
//   re-rated at every event.
// - What running the plan costs (each term only where the profile has its
//   figure, so a profile without them predicts as before):
//   - a copy takes the profile's fixed cost (`d2h_fixed_us`) on top of its
//     bytes over the bandwidth;
//   - a kernel runs `matmul_slowdown_with_copies` (a matrix product) or
//     `memory_bound_slowdown_with_copies` (any other) times slower while one
//     copy direction runs, the `_both_copies` factor while both do; a copy
//     runs at `copy_slowdown_with_matmul` / `_memory_bound` of its rate
//     beside such a kernel;
//   - the ranks of one host (DeviceProfile::ranksPerHost, k) share its
//     bandwidth: a copy direction gets at most host_d2h (host_h2d) / k, both
//     directions together at most host_both / k;
//   - eager launch (LaunchMode::Eager): the host enqueues ops in program
//     order, `host_launch_us` per kernel or copy, and no op starts before
//     the host has enqueued everything before it; a wait the streams do
//     not imply adds `wait_us`, the op waited for `event_record_us`;
//   - CUDA-graph launch (LaunchMode::Graph): no host bound, `graph_launch_us`
//     once, `graph_wait_us` per cross-stream wait, and no kernel shorter
//     than `graph_kernel_us` (the replay floor).
//   Fixed costs are part of an op's work and are slowed with it.
// - Exposed copy time is compute-stream idle time spent waiting for a copy
//   (a prefetch not done before its use, a release waiting for its D2H).
//
// Memory follows program order (lethe/Simulator/Schedule.h); the curve maps
// each op's memory to the time the compute stream reaches it.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SIMULATOR_SIMULATOR_H
#define LETHE_SIMULATOR_SIMULATOR_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "lethe/Simulator/Schedule.h"
#include "lethe/Support/DeviceProfile.h"

#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace lethe {

struct OpTiming {
  double startUs = 0.0;
  double endUs = 0.0;
};

struct MemoryPoint {
  double timeUs = 0.0;
  int64_t bytes = 0;
};

/// Chunk sizes of the runtime's yielding copies lethe-schedule tries: the
/// largest first (its copy-chunk-bytes option), halving down to the least.
constexpr int64_t kDefaultYieldChunkBytes = 8 << 20;
constexpr int64_t kMinYieldChunkBytes = 256 << 10;

/// How the step's ops reach the GPU.
enum class LaunchMode : uint8_t {
  /// Enqueued by the host one at a time (lethe-run's eager steps).
  Eager,
  /// Replayed as one CUDA graph (lethe-run's graph steps).
  Graph,
};
llvm::StringRef stringifyLaunchMode(LaunchMode mode);

struct SimOptions {
  LaunchMode launch = LaunchMode::Eager;
  /// Fill `timeline` and `memoryCurve` (off for the planner's inner loop).
  bool recordTimeline = true;
  /// Per op (indexed like Schedule::ops; empty: none): the op does not
  /// start before this time, microseconds. Simulating pipeline stages
  /// together uses it: a receive cannot start before its peer's send.
  std::vector<double> earliestStartUs;
  /// Copies pause while a collective runs (which then runs at full rate):
  /// the bound of copies issued in small chunks only in the gaps between
  /// collectives. Off: copies and collectives overlap and slow each other
  /// down by the profile's factors.
  bool copiesYieldToCollectives = false;
  /// With copiesYieldToCollectives: the chunk size of yielding copies. A
  /// copy in the middle of a chunk when a collective starts finishes that
  /// chunk beside it (both slowed by the profile's factors), then pauses:
  /// the runtime's bound. 0: copies pause at once (the ideal).
  int64_t yieldChunkBytes = 0;
  /// Stop once the step is certain to end after this time (microseconds):
  /// the compute stream runs its ops one at a time at most at full rate, so
  /// the step lasts at least the time now plus the compute work left. The
  /// result then has `stopped` set, stepUs = +infinity and no other timing
  /// figures (the memory is walked all the same). A planner that discards
  /// every plan slower than one it holds stops simulating such a plan early.
  double stopAfterUs = std::numeric_limits<double>::infinity();
  /// Fill peakBytes, hostPeakBytes and memoryAtOp (walkMemory: off where the
  /// caller has the schedule's memory already).
  bool walkMemory = true;
};

struct SimResult {
  /// Time at which the last op of any stream ends.
  double stepUs = 0.0;
  /// Stopped past SimOptions::stopAfterUs: stepUs is +infinity, the other
  /// timing figures are not computed.
  bool stopped = false;
  int64_t peakBytes = 0;
  int64_t hostPeakBytes = 0;
  /// Compute-stream idle time waiting for copies / for collectives.
  double exposedCopyUs = 0.0;
  double exposedCommUs = 0.0;
  /// Busy time per stream, indexed by lethe::Stream.
  std::array<double, kNumStreams> busyUs = {0.0, 0.0, 0.0, 0.0};
  /// Device bytes while each op runs (program order).
  std::vector<int64_t> memoryAtOp;
  /// Per op (indexed like Schedule::ops), when recordTimeline.
  std::vector<OpTiming> timeline;
  /// Device memory over time (a step function), when recordTimeline.
  std::vector<MemoryPoint> memoryCurve;
};

/// How many times slower a kernel of class `kernel` runs while host copies
/// move one way (`d2h` or `h2d`) or both ways beside it (at least 1).
/// `memoryShare` (see memoryShare) scales a memory-bound kernel's factor:
/// the copies slow its memory traffic, not the rest of its time. The
/// simulator's rule; the lower bound's contention rows price with it.
double kernelSlowdown(const DeviceProfile &device, KernelClass kernel, bool d2h,
                      bool h2d, double memoryShare);

/// The part of a memory-bound kernel's `durationUs` that moving `bytes`
/// (the buffers it reads and allocates) takes at the profile's
/// memory-kernel rate, at most 1; 1 for other kernels or where the rate is
/// not measured.
double memoryShare(const DeviceProfile &device, KernelClass kernel,
                   double durationUs, double bytes);

/// Whether host copies and collectives slow each other down on `device`:
/// a collective factor above `threshold`, or the copy factor below its
/// inverse. lethe-schedule's contention rule and the planner's copy model
/// share it.
bool copiesContendWithCollectives(const DeviceProfile &device,
                                  double threshold = 1.05);

/// What one host copy costs where the planner places copies (placement,
/// copy model, exact model, lethe-schedule's prefetch placement): the rates
/// lethe::simulate gives the same situation, so that a plan's copies are
/// placed by the time they will take. An offload runs alone on the host
/// link (the forward's D2H copies); a prefetch runs beside an offload (the
/// duplex figure: the backward's H2D copies meet the last D2H ones); each
/// is capped at this rank's share of what the host reaches
/// (DeviceProfile::ranksPerHost and the host_* figures) and pays its
/// direction's fixed cost.
struct PlannedCopyCosts {
  double d2hBytesPerSec = 0.0;
  double h2dBytesPerSec = 0.0;
  double d2hFixedUs = 0.0;
  double h2dFixedUs = 0.0;
  /// Whether both directions have a positive rate (offload is possible).
  bool canCopy() const { return d2hBytesPerSec > 0 && h2dBytesPerSec > 0; }
  /// Microseconds one copy of `bytes` takes.
  double d2hUs(int64_t bytes) const {
    return static_cast<double>(bytes) / d2hBytesPerSec * 1e6 + d2hFixedUs;
  }
  double h2dUs(int64_t bytes) const {
    return static_cast<double>(bytes) / h2dBytesPerSec * 1e6 + h2dFixedUs;
  }
};
PlannedCopyCosts plannedCopyCosts(const DeviceProfile &device);

/// lethe-schedule's contention=auto choice for a program scheduled without
/// separation (docs/Parallel.md): `schedule` simulated as is, with copies
/// that yield to collectives, and with separateCopiesFromCollectives; the
/// fastest step among the variants whose collective time (comm-stream busy
/// time) is at most (1 + tolerance) x the collectives' time alone (their
/// summed durations); yield, where it qualifies, wins over any variant
/// less than 1% faster; separate always qualifies. Yield is simulated with chunks of `maxChunkBytes` halved
/// down to kMinYieldChunkBytes until its collectives are within the
/// tolerance (the largest such chunk: the fewest chunks to issue), or the
/// least when none is.
struct CopyContentionChoice {
  struct Variant {
    double stepUs = 0.0, collectiveUs = 0.0;
  };
  CopyContention chosen = CopyContention::Overlap;
  double collectivesAloneUs = 0.0;
  /// The chunk size the yield variant was simulated with.
  int64_t yieldChunkBytes = 0;
  /// Indexed by CopyContention.
  std::array<Variant, 3> variants;
  /// "chose yield on 'h200-pcie' (collectives ... us without copies,
  /// tolerance 5.0%): overlap step ... us, collectives +17.7%; ..."
  std::string describe(llvm::StringRef device, double tolerance) const;
};
llvm::Expected<CopyContentionChoice>
chooseCopyContention(const Schedule &schedule, const DeviceProfile &device,
                     double tolerance = 0.05,
                     int64_t maxChunkBytes = kDefaultYieldChunkBytes);

/// An error about one op of a schedule, so that callers holding the IR can
/// point at it.
class ScheduleOpError : public llvm::ErrorInfo<ScheduleOpError> {
public:
  static char ID;
  ScheduleOpError(OpIndex op, NodeId node, std::string message)
      : op(op), node(node), message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  OpIndex op;
  /// The graph node the op runs or recomputes, or -1.
  NodeId node;
  std::string message;
};

/// Simulates `schedule`. Fails if the schedule is malformed or a device
/// bandwidth it needs is not positive; errors about one op (one with no
/// finite duration) are ScheduleOpErrors.
llvm::Expected<SimResult> simulate(const Schedule &schedule,
                                   const DeviceProfile &device,
                                   const SimOptions &options = {});

} // namespace lethe

#endif // LETHE_SIMULATOR_SIMULATOR_H

//===- CalibrateImpl.h - lethe-calibrate's measuring (internal) -*- C++ -*-===//
//
// What the measuring parts of lethe-calibrate share: the first error, and
// the lane timer. A lane is work enqueued on one or more streams (a copy
// loop, a GEMM loop, an NCCL collective on every GPU). All lanes of a round
// are enqueued while every GPU they use holds at a start gate (a kernel
// polling a word of pinned host memory); the host then opens the gate, so
// the lanes start together on every GPU and host enqueue time stays out of
// the timings. Each lane is timed from its GPU's gate to its last stream's
// end; a round's figure is the median over rounds after one warm-up round.
// While a gate is closed the host makes no call that can wait for the GPU:
// the warm-up round runs without the gate (it loads lazily loaded kernels,
// cuBLASLt's and NCCL's included: loading one waits for the device to
// drain), every event is created before, and a round enqueues at most
// kMaxOpsPerStream operations per stream. A round over the cap, a gate that
// times out, or --no-gate measures without the gate instead: events around
// each lane, host enqueue included (Measurements::ungated says which).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_RUNTIME_CALIBRATEIMPL_H
#define LETHE_LIB_RUNTIME_CALIBRATEIMPL_H

#include "RuntimeImpl.h"
#include "lethe/Runtime/Calibrate.h"

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace lethe::rt::calibrate {

/// The first failure, as "what failed: why".
struct Errors {
  std::string first;
  bool ok() const { return first.empty(); }
  bool cuda(cudaError_t err, const std::string &what) {
    if (err != cudaSuccess && first.empty())
      first = what + " failed: " + cudaGetErrorString(err);
    return ok();
  }
  bool runtime(LetheRt *rt, LetheRtStatus status) {
    if (status != LETHE_RT_OK && first.empty())
      first = letheRtGetErrorMessage(rt);
    return ok();
  }
  bool fail(const std::string &message) {
    if (first.empty())
      first = message;
    return false;
  }
};

struct Options {
  bool quick = false;
  /// Never hold the GPUs at a start gate (see LaneTimer).
  bool noGate = false;
  /// GPUs measured together (the first N visible); 0: all.
  int gpus = 0;
  std::string out, samples, base, name;
};

/// A stream of a device.
struct Endpoint {
  int device;
  cudaStream_t stream;
};

struct Lane {
  /// The streams the lane's work runs on; the first is where it starts.
  std::vector<Endpoint> endpoints;
  /// Enqueues the lane's work (on its endpoints' streams).
  std::function<void()> enqueue;
  /// Stream operations it enqueues on each of its streams, at most (the
  /// per-round cap, kMaxOpsPerStream).
  int ops = 1;
};

class LaneTimer {
public:
  LaneTimer(Errors &errors, Measurements &m, bool noGate)
      : errors(errors), m(m), noGate(noGate) {}
  ~LaneTimer();
  bool init();

  /// What is being measured, for Measurements::ungated.
  std::string phase;

  /// Milliseconds of each lane per round (median over `reps` rounds after
  /// one warm-up): from its first endpoint's device's gate to the end of
  /// the last of its streams.
  std::vector<double> run(const std::vector<Lane> &lanes, int reps);
  /// Several measurements (each a set of lanes, as for run) in alternating
  /// rounds, rotated each round (interleavedOrder): a ratio between two of
  /// them is not biased by which ran first, on colder clocks. Returns each
  /// set's per-lane medians.
  std::vector<std::vector<double>>
  runInterleaved(const std::vector<std::vector<Lane>> &sets, int reps);
  /// As runInterleaved, every round's milliseconds: [set][lane][round].
  std::vector<std::vector<std::vector<double>>>
  runInterleavedSamples(const std::vector<std::vector<Lane>> &sets, int reps);

private:
  Errors &errors;
  Measurements &m;
  bool noGate;
  /// A gate timed out: this timer measures without one from then on.
  bool gateTimedOut = false;
  /// Pinned, mapped host words: [0] the gate, [1] set when a gate timed
  /// out.
  uint32_t *words = nullptr;
  std::map<int, cudaEvent_t> starts;
  std::vector<cudaEvent_t> pool;
  std::vector<int> poolDevice;
  /// Devices whose gate kernel has run once (it is loaded lazily).
  std::map<int, bool> gateLoaded;
  cudaEvent_t event(int device, size_t index);
  /// How one set of lanes is run: each device's gate stream, and whether
  /// its rounds hold at the gate.
  struct Setup {
    std::map<int, cudaStream_t> gateStream;
    bool gated = false;
  };
  Setup prepare(const std::vector<Lane> &lanes);
  /// One round: gated (false when the gate timed out) or not; each lane's
  /// milliseconds into `ms`.
  bool gatedRound(const std::vector<Lane> &lanes,
                  const std::map<int, cudaStream_t> &gateStream,
                  std::vector<double> &ms);
  void ungatedRound(const std::vector<Lane> &lanes, std::vector<double> &ms);
  void note(const std::string &why);
};

/// Runs one measurement (`fn`) as the timer's phase `what`. A failure drops
/// what it measured, so the profile keeps the base's fields for it; it is
/// recorded in Measurements::skipped and measuring goes on. Returns whether
/// it succeeded.
template <typename Fn>
bool measureOrSkip(const std::string &what, Measurements &m, Errors &errors,
                   LaneTimer &timer, Fn fn) {
  Measurements before = m;
  timer.phase = what;
  fn();
  if (errors.ok())
    return true;
  std::string why = errors.first;
  std::vector<std::string> ungated = m.ungated;
  m = before;
  m.ungated = ungated;
  m.skipped.push_back(what + ": " + why);
  errors = Errors();
  (void)cudaGetLastError(); // a non-sticky error must not fail the next
  return false;
}

/// The single-GPU measurements on `rt`'s device: copies by size, GEMM
/// rates, HBM, kernel / copy contention, launch, event and wait costs.
bool measureOneGpu(const Options &options, LetheRt *rt, Measurements &m,
                   Errors &errors);

/// Several GPUs of the host (devices 0 .. gpus-1): copies of all at once,
/// and NCCL collectives with their contention against copies.
bool measureHost(const Options &options, int gpus, Measurements &m,
                 Errors &errors);

/// "CUDA 13.0, driver 580.65.06[, NCCL 2.28.9]".
std::string softwareVersions();

} // namespace lethe::rt::calibrate

#endif // LETHE_LIB_RUNTIME_CALIBRATEIMPL_H

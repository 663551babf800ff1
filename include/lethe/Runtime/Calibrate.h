//===- Calibrate.h - lethe-calibrate: measurements to a profile -*- C++ -*-===//
//
// lethe-calibrate measures the GPUs it runs on and writes a device profile
// (devices/*.json, docs/CostModel.md). The measuring needs a GPU
// (lib/Runtime/Calibrate*.cpp); what this header declares does not: the
// record of what was measured, the fits that turn samples into profile
// fields, the profile and summary writers, and the reader of a base
// profile whose unmeasured fields are carried over. They are pure C++ so
// that lethe-runtime-unittests can test them without a device or LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_RUNTIME_CALIBRATE_H
#define LETHE_RUNTIME_CALIBRATE_H

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lethe::rt::calibrate {

/// One timing: `us` microseconds for `bytes` bytes (per copy or per call).
struct Sample {
  double bytes = 0;
  double us = 0;
};

/// `us = fixedUs + bytes / bytesPerSec`, fitted by least squares on the
/// relative error (small and large sizes count alike), with fixedUs >= 0.
struct RateFit {
  double fixedUs = 0;
  double bytesPerSec = 0;
  /// The largest |fit / measured - 1| over the samples.
  double maxRelError = 0;
  bool valid = false;
};
RateFit fitRate(const std::vector<Sample> &samples);

/// Pinned copies of one size on one GPU, microseconds per copy, back to
/// back on their stream: each direction alone, and both at once.
struct CopyPoint {
  uint64_t bytes = 0;
  int count = 0;
  double d2hUs = 0, h2dUs = 0, d2hBothUs = 0, h2dBothUs = 0;
};

/// `gpus` GPUs copying at once, `bytes` per copy: per-GPU bandwidth in
/// GB/s (mean over the GPUs, and the slowest), one direction at a time and
/// both directions (the sum of the two).
struct HostPoint {
  int gpus = 0;
  uint64_t bytes = 0;
  double d2hGBs = 0, h2dGBs = 0, bothGBs = 0;
  double d2hMinGBs = 0, h2dMinGBs = 0, bothMinGBs = 0;
};

/// One collective of `fullBytes` (the larger of input and output, per rank)
/// over `ranks` GPUs: microseconds per call.
struct CollectivePoint {
  std::string kind; // "all_gather" or "all_reduce"
  int ranks = 0;
  uint64_t fullBytes = 0;
  double us = 0;
};
/// NCCL's bus bytes of a collective: what crosses each rank's link.
double busBytes(const CollectivePoint &point);

/// A kernel loop's milliseconds alone and beside host copies (medians over
/// the rounds), and its slowdowns: the median over rounds of beside / alone
/// measured in the same round, so that what drifts between rounds (clocks
/// under the GPU's power limit) cancels. A slowdown of 0 (not measured, as
/// in older samples) falls back to the ratio of the medians.
struct KernelContention {
  double aloneMs = 0, besideD2HMs = 0, besideH2DMs = 0, besideBothMs = 0;
  double d2hSlowdown = 0, h2dSlowdown = 0, bothSlowdown = 0;

  double slowdownBesideD2H() const { return pick(d2hSlowdown, besideD2HMs); }
  double slowdownBesideH2D() const { return pick(h2dSlowdown, besideH2DMs); }
  double slowdownBesideBoth() const { return pick(bothSlowdown, besideBothMs); }

private:
  double pick(double paired, double besideMs) const {
    return paired > 0 ? paired
                      : (aloneMs > 0 && besideMs > 0 ? besideMs / aloneMs : 0);
  }
};

/// Everything lethe-calibrate measured; 0 (or empty) means not measured.
struct Measurements {
  std::string device; // cudaDeviceProp::name
  int sms = 0;
  double deviceMemoryBytes = 0;
  double hostMemoryBytes = 0; // physical memory of the host
  int gpus = 1;               // GPUs measured together
  std::string date;           // YYYY-MM-DD
  std::string software;       // "CUDA 13.0, driver 580.65, NCCL 2.28.9"
  bool quick = false;

  std::vector<CopyPoint> copies;
  /// Device-to-device copy, bytes read plus written per second; and the
  /// runtime's replay kernel moving the same bytes (memory-bound kernel).
  double hbmBytesPerSec = 0, memoryKernelBytesPerSec = 0;
  /// Dense matrix-product FLOP/s by dtype; why a dtype was not measured.
  std::map<std::string, double> peakFlops;
  std::map<std::string, std::string> skippedDtypes;
  /// bf16 8192x4096x4095 and 8192x4095x4096 FLOP/s, fractions of bf16's.
  std::vector<double> unalignedFractions;

  /// Event to event after a GPU spin: the smallest kernel, and no kernel.
  double launchUs = 0, viewUs = 0;
  /// Host time to enqueue one runtime kernel (letheRtReplay): per round
  /// (µs per launch, rounds in which the GPU stayed busy), the rounds in
  /// which it drained first, and the figure kept (hostLaunchFromRounds).
  double hostLaunchUs = 0;
  std::vector<double> hostLaunchRoundsUs;
  int hostLaunchDrainedRounds = 0;
  double graphKernelUs = 0, graphLaunchUs = 0;
  double eventRecordUs = 0, waitUs = 0, graphWaitUs = 0;

  /// bf16 8192^3 GEMMs and the runtime's memory-bound replay kernel in
  /// loops, beside copies that outlast them; and copies of `contentionBytes`
  /// (GB/s) alone and during loops that outlast them.
  KernelContention matmul, memoryBound;
  /// GEMMs alternating with memory-bound replays in one loop (a training
  /// step's mix): `mixedMemoryPerGemm` replays after each GEMM, the GEMMs
  /// `mixedGemmShare` of the loop's time alone. 0: not measured.
  KernelContention mixed;
  int mixedMemoryPerGemm = 0;
  double mixedGemmShare = 0;
  uint64_t contentionBytes = 0;
  double d2hAloneGBs = 0, h2dAloneGBs = 0;
  double d2hDuringMatmulGBs = 0, h2dDuringMatmulGBs = 0;
  double d2hDuringMemoryGBs = 0, h2dDuringMemoryGBs = 0;

  /// Several GPUs (gpus > 1): copies by number of GPUs and size.
  std::vector<HostPoint> host;
  /// Collectives (gpus > 1 and NCCL), and why they were not measured.
  std::vector<CollectivePoint> collectives;
  std::string collectivesSkipped;
  /// An all-gather alone and beside copies on every GPU (ms), and every
  /// GPU's copies (GB/s per GPU) alone and during an all-gather loop.
  uint64_t contendedCollectiveBytes = 0;
  double collectiveAloneMs = 0, collectiveBesideD2HMs = 0,
         collectiveBesideBothMs = 0;
  double hostD2HAloneGBs = 0, hostH2DAloneGBs = 0;
  double hostD2HDuringCollectiveGBs = 0, hostH2DDuringCollectiveGBs = 0;

  /// Measurements that failed ("what: why"); their profile fields keep the
  /// base profile's values.
  std::vector<std::string> skipped;
  /// Measurements taken without the start gate (--no-gate, a gate that
  /// timed out, or a round over the per-stream cap): each lane timed from
  /// an event recorded before its host enqueue, which is then included.
  std::vector<std::string> ungated;
  bool noGate = false;
};

/// A GEMM's slowdown beside copies inside a loop that alternates GEMMs
/// (`gemmShare` of its time alone) with memory-bound kernels: the loop's
/// slowdown less the memory-bound part's at `memoryFactor`,
/// (mixed - (1 - share) x memory) / share; 0 where either is not measured.
double gemmSlowdownInMix(double mixed, double memoryFactor, double gemmShare);

/// The most host time per runtime kernel launch believed. A launch through
/// the CUDA driver takes 2-6 us of host time on a server CPU (the recorded
/// calibrations: 3.2-4.9 us on H100 and H200 hosts); a figure past this
/// says the host stalled while it was measured (one H100 calibration read
/// 28.8 us, and predicted unplanned eager steps up to 37% slow).
constexpr double kMaxHostLaunchUs = 20.0;

/// The host launch figure from per-round means (µs per launch): the median
/// of the rounds; 0 (not measured: the base profile's figure stays) with
/// the reason in `why` where fewer than 3 rounds were kept, where the
/// median is past kMaxHostLaunchUs, or where it is over 1.5x the least
/// round (most rounds stalled: the least is what the host can do, the
/// median is not).
double hostLaunchFromRounds(std::vector<double> roundsUs, std::string &why);

/// The most stream operations (copies, kernels, event records, waits) one
/// gated round enqueues on one stream. All of a round waits behind the start
/// gate, and a stream's hardware queue holds only about a thousand pending
/// operations (fewer for copies): a host call that finds it full blocks
/// until the GPU drains it, which it cannot while the gate is closed.
constexpr int kMaxOpsPerStream = 64;
/// What the timer itself enqueues on a gate's stream: the gate kernel, its
/// start event and the lane's end event.
constexpr int kGateOps = 3;

/// How many items of `opsEach` stream operations a lane should enqueue in
/// one round: `wanted` rounded up, at least 1, and at most what keeps the
/// lane's stream within kMaxOpsPerStream (kGateOps reserved).
int itemsPerRound(double wanted, int opsEach = 1);

/// The operations a round enqueues on its busiest stream: `lanes` as
/// (stream id, operations) pairs, summed per stream, plus kGateOps.
int busiestStreamOps(const std::vector<std::pair<uint64_t, int>> &lanes);

/// For each endpoint of a lane (given by its device), the index of the
/// lane's first endpoint on the same device: the endpoint whose begin event
/// it is timed from. CUDA times only two events of one device
/// (cudaEventElapsedTime fails with "invalid resource handle" otherwise),
/// so a lane over several GPUs has a begin event on each.
std::vector<size_t> timingOrigins(const std::vector<int> &devices);

/// The order `sets` interleaved measurements run in round `round`: rotated
/// each round, so every set takes every position equally often and none
/// always runs first (on clocks still ramping up) or after a given other.
std::vector<size_t> interleavedOrder(size_t sets, int round);

/// A JSON object's members as raw JSON text, in file order. Enough JSON to
/// carry fields of a base profile over verbatim (the runtime links no JSON
/// library); the profile loader validates what comes out.
struct RawObject {
  std::vector<std::pair<std::string, std::string>> members;
  const std::string *get(const std::string &key) const;
};
/// Parses `text` as one JSON object; on failure returns false and sets
/// `error` ("line L: ...").
bool parseRawObject(const std::string &text, RawObject &object,
                    std::string &error);

/// A profile whose fields the calibration does not measure are taken from
/// (kernel efficiencies, dtypes it cannot run, the pinned-host budget...).
struct BaseProfile {
  std::string path;
  RawObject fields;
  RawObject peakTflops, kernelEfficiency, notes;
};
bool loadBaseProfile(const std::string &path, BaseProfile &base,
                     std::string &error);

/// One field of the written profile: its value and where it comes from.
struct ProfileField {
  std::string key;
  /// The value as JSON text; for an object (peak_tflops,
  /// kernel_efficiency), its members instead.
  std::string json;
  std::vector<std::pair<std::string, std::string>> members;
  /// The note, as a JSON string ("" for none).
  std::string noteJson;
};

/// The profile's fields from the measurements, in the order the file lists
/// them (name first, notes last): measured figures in the file's units,
/// fitted and clamped into the loader's ranges, each with its note; a base
/// profile's fields where nothing was measured. `name` empty: the base's
/// name, else one made from the device name.
std::vector<ProfileField> deriveProfile(const Measurements &m,
                                        const BaseProfile *base,
                                        const std::string &name);
/// The profile as JSON text (devices/*.json's layout).
std::string writeProfile(const std::vector<ProfileField> &fields);
/// The raw measurements as JSON (--samples).
std::string writeSamples(const Measurements &m);
/// The readable summary: tables of what was measured, then the profile's
/// figures.
std::string summarize(const Measurements &m,
                      const std::vector<ProfileField> &fields);

/// "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3".
std::string slug(const std::string &deviceName);

} // namespace lethe::rt::calibrate

#endif // LETHE_RUNTIME_CALIBRATE_H

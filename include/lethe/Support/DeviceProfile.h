//===- DeviceProfile.h - What a GPU can do, for the cost model --*- C++ -*-===//
//
// A device profile holds the figures the cost model, planner and simulator
// use: peak FLOP rate by dtype, HBM and host-link bandwidths, launch
// overhead, and how host copies and collectives slow each other down.
// Profiles are JSON data files (devices/*.json, compiled into the library);
// a user passes their own with a path (`device=my-gpu.json`). The file
// format is in docs/CostModel.md; files use human units (TFLOP/s, GB/s, µs,
// bytes), this struct holds SI units (FLOP/s, bytes/s).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SUPPORT_DEVICEPROFILE_H
#define LETHE_SUPPORT_DEVICEPROFILE_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lethe {

struct DeviceProfile {
  std::string name;
  std::string description;
  /// Peak dense FLOP/s by element type name ("bf16", "f16", "f32", "tf32",
  /// "f8", "f64", "i8"). "f32" is always present.
  llvm::StringMap<double> peakFlops;
  /// What the libraries' kernels of an op class reach, as a fraction of
  /// `peakFlops` (measured on generic shapes): "attention",
  /// "attention_backward", "convolution", "convolution_backward",
  /// "unaligned_matmul" (a matmul dimension not a multiple of 16 bytes).
  /// A class missing here runs at the peak.
  llvm::StringMap<double> kernelEfficiency;
  /// Device memory bandwidth, bytes/s (bytes read plus bytes written).
  double hbmBytesPerSec = 0;
  /// Pinned host<->device copy bandwidth, one direction alone, bytes/s.
  double d2hBytesPerSec = 0;
  double h2dBytesPerSec = 0;
  /// Each direction's bandwidth while the other runs, as a fraction of its
  /// lone figure (PCIe Gen5: about 0.92).
  double duplexFactor = 1.0;
  /// Bandwidth per direction that ring collectives get between peers
  /// (NCCL bus bandwidth), bytes/s; 0 when the device has no peer link.
  double nvlinkBytesPerSec = 0;
  /// Time of the smallest kernel, microseconds: added to every op that
  /// launches one.
  double launchOverheadUs = 0;
  /// Time charged to an op that launches no kernel (a view), microseconds.
  double viewUs = 0;
  /// Collective time multiplier while one host copy direction runs beside
  /// it, and while both do (1 = no contention; over PCIe: 1.39 and 1.69).
  double collectiveSlowdownWithCopies = 1.0;
  double collectiveSlowdownWithBothCopies = 1.0;
  /// Copy bandwidth multiplier while a collective runs (<= 1).
  double copySlowdownWithCollectives = 1.0;
  /// Fixed cost of one host copy on its stream, microseconds: a copy of B
  /// bytes takes `fixed + B / bandwidth` (fitted over copy sizes).
  double d2hFixedUs = 0;
  double h2dFixedUs = 0;
  /// What all GPUs of one host copying at once reach together, bytes/s: D2H,
  /// H2D, and both directions summed. Each of k GPUs copying gets at most
  /// 1/k of it. 0: not measured (each GPU has its own link).
  double hostD2HBytesPerSec = 0;
  double hostH2DBytesPerSec = 0;
  double hostBothBytesPerSec = 0;
  /// Kernel time multipliers while one host copy direction runs beside it,
  /// and while both do: a compute-bound GEMM, a memory-bound kernel.
  double matmulSlowdownWithCopies = 1.0;
  double matmulSlowdownWithBothCopies = 1.0;
  double memoryBoundSlowdownWithCopies = 1.0;
  double memoryBoundSlowdownWithBothCopies = 1.0;
  /// The rate (bytes read plus written per second) of the memory-bound
  /// kernel whose slowdown the two fields above measured. A memory-bound
  /// op moving its bytes slower than this has slack: only its memory
  /// traffic is slowed, so its time becomes max(time, slowdown x bytes /
  /// this rate). 0: not measured (the slowdown applies in full).
  double memoryKernelBytesPerSec = 0;
  /// Copy bandwidth multipliers while a GEMM / a memory-bound kernel runs
  /// (<= 1).
  double copySlowdownWithMatmul = 1.0;
  double copySlowdownWithMemoryBound = 1.0;
  /// Host time to enqueue one kernel, microseconds: eager steps of short
  /// kernels run at this rate.
  double hostLaunchUs = 0;
  /// Per kernel back to back inside a CUDA graph (the replay floor), and
  /// what one more graph launch costs, microseconds.
  double graphKernelUs = 0;
  double graphLaunchUs = 0;
  /// What an event record adds to its stream, and what a wait on another
  /// stream's event adds to the waiting stream, eager and in a CUDA graph,
  /// microseconds.
  double eventRecordUs = 0;
  double waitUs = 0;
  double graphWaitUs = 0;
  /// Fixed cost of one collective, microseconds: a collective moving B bus
  /// bytes takes `fixed + B / nvlink bandwidth` (fitted over sizes).
  double collectiveFixedUs = 0;
  /// Device memory capacity and the pinned-host budget, bytes.
  double deviceMemoryBytes = 0;
  double hostMemoryBytes = 0;
  /// Not a field of the file but how the device is used: how many GPUs of
  /// one host run ranks of the program at once, each copying as this one
  /// does (the parallel passes record it on the function,
  /// `lethe.ranks_per_host`). With the host_* figures each rank's copies
  /// get 1/ranksPerHost of what the host reaches.
  int64_t ranksPerHost = 1;
  /// Where each figure comes from, by field name.
  llvm::StringMap<std::string> notes;

  /// FLOP/s for an element type name; falls back to f32's rate.
  double flopsFor(llvm::StringRef dtype) const;
  /// The fraction of the peak an op class reaches (1 if not given).
  double efficiencyFor(llvm::StringRef opClass) const;

  /// Loads a built-in profile by name (see builtinNames()) or a JSON file by
  /// path. Errors name the file and the field.
  static llvm::Expected<DeviceProfile> load(llvm::StringRef nameOrPath);
  /// Parses a profile from JSON text; `source` names it in errors.
  static llvm::Expected<DeviceProfile> parse(llvm::StringRef json,
                                             llvm::StringRef source);
  /// The names of the built-in profiles, sorted.
  static std::vector<std::string> builtinNames();
};

} // namespace lethe

#endif // LETHE_SUPPORT_DEVICEPROFILE_H

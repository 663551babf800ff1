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
  /// Device memory capacity and the pinned-host budget, bytes.
  double deviceMemoryBytes = 0;
  double hostMemoryBytes = 0;
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

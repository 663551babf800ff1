//===- CostModel.h - Time of an op on a device ------------------*- C++ -*-===//
//
// Estimates how long a `lethe.node` or `lethe.collective` takes on a device
// described by a DeviceProfile. A measured time (`time_us`) wins; otherwise
// the op's kind selects an analytic model:
//
//   matmul / convolution / attention:  max(FLOPs / (peak(dtype) ·
//                                          efficiency(class)),
//                                          bytes / HBM) + launch
//   anything else:                     bytes / HBM + launch
//   views (every result aliases):      the profile's view time
//   collectives:                       ring bytes / peer bandwidth + launch
//
// where bytes are those the op moves through device memory: each distinct
// tensor operand read once, each result it allocates written once. The
// formulas, the op kinds they cover and their sources are in
// docs/CostModel.md.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_ANALYSIS_COSTMODEL_H
#define LETHE_ANALYSIS_COSTMODEL_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "lethe/Support/DeviceProfile.h"

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <utility>

namespace lethe {

class NodeOp;
class CollectiveOp;

struct OpCost {
  double timeUs = 0.0;
  CostSource source = CostSource::Bandwidth;
  /// Floating-point operations of the analytic formula (0 otherwise).
  double flops = 0.0;
  /// Bytes moved through device memory (or between peers, collectives).
  double bytes = 0.0;
  /// False when the kind has no formula and is not a known memory-bound
  /// kind either: the bandwidth model is then a guess worth a remark.
  bool knownKind = true;
};

/// The arithmetic of an op with an analytic formula.
struct ComputeWork {
  double flops = 0.0;
  /// The element type whose rate applies (that of the first matrix
  /// operand).
  mlir::Type elementType;
  /// The op class whose kernel efficiency applies (DeviceProfile::
  /// efficiencyFor): "matmul", "unaligned_matmul", "attention",
  /// "attention_backward", "convolution", "convolution_backward".
  llvm::StringRef opClass = "matmul";
};

class CostModel {
public:
  explicit CostModel(DeviceProfile profile) : profile(std::move(profile)) {}

  /// The node's time: its `time_us` if it has one (source: the node's
  /// `lethe.cost_source`, else measured), else model(node).
  OpCost estimate(NodeOp node) const;
  OpCost estimate(CollectiveOp op) const;

  /// The model's time, ignoring any time the op carries.
  OpCost model(NodeOp node) const;
  OpCost model(CollectiveOp op) const;

  /// FLOPs and dtype of a node whose kind has an analytic formula (matmul,
  /// convolution, attention and their backward ops in ATen, StableHLO,
  /// linalg and TOSA spellings), or nullopt.
  static std::optional<ComputeWork> computeWork(NodeOp node);

  /// Bytes the node moves through device memory: each distinct tensor
  /// operand once, plus each result that allocates (and the results an
  /// in-place op writes).
  static double bytesMoved(NodeOp node);

  /// Whether the node launches no kernel: a view whose every result
  /// aliases an operand, or a view op by kind.
  static bool isView(NodeOp node);

  /// Whether `kind` is an op known to be bound by memory bandwidth, so the
  /// bandwidth model is the intended one rather than a fallback.
  static bool isKnownMemoryBoundKind(llvm::StringRef kind);

  /// The profile's rate name for an element type: "bf16", "f16", "f32",
  /// "f64", "f8" (any 8-bit float), "i8"; other types map to "f32".
  static llvm::StringRef dtypeName(mlir::Type elementType);

  const DeviceProfile &getProfile() const { return profile; }

private:
  DeviceProfile profile;
};

} // namespace lethe

#endif // LETHE_ANALYSIS_COSTMODEL_H

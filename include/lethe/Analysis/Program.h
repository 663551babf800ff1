//===- Program.h - Issue order, streams and buffers of a program -*- C++
//-*-===//
//
// The view of an explicit (materialized, scheduled, allocated) program that
// lethe-verify, lethe-assign-buffers and the simulator share:
// - issue order: the ops of the function body in pre-order (a
//   `lethe.recompute` is issued, then its region's ops, then its yield);
// - the stream of every op (docs/Pipeline.md §5);
// - storages: every value maps to the value owning its storage (views and
//   in-place results to their operand, `lethe.await` and `lethe.recompute`
//   results to what they forward); every storage the step allocates is a
//   buffer, live from its defining op to its release in issue order.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_ANALYSIS_PROGRAM_H
#define LETHE_ANALYSIS_PROGRAM_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "lethe/Support/DeviceProfile.h"
#include "lethe/Support/IntervalPacking.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lethe/Support/DeviceProfile.h"

namespace mlir {
class ModuleOp;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace lethe {

/// `profile` as `func` uses it: DeviceProfile::ranksPerHost from the
/// function's `lethe.ranks_per_host` (1 when it has none).
DeviceProfile deviceForFunction(const DeviceProfile &profile,
                                mlir::func::FuncOp func);

/// The stream an op runs on: its `lethe.stream` attribute, else the op's
/// own (offload: d2h, prefetch: h2d, collective: comm, test.timeline_op:
/// its `stream`), else compute.
Stream getOpStream(mlir::Operation *op);

/// Whether `op` is a compute node that writes its aliased operand in place
/// (`aten.add_`, batch-norm statistics) rather than viewing it.
bool isInPlaceWriter(mlir::Operation *op);

/// One storage the program allocates.
struct ProgramBuffer {
  /// The allocating result (the storage owner).
  mlir::Value value;
  /// Issue position of its defining op, and of its first release (or the
  /// number of ops when it is never released: it lives to the end).
  unsigned defPos = 0;
  unsigned endPos = 0;
  mlir::Operation *release = nullptr;
  int64_t bytes = 0;
  /// Lives in the pinned host arena (a `!lethe.host` tensor).
  bool host = false;
  /// Returned by the function (through any alias or forward).
  bool isOutput = false;

  mlir::Operation *getDefiningOp() const { return value.getDefiningOp(); }
};

class ExplicitProgram {
public:
  /// Builds the view of `func`. Fails with an error at the op on what it
  /// cannot represent: more than one block, a buffer of dynamic shape.
  static mlir::FailureOr<ExplicitProgram> build(mlir::func::FuncOp func);

  /// Ops in issue order (nested recompute bodies included, in place).
  llvm::ArrayRef<mlir::Operation *> getOps() const { return ops; }
  unsigned getPosition(mlir::Operation *op) const;

  /// The value owning the storage of `value` (itself for allocating
  /// results and function arguments).
  mlir::Value getStorage(mlir::Value value) const;
  /// The buffer of `value`'s storage, or -1 (function arguments, values
  /// that own no bytes such as timepoints).
  int32_t getBufferIndex(mlir::Value value) const;
  /// getBufferIndex of a storage owner (getStorage's answer), looked up
  /// once.
  int32_t getStorageBufferIndex(mlir::Value storage) const {
    auto it = bufferOf.find(storage);
    return it == bufferOf.end() ? -1 : it->second;
  }
  llvm::ArrayRef<ProgramBuffer> getBuffers() const { return buffers; }
  /// Whether result `index` of `op` allocates a buffer.
  static bool isAllocatingResult(mlir::Operation *op, unsigned index);

  /// Bytes live (device or host) at every issue position: buffers whose
  /// interval [defPos, endPos) contains it.
  std::vector<int64_t> liveBytes(bool host) const;

private:
  std::vector<mlir::Operation *> ops;
  /// Made on the first getPosition: only lethe-schedule's prefetch
  /// placement asks, and a map of every op was ~1% of a `lethe plan` at
  /// 100k ops, which builds two programs.
  mutable llvm::DenseMap<mlir::Operation *, unsigned> positions;
  llvm::DenseMap<mlir::Value, mlir::Value> storageOf;
  llvm::DenseMap<mlir::Value, int32_t> bufferOf;
  std::vector<ProgramBuffer> buffers;
};

/// A program's buffers packed into its two arenas, as lethe-assign-buffers
/// packs them (packIntervals of each arena's lifetimes).
struct PackedProgram {
  /// Offset of every buffer (ExplicitProgram::getBuffers' order) in its
  /// arena.
  std::vector<int64_t> offsets;
  /// Each arena's size and its lower bound (most bytes live at once).
  int64_t deviceArena = 0, deviceMaxLive = 0;
  int64_t hostArena = 0, hostMaxLive = 0;
  unsigned numDeviceBuffers = 0, numHostBuffers = 0;
};

/// Packs `program`'s buffers, every offset and size rounded up to
/// `alignment` (a valid one: isValidAlignment): lethe-assign-buffers'
/// packing.
PackedProgram packProgram(const ExplicitProgram &program, int64_t alignment);

/// The lifetimes and sizes of `program`'s buffers in one arena (host or
/// device), in getBuffers' order: what packProgram packs.
std::vector<PackInterval> arenaIntervals(const ExplicitProgram &program,
                                         bool host);

/// "%3 ('aten.mm.default' "mm_1")": a value as printed in its function,
/// with its node's kind and name when it has them, for messages.
std::string describeProgramValue(mlir::Value value);

} // namespace lethe

#endif // LETHE_ANALYSIS_PROGRAM_H

//===- StreamOrder.h - Happens-before across streams ------------*- C++ -*-===//
//
// Which ops of a program are known to have completed when an op starts, by
// a vector clock per stream (docs/Pipeline.md §5): entry t of a clock counts
// the ops of stream t known complete. An op starts with its stream's clock,
// raised by the timepoints it awaits, and knows every op issued before it on
// its own stream; a barrier carries its stream's clock, a copy's timepoint
// the copy's own. Op A has completed when op B starts iff B's start clock
// counts past A's index on A's stream.
//
// Ops are fed in issue order. lethe-verify checks that every dependence an
// op has (StreamOrder::getNeeds) is covered; lethe-schedule inserts the
// barriers and awaits that cover them.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_ANALYSIS_STREAMORDER_H
#define LETHE_ANALYSIS_STREAMORDER_H

#include "lethe/Analysis/Program.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <array>

namespace lethe {

constexpr unsigned kNumProgramStreams = 4;
using StreamClock = std::array<int32_t, kNumProgramStreams>;

/// One op that must have completed before another starts.
struct StreamNeed {
  enum Kind : uint8_t {
    /// The op reads a value that `op` wrote on another stream.
    Read,
    /// The op frees or writes in place a storage `op` uses on another
    /// stream.
    Overwrite,
    /// The op allocates on a non-compute stream: memory released on the
    /// compute stream before it must be free (`op` is that release).
    Reuse,
    /// Copies and collectives kept apart (contention).
    Contention,
  };
  Kind kind = Read;
  unsigned stream = 0;
  /// Index of `op` on `stream`.
  int32_t index = -1;
  mlir::Operation *op = nullptr;
  /// The value concerned (Read, Overwrite), for messages.
  mlir::Value value;
};

class StreamOrder {
public:
  explicit StreamOrder(const ExplicitProgram &program)
      : program(program), bufferAccesses(program.getBuffers().size()) {}

  /// Timepoints `op` waits for before it starts on its stream.
  static llvm::SmallVector<mlir::Value> getAwaited(mlir::Operation *op);

  /// The clock `op` would start with if issued now on `stream`.
  StreamClock startClock(mlir::Operation *op, unsigned stream) const;

  /// The dependences of `op` (issued next, on `stream`) on ops of other
  /// streams; `keepCopiesFromCollectives` adds the contention ones.
  void getNeeds(mlir::Operation *op, unsigned stream,
                bool keepCopiesFromCollectives,
                llvm::SmallVectorImpl<StreamNeed> &needs) const;

  /// Records `op` as issued on `stream`: its timepoints, reads and writes.
  /// Returns its start clock.
  StreamClock issue(mlir::Operation *op, unsigned stream);

  /// Ops issued so far on `stream`; the last timepoint issued on it, with
  /// how many of the stream's ops it covers (0 and null if none).
  int32_t getCount(unsigned stream) const { return counts[stream]; }
  std::pair<int32_t, mlir::Value> getLastTimepoint(unsigned stream) const {
    return lastTimepoint[stream];
  }
  StreamClock getTimepointClock(mlir::Value timepoint) const {
    auto it = timepoints.find(timepoint);
    return it == timepoints.end() ? StreamClock{} : it->second;
  }
  /// Compute-stream index of the last release issued, or -1.
  int32_t getLastReleaseIndex() const { return lastRelease.index; }
  /// Cross-stream reads seen.
  unsigned getNumCrossStreamReads() const { return numCrossStreamReads; }

private:
  struct Access {
    int32_t index = -1;
    mlir::Operation *op = nullptr;
  };
  using StreamAccesses = std::array<Access, kNumProgramStreams>;
  struct StorageAccesses {
    StreamAccesses writes;
    StreamAccesses accesses;
  };
  /// The accesses of `storage` (a storage owner: ExplicitProgram::
  /// getStorage), by its buffer where it is one; null where it has none.
  const StorageAccesses *lookup(mlir::Value storage) const {
    if (int32_t buffer = program.getStorageBufferIndex(storage); buffer >= 0)
      return &bufferAccesses[buffer];
    auto it = otherAccesses.find(storage);
    return it == otherAccesses.end() ? nullptr : &it->second;
  }
  StorageAccesses &record(mlir::Value storage) {
    if (int32_t buffer = program.getStorageBufferIndex(storage); buffer >= 0)
      return bufferAccesses[buffer];
    return otherAccesses[storage];
  }

  const ExplicitProgram &program;
  std::array<StreamClock, kNumProgramStreams> streamClocks = {};
  std::array<int32_t, kNumProgramStreams> counts = {};
  std::array<std::pair<int32_t, mlir::Value>, kNumProgramStreams>
      lastTimepoint = {};
  llvm::DenseMap<mlir::Value, StreamClock> timepoints;
  /// Per buffer of the program, in its order (a record with no access is
  /// no record: every index -1); the storages that are no buffer (function
  /// arguments) apart. A map of 136-byte entries for all of them was ~40%
  /// of lethe-schedule at 100k ops.
  std::vector<StorageAccesses> bufferAccesses;
  llvm::DenseMap<mlir::Value, StorageAccesses> otherAccesses;
  Access lastRelease;
  unsigned numCrossStreamReads = 0;
};

/// Whether `op` only forwards values (await, yield) rather than reading
/// them.
bool forwardsOnly(mlir::Operation *op);

/// Whether `op` is a host<->device copy.
bool isCopy(mlir::Operation *op);

} // namespace lethe

#endif // LETHE_ANALYSIS_STREAMORDER_H

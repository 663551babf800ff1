//===- Schedule.h - Ops of a planned step, per stream, with deps -*- C++ -*-===//
//
// A schedule is the planned training step written out as a sequence of ops
// in *program order* (the order a materialized program lists them): graph
// nodes, recompute re-runs, D2H offload copies, H2D prefetch copies and
// releases. Each op runs on one stream (compute, d2h, h2d, comm); ops of a
// stream run one after the other in program order, and an op also waits for
// its explicit dependencies on other streams.
//
// Memory is tracked in program order: a buffer is allocated when its op
// starts and freed when its op ends, and every device allocation or free is
// anchored to a compute-stream position (a release waits for its D2H copy on
// the compute stream; a prefetch buffer is reserved when the copy is issued).
// The device memory at every instant therefore follows program order, which
// makes the peak a property of the schedule, independent of timing.
//
// The planner builds schedules (lethe/Planner/ScheduleBuilder.h), the
// simulator runs them, and `lethe-materialize` / `lethe-schedule` emit IR
// from the same structure, so predictions and programs agree.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SIMULATOR_SCHEDULE_H
#define LETHE_SIMULATOR_SCHEDULE_H

#include "lethe/Analysis/TrainingGraph.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace lethe {

using OpIndex = int32_t;
using BufferId = int32_t;

/// Number of streams (lethe::Stream: compute, d2h, h2d, comm).
constexpr unsigned kNumStreams = 4;

enum class ScheduleOpKind : uint8_t {
  /// A graph node at its program position (compute stream, or the comm
  /// stream for collectives).
  Node,
  /// A forward node re-run to re-create a dropped activation (compute).
  Recompute,
  /// Device-to-host copy of a storage (d2h).
  Offload,
  /// Host-to-device copy of an offloaded storage (h2d).
  Prefetch,
  /// Frees the device buffer of an offloaded storage once its D2H copy has
  /// completed; the compute stream waits for the copy (zero time otherwise).
  Release,
};

llvm::StringRef stringifyScheduleOpKind(ScheduleOpKind kind);

/// What kind of kernel an op launches, for the time model: a matrix product
/// (matmul, convolution, attention) is slowed by host copies in flight by
/// the profile's matmul factors, any other kernel by its memory-bound ones;
/// an op that launches none (a view, a copy, a release, a barrier) costs no
/// kernel launch.
enum class KernelClass : uint8_t { None, MemoryBound, Matrix };

/// The kernel class of a graph node of `flags` (its NodeFlags).
inline KernelClass kernelClassOf(uint32_t flags) {
  if (flags & NodeFlagView)
    return KernelClass::None;
  return flags & NodeFlagMatrix ? KernelClass::Matrix
                                : KernelClass::MemoryBound;
}
inline KernelClass kernelClassOf(const GraphNode &node) {
  return kernelClassOf(node.flags);
}

/// Where a buffer's contents come from.
enum class BufferOrigin : uint8_t { Produced, Recomputed, Prefetched, Host };

struct ScheduleBuffer {
  /// The storage-owning value this buffer holds.
  ValueId storage = -1;
  int64_t bytes = 0;
  BufferOrigin origin = BufferOrigin::Produced;
  bool isHost() const { return origin == BufferOrigin::Host; }
};

// The one-byte fields together before the four-byte stream: the op is 136
// bytes instead of 144 (a schedule of 10,000 ops is written, walked and
// simulated once per plan evaluated).
struct ScheduleOp {
  ScheduleOpKind kind = ScheduleOpKind::Node;
  /// Node, Recompute: the kernel it launches.
  KernelClass kernel = KernelClass::None;
  Stream stream = Stream::Compute;
  /// Node and Recompute: the graph node.
  NodeId node = -1;
  /// Offload, Prefetch, Release: the storage copied or released.
  ValueId storage = -1;
  /// Node, Recompute: time on its stream at full rate, microseconds.
  double durationUs = 0.0;
  /// Offload, Prefetch: bytes copied.
  int64_t copyBytes = 0;
  /// Ops (on any stream, earlier in program order) that must complete
  /// before this one starts, besides its predecessor on its own stream.
  llvm::SmallVector<OpIndex, 2> deps;
  /// Buffers allocated when the op starts and freed when it ends.
  llvm::SmallVector<BufferId, 2> allocs;
  llvm::SmallVector<BufferId, 2> frees;
  /// Buffers the op reads (for consumers of the schedule; the simulator
  /// uses `deps`).
  llvm::SmallVector<BufferId, 4> reads;
};
static_assert(sizeof(ScheduleOp) <= 136, "see the comment above");

struct Schedule {
  /// All ops, in program order.
  std::vector<ScheduleOp> ops;
  std::vector<ScheduleBuffer> buffers;

  /// Ops of `stream`, in program order.
  std::vector<OpIndex> streamOrder(Stream stream) const;

  /// Checks the structure: dependencies point backwards, every buffer is
  /// allocated once before it is read or freed and freed at most once, no
  /// buffer is read after it is freed.
  llvm::Error verify() const;

  void print(llvm::raw_ostream &os, const TrainingGraph &graph) const;
};

/// Device (and pinned host) memory along program order.
struct MemoryWalk {
  /// Device bytes allocated while op i runs (after its allocations, before
  /// its frees).
  std::vector<int64_t> deviceAtOp;
  int64_t peakBytes = 0;
  /// First op at which the peak is reached (-1 for an empty schedule).
  OpIndex peakOp = -1;
  int64_t hostPeakBytes = 0;
};

MemoryWalk walkMemory(const Schedule &schedule);

/// Keeps host copies out of collective windows, the rule `lethe-schedule`
/// applies when the device profile says they contend: every copy also
/// waits for the last collective issued before it (program order), and
/// every collective for the last D2H and H2D copies issued before it.
/// Streams run in order, so this orders each copy after every earlier
/// collective and each collective after every earlier copy.
Schedule separateCopiesFromCollectives(const Schedule &schedule);

} // namespace lethe

#endif // LETHE_SIMULATOR_SCHEDULE_H

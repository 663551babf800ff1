//===- Schedule.cpp - Ops of a planned step, per stream, with deps --------===//

#include "lethe/Simulator/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace lethe;

llvm::StringRef lethe::stringifyScheduleOpKind(ScheduleOpKind kind) {
  switch (kind) {
  case ScheduleOpKind::Node:
    return "node";
  case ScheduleOpKind::Recompute:
    return "recompute";
  case ScheduleOpKind::Offload:
    return "offload";
  case ScheduleOpKind::Prefetch:
    return "prefetch";
  case ScheduleOpKind::Release:
    return "release";
  }
  return "unknown";
}

std::vector<OpIndex> Schedule::streamOrder(Stream stream) const {
  std::vector<OpIndex> order;
  for (auto [index, op] : llvm::enumerate(ops))
    if (op.stream == stream)
      order.push_back(static_cast<OpIndex>(index));
  return order;
}

static llvm::Error scheduleError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error Schedule::verify() const {
  enum class State : uint8_t { Unallocated, Live, Freed };
  std::vector<State> state(buffers.size(), State::Unallocated);
  auto checkBuffer = [&](BufferId buffer, OpIndex op) -> llvm::Error {
    if (buffer < 0 || static_cast<size_t>(buffer) >= buffers.size())
      return scheduleError(llvm::formatv("op {0} names buffer {1}, which "
                                         "does not exist",
                                         op, buffer));
    return llvm::Error::success();
  };
  for (auto [index, op] : llvm::enumerate(ops)) {
    OpIndex self = static_cast<OpIndex>(index);
    for (OpIndex dep : op.deps)
      if (dep < 0 || dep >= self)
        return scheduleError(llvm::formatv(
            "op {0} ({1}) depends on op {2}, which does not precede it", self,
            stringifyScheduleOpKind(op.kind), dep));
    for (BufferId buffer : op.allocs) {
      if (llvm::Error err = checkBuffer(buffer, self))
        return err;
      if (state[buffer] != State::Unallocated)
        return scheduleError(llvm::formatv(
            "op {0} allocates buffer {1} a second time", self, buffer));
      state[buffer] = State::Live;
    }
    for (BufferId buffer : op.reads) {
      if (llvm::Error err = checkBuffer(buffer, self))
        return err;
      if (state[buffer] != State::Live)
        return scheduleError(llvm::formatv(
            "op {0} ({1}) reads buffer {2} of value {3}, which is {4}", self,
            stringifyScheduleOpKind(op.kind), buffer, buffers[buffer].storage,
            state[buffer] == State::Freed ? "already freed"
                                          : "not allocated yet"));
    }
    for (BufferId buffer : op.frees) {
      if (llvm::Error err = checkBuffer(buffer, self))
        return err;
      if (state[buffer] != State::Live)
        return scheduleError(llvm::formatv(
            "op {0} frees buffer {1}, which is not live", self, buffer));
      state[buffer] = State::Freed;
    }
  }
  return llvm::Error::success();
}

void Schedule::print(llvm::raw_ostream &os, const TrainingGraph &graph) const {
  for (auto [index, op] : llvm::enumerate(ops)) {
    os << llvm::formatv("{0,5} {1,-8} {2,-9}", index,
                        stringifyStream(op.stream),
                        stringifyScheduleOpKind(op.kind));
    if (op.node >= 0)
      os << " " << graph.getNode(op.node).kind << " #" << op.node;
    if (op.storage >= 0)
      os << " %" << op.storage << " (" << op.copyBytes << " B)";
    auto list = [&](llvm::StringRef name, llvm::ArrayRef<int32_t> items) {
      if (items.empty())
        return;
      os << " " << name << "=[";
      llvm::interleaveComma(items, os);
      os << "]";
    };
    list("deps", op.deps);
    list("alloc", op.allocs);
    list("free", op.frees);
    os << "\n";
  }
}

MemoryWalk lethe::walkMemory(const Schedule &schedule) {
  MemoryWalk walk;
  walk.deviceAtOp.resize(schedule.ops.size());
  int64_t device = 0;
  int64_t host = 0;
  for (auto [index, op] : llvm::enumerate(schedule.ops)) {
    for (BufferId buffer : op.allocs) {
      const ScheduleBuffer &b = schedule.buffers[buffer];
      (b.isHost() ? host : device) += b.bytes;
    }
    walk.deviceAtOp[index] = device;
    if (walk.peakOp < 0 || device > walk.peakBytes) {
      walk.peakOp = static_cast<OpIndex>(index);
      walk.peakBytes = device;
    }
    walk.hostPeakBytes = std::max(walk.hostPeakBytes, host);
    for (BufferId buffer : op.frees) {
      const ScheduleBuffer &b = schedule.buffers[buffer];
      (b.isHost() ? host : device) -= b.bytes;
    }
  }
  return walk;
}

Schedule lethe::separateCopiesFromCollectives(const Schedule &schedule) {
  Schedule separated = schedule;
  OpIndex lastComm = -1, lastD2H = -1, lastH2D = -1;
  for (auto [index, op] : llvm::enumerate(separated.ops)) {
    auto addDep = [&op = op](OpIndex dep) {
      if (dep >= 0 && !llvm::is_contained(op.deps, dep))
        op.deps.push_back(dep);
    };
    switch (op.stream) {
    case Stream::D2H:
      addDep(lastComm);
      lastD2H = static_cast<OpIndex>(index);
      break;
    case Stream::H2D:
      addDep(lastComm);
      lastH2D = static_cast<OpIndex>(index);
      break;
    case Stream::Comm:
      addDep(lastD2H);
      addDep(lastH2D);
      lastComm = static_cast<OpIndex>(index);
      break;
    case Stream::Compute:
      break;
    }
  }
  return separated;
}

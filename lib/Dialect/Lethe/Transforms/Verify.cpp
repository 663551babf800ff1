//===- Verify.cpp - Check the explicit-program contract -------------------===//
//
// One sweep over the program in issue order: lifetimes and arena overlap
// here, happens-before across streams from StreamOrder (vector clocks).
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Analysis/StreamOrder.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Support/Bytes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <map>

namespace lethe {
#define GEN_PASS_DEF_VERIFYPROGRAM
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

StringRef streamName(unsigned stream) {
  return stringifyStream(static_cast<Stream>(stream));
}

/// Arena bytes freed so far, as disjoint pieces, each remembering the
/// (compute-stream) release that freed it last.
class FreedMap {
public:
  struct Piece {
    int64_t end;
    int32_t releaseIndex;
    int32_t buffer;
  };

  void assign(int64_t begin, int64_t end, int32_t releaseIndex,
              int32_t buffer) {
    if (begin >= end)
      return;
    split(begin);
    split(end);
    pieces.erase(pieces.lower_bound(begin), pieces.lower_bound(end));
    pieces[begin] = {end, releaseIndex, buffer};
  }

  /// The piece within [begin, end) freed last, if any.
  const Piece *latest(int64_t begin, int64_t end) const {
    const Piece *best = nullptr;
    auto it = pieces.upper_bound(begin);
    if (it != pieces.begin())
      --it;
    for (; it != pieces.end() && it->first < end; ++it)
      if (it->second.end > begin &&
          (!best || it->second.releaseIndex > best->releaseIndex))
        best = &it->second;
    return best;
  }

private:
  void split(int64_t at) {
    auto it = pieces.upper_bound(at);
    if (it == pieces.begin())
      return;
    --it;
    if (it->first < at && it->second.end > at) {
      Piece tail = it->second;
      it->second.end = at;
      pieces[at] = tail;
    }
  }

  std::map<int64_t, Piece> pieces;
};

struct Limits {
  std::optional<int64_t> budget;
  bool allocated = true;
  int64_t deviceArena = 0;
  int64_t hostArena = 0;
  int64_t alignment = 1;
};

class ProgramVerifier {
public:
  ProgramVerifier(const ExplicitProgram &program, const Limits &limits)
      : program(program), limits(limits), order(program) {}

  LogicalResult run();
  unsigned getNumCrossStreamReads() const {
    return order.getNumCrossStreamReads();
  }

private:
  LogicalResult visit(Operation *op, unsigned pos);
  LogicalResult checkNeeds(Operation *op, unsigned stream);
  LogicalResult checkRelease(ReleaseOp release, const StreamClock &start);
  LogicalResult checkOffsets(Operation *op);
  LogicalResult checkAllocation(Operation *op, OpResult result, unsigned stream,
                                const StreamClock &start);
  LogicalResult checkLeaks();
  std::string describe(Value value) const {
    return describeProgramValue(value);
  }

  const ExplicitProgram &program;
  const Limits &limits;
  StreamOrder order;

  /// Live buffers by offset (device, host): end and buffer index.
  std::array<std::map<int64_t, std::pair<int64_t, int32_t>>, 2> live;
  std::array<FreedMap, 2> freed;
  std::vector<int64_t> offsets;
  int64_t liveDeviceBytes = 0;
};

} // namespace

LogicalResult ProgramVerifier::run() {
  offsets.assign(program.getBuffers().size(), -1);
  for (auto [pos, op] : llvm::enumerate(program.getOps()))
    if (failed(visit(op, pos)))
      return failure();
  return checkLeaks();
}

LogicalResult ProgramVerifier::visit(Operation *op, unsigned pos) {
  unsigned stream = static_cast<unsigned>(getOpStream(op));
  if (isa<JoinOp>(op)) {
    order.issue(op, stream);
    return success();
  }
  StreamClock start = order.startClock(op, stream);

  // No value is used (read, viewed, forwarded) after its release.
  for (Value operand : op->getOperands()) {
    int32_t buffer = program.getBufferIndex(operand);
    if (buffer < 0)
      continue;
    const ProgramBuffer &info = program.getBuffers()[buffer];
    if (info.release && info.endPos < pos) {
      InFlightDiagnostic diag =
          op->emitOpError(isa<ReleaseOp>(op) ? "releases " : "uses ")
          << describe(operand)
          << (isa<ReleaseOp>(op) ? " a second time" : " after its release");
      diag.attachNote(info.release->getLoc())
          << (isa<ReleaseOp>(op) ? "first released here" : "released here");
      return diag;
    }
  }
  if (auto release = dyn_cast<ReleaseOp>(op))
    if (failed(checkRelease(release, start)))
      return failure();
  if (failed(checkNeeds(op, stream)) || failed(checkOffsets(op)))
    return failure();
  for (OpResult result : op->getResults())
    if (ExplicitProgram::isAllocatingResult(op, result.getResultNumber()) &&
        failed(checkAllocation(op, result, stream, start)))
      return failure();
  order.issue(op, stream);
  return success();
}

LogicalResult ProgramVerifier::checkNeeds(Operation *op, unsigned stream) {
  SmallVector<StreamNeed> needs;
  order.getNeeds(op, stream, /*keepCopiesFromCollectives=*/false, needs);
  for (const StreamNeed &need : needs) {
    // Memory reuse is checked against the arena, exactly, in
    // checkAllocation; contention is a performance choice.
    if (need.kind == StreamNeed::Reuse || need.kind == StreamNeed::Contention)
      continue;
    InFlightDiagnostic diag = [&]() -> InFlightDiagnostic {
      switch (need.kind) {
      case StreamNeed::Read:
        return op->emitOpError("reads ")
               << describe(need.value) << " on stream " << streamName(stream)
               << " before its write on stream " << streamName(need.stream)
               << " is awaited";
      case StreamNeed::Overwrite:
        if (isa<ReleaseOp>(op))
          return op->emitOpError("releases ")
                 << describe(need.value) << " before its use on stream "
                 << streamName(need.stream)
                 << " has completed; await that op's timepoint";
        return op->emitOpError("writes ")
               << describe(need.value) << " in place on stream "
               << streamName(stream) << " before its use on stream "
               << streamName(need.stream) << " is awaited";
      default:
        llvm_unreachable("filtered above");
      }
    }();
    diag.attachNote(need.op->getLoc())
        << (need.kind == StreamNeed::Read ? "written here by '"
                                          : "used here by '")
        << need.op->getName() << "'";
    return diag;
  }
  return success();
}

LogicalResult ProgramVerifier::checkRelease(ReleaseOp release,
                                            const StreamClock &start) {
  unsigned stream = static_cast<unsigned>(getOpStream(release));
  if (stream != static_cast<unsigned>(Stream::Compute))
    return release.emitOpError("must be on the compute stream, not ")
           << streamName(stream);
  Value value = release.getValue();
  int32_t buffer = program.getBufferIndex(value);
  if (buffer < 0)
    return release.emitOpError("releases ")
           << describe(value) << ", which the program does not allocate";
  const ProgramBuffer &info = program.getBuffers()[buffer];
  if (info.isOutput)
    return release.emitOpError("releases ")
           << describe(value) << ", which the step returns";
  if (!info.host)
    liveDeviceBytes -= info.bytes;
  int64_t offset = offsets[buffer];
  if (offset >= 0) {
    unsigned arena = info.host ? 1 : 0;
    live[arena].erase(offset);
    freed[arena].assign(offset, offset + info.bytes, start[stream], buffer);
  }
  return success();
}

LogicalResult ProgramVerifier::checkOffsets(Operation *op) {
  auto offsetsAttr =
      LetheDialect::OffsetsAttrHelper(op->getContext()).getAttr(op);
  if (!limits.allocated || !offsetsAttr)
    return success();
  ArrayRef<int64_t> entries = offsetsAttr.asArrayRef();
  if (entries.size() != op->getNumResults())
    return op->emitOpError("has ") << entries.size() << " arena offsets for "
                                   << op->getNumResults() << " results";
  for (auto [index, entry] : llvm::enumerate(entries))
    if (entry >= 0 && !ExplicitProgram::isAllocatingResult(op, index))
      return op->emitOpError("result #")
             << index << " allocates nothing but has arena offset " << entry;
  return success();
}

LogicalResult ProgramVerifier::checkAllocation(Operation *op, OpResult result,
                                               unsigned stream,
                                               const StreamClock &start) {
  int32_t buffer = program.getBufferIndex(result);
  const ProgramBuffer &info = program.getBuffers()[buffer];
  unsigned resultNumber = result.getResultNumber();
  if (!info.host) {
    liveDeviceBytes += info.bytes;
    if (!limits.allocated && limits.budget && liveDeviceBytes > *limits.budget)
      return op->emitOpError("brings the live device bytes to ")
             << liveDeviceBytes << ", over the budget of " << *limits.budget;
  }
  if (!limits.allocated)
    return success();

  auto offsetsAttr =
      LetheDialect::OffsetsAttrHelper(op->getContext()).getAttr(op);
  if (!offsetsAttr)
    return op->emitOpError("result #")
           << resultNumber << " (" << describe(result) << ") allocates "
           << info.bytes << " bytes but has no arena offset";
  ArrayRef<int64_t> entries = offsetsAttr.asArrayRef();
  int64_t offset = entries[resultNumber];
  if (offset < 0)
    return op->emitOpError("result #")
           << resultNumber << " (" << describe(result) << ") allocates "
           << info.bytes << " bytes but has no arena offset";
  if (offset % limits.alignment != 0)
    return op->emitOpError("result #")
           << resultNumber << " has arena offset " << offset
           << ", not a multiple of the alignment " << limits.alignment;

  StringRef arenaName = info.host ? "host" : "device";
  int64_t end = offset + info.bytes;
  int64_t arenaBytes = info.host ? limits.hostArena : limits.deviceArena;
  if (!info.host && limits.budget && end > *limits.budget)
    return op->emitOpError("result #")
           << resultNumber << " (" << describe(result) << ") at device arena ["
           << offset << ", " << end << ") ends beyond the budget of "
           << *limits.budget << " bytes";
  if (end > arenaBytes)
    return op->emitOpError("result #")
           << resultNumber << " (" << describe(result) << ") at " << arenaName
           << " arena [" << offset << ", " << end
           << ") ends beyond the arena of " << arenaBytes << " bytes";
  offsets[buffer] = offset;
  if (info.bytes == 0)
    return success();

  // No live buffer may overlap it.
  unsigned arena = info.host ? 1 : 0;
  auto &liveMap = live[arena];
  auto next = liveMap.lower_bound(offset);
  std::optional<std::pair<int64_t, std::pair<int64_t, int32_t>>> clash;
  if (next != liveMap.end() && next->first < end)
    clash = *next;
  else if (next != liveMap.begin() && std::prev(next)->second.first > offset)
    clash = *std::prev(next);
  if (clash) {
    const ProgramBuffer &other = program.getBuffers()[clash->second.second];
    InFlightDiagnostic diag =
        op->emitOpError("result #")
        << resultNumber << " (" << describe(result) << ") at " << arenaName
        << " arena [" << offset << ", " << end << ") overlaps "
        << describe(other.value) << " at [" << clash->first << ", "
        << clash->second.first << "), which is still live";
    diag.attachNote(other.getDefiningOp()->getLoc()) << "allocated here";
    return diag;
  }

  // The memory's previous holders must be released before this op writes
  // it; on the compute stream that is issue order, elsewhere an await.
  constexpr unsigned compute = static_cast<unsigned>(Stream::Compute);
  if (const FreedMap::Piece *piece = freed[arena].latest(offset, end);
      piece && start[compute] <= piece->releaseIndex) {
    const ProgramBuffer &other = program.getBuffers()[piece->buffer];
    InFlightDiagnostic diag =
        op->emitOpError("writes ")
        << arenaName << " arena bytes of " << describe(other.value)
        << " on stream " << streamName(stream)
        << " before their release is awaited; await a compute barrier "
           "issued after the release";
    diag.attachNote(other.release->getLoc()) << "released here";
    return diag;
  }
  liveMap[offset] = {end, buffer};
  return success();
}

LogicalResult ProgramVerifier::checkLeaks() {
  for (const ProgramBuffer &buffer : program.getBuffers())
    if (!buffer.release && !buffer.isOutput)
      return buffer.getDefiningOp()->emitOpError("result #")
             << cast<OpResult>(buffer.value).getResultNumber() << " ("
             << describe(buffer.value)
             << ") is never released and the step does not return it";
  return success();
}

namespace {
struct VerifyProgramPass
    : public lethe::impl::VerifyProgramBase<VerifyProgramPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Limits limits;
    limits.allocated = allocated;
    if (!budget.empty()) {
      llvm::Expected<int64_t> parsed = parseByteCount(budget);
      if (!parsed) {
        module.emitError("lethe-verify: ") << toString(parsed.takeError());
        return signalPassFailure();
      }
      limits.budget = *parsed;
    } else if (auto attr =
                   LetheDialect::BudgetBytesAttrHelper(module->getContext())
                       .getAttr(module)) {
      limits.budget = attr.getInt();
    }
    if (allocated) {
      auto getSize = [&](StringRef name) -> FailureOr<int64_t> {
        auto attr = module->getAttrOfType<IntegerAttr>(name);
        if (!attr)
          return module.emitError("module has no '")
                 << name << "': run lethe-assign-buffers, or verify with "
                 << "allocated=false";
        return attr.getInt();
      };
      FailureOr<int64_t> device =
          getSize(LetheDialect::DeviceArenaBytesAttrHelper::getNameStr());
      if (failed(device))
        return signalPassFailure();
      FailureOr<int64_t> host =
          getSize(LetheDialect::HostArenaBytesAttrHelper::getNameStr());
      if (failed(host))
        return signalPassFailure();
      limits.deviceArena = *device;
      limits.hostArena = *host;
      if (auto attr =
              LetheDialect::ArenaAlignmentAttrHelper(module->getContext())
                  .getAttr(module))
        limits.alignment = std::max<int64_t>(1, attr.getInt());
    }

    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FailureOr<ExplicitProgram> program = ExplicitProgram::build(func);
      if (failed(program))
        return signalPassFailure();
      ProgramVerifier verifier(*program, limits);
      LogicalResult result = verifier.run();
      numBuffers += program->getBuffers().size();
      numCrossStreamReads += verifier.getNumCrossStreamReads();
      if (failed(result))
        return signalPassFailure();
    }
    if (allocated && limits.budget && limits.deviceArena > *limits.budget) {
      module.emitError("device arena of ")
          << limits.deviceArena << " bytes exceeds the budget of "
          << *limits.budget << " bytes";
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }
};
} // namespace

//===- Program.cpp - Issue order, streams and buffers of a program --------===//

#include "lethe/Analysis/Program.h"

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Analysis/TypeBytes.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Support/IntervalPacking.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"

using namespace mlir;
using namespace lethe;

DeviceProfile lethe::deviceForFunction(const DeviceProfile &profile,
                                       func::FuncOp func) {
  DeviceProfile result = profile;
  if (auto ranks =
          LetheDialect::RanksPerHostAttrHelper(func.getContext()).getAttr(func))
    result.ranksPerHost = std::max<int64_t>(1, ranks.getInt());
  return result;
}

Stream lethe::getOpStream(Operation *op) {
  // Read by its name's text: the helper's StringAttr is looked up in the
  // context's uniquer on every call (each program pass asks for every op).
  // `lethe.stream` is never an inherent attribute.
  if (auto attr = dyn_cast_or_null<StreamAttr>(op->getDiscardableAttr(
          LetheDialect::StreamAttrHelper::getNameStr())))
    return attr.getValue();
  if (isa<OffloadOp>(op))
    return Stream::D2H;
  if (isa<PrefetchOp>(op))
    return Stream::H2D;
  if (isa<CollectiveOp>(op))
    return Stream::Comm;
  if (auto timeline = dyn_cast<TestTimelineOp>(op))
    return timeline.getStream();
  // Imported collectives carried by lethe.node (`c10d.all_gather`).
  if (auto node = dyn_cast<NodeOp>(op))
    if (TrainingGraph::classifyKind(node.getKind()) & NodeFlagCollective)
      return Stream::Comm;
  return Stream::Compute;
}

bool lethe::isInPlaceWriter(Operation *op) {
  auto node = dyn_cast<NodeOp>(op);
  return node && node.getAliases() &&
         llvm::any_of(*node.getAliases(),
                      [](int64_t operand) { return operand >= 0; }) &&
         (TrainingGraph::classifyKind(node.getKind()) & NodeFlagMutates);
}

bool ExplicitProgram::isAllocatingResult(Operation *op, unsigned index) {
  Type type = op->getResult(index).getType();
  if (!isa<RankedTensorType, HostTensorType>(type))
    return false;
  if (isa<AwaitOp, RecomputeOp>(op))
    return false;
  if (auto node = dyn_cast<NodeOp>(op))
    return node.getAliasedOperand(index) < 0;
  return true;
}

unsigned ExplicitProgram::getPosition(Operation *op) const {
  if (positions.empty()) {
    positions.reserve(ops.size());
    for (auto [pos, each] : llvm::enumerate(ops))
      positions[each] = pos;
  }
  return positions.at(op);
}

Value ExplicitProgram::getStorage(Value value) const {
  auto it = storageOf.find(value);
  return it == storageOf.end() ? value : it->second;
}

int32_t ExplicitProgram::getBufferIndex(Value value) const {
  auto it = bufferOf.find(getStorage(value));
  return it == bufferOf.end() ? -1 : it->second;
}

FailureOr<ExplicitProgram> ExplicitProgram::build(func::FuncOp func) {
  ExplicitProgram program;
  if (func.getBody().getBlocks().size() > 1)
    return func.emitError("lethe programs have one block; '")
           << func.getSymName() << "' has "
           << func.getBody().getBlocks().size();

  // About an op and a buffer per op of the body (recompute regions add a
  // few): reserved, so that the maps are not rehashed as they grow.
  const size_t numOps =
      func.getBody().empty() ? 0 : func.getBody().front().getOperations().size();
  program.ops.reserve(numOps);
  program.bufferOf.reserve(numOps);
  program.buffers.reserve(numOps);
  TypeBytesCache typeBytes;
  WalkResult walk = func.getBody().walk<WalkOrder::PreOrder>(
      [&](Operation *op) -> WalkResult {
        unsigned pos = program.ops.size();
        program.ops.push_back(op);
        if (op->getNumRegions() && !isa<RecomputeOp>(op))
          return op->emitError("lethe programs cannot hold region op '")
                 << op->getName() << "'";

        // Storages of the results.
        if (auto node = dyn_cast<NodeOp>(op)) {
          for (OpResult result : op->getResults()) {
            int64_t operand = node.getAliasedOperand(result.getResultNumber());
            if (operand >= 0)
              program.storageOf[result] =
                  program.getStorage(op->getOperand(operand));
          }
        } else if (auto await = dyn_cast<AwaitOp>(op)) {
          for (auto [result, forwarded] :
               llvm::zip(await.getResults(), await.getValues()))
            program.storageOf[result] = program.getStorage(forwarded);
        } else if (auto yield = dyn_cast<YieldOp>(op)) {
          Operation *parent = yield->getParentOp();
          for (auto [result, yielded] :
               llvm::zip(parent->getResults(), yield.getValues()))
            program.storageOf[result] = program.getStorage(yielded);
        }

        for (OpResult result : op->getResults()) {
          if (!isAllocatingResult(op, result.getResultNumber()))
            continue;
          int64_t bytes = typeBytes.get(result.getType());
          if (bytes < 0)
            return op->emitError("result #")
                   << result.getResultNumber() << " of dynamic type "
                   << result.getType() << " has no static size";
          ProgramBuffer buffer;
          buffer.value = result;
          buffer.defPos = pos;
          buffer.bytes = bytes;
          buffer.host = isa<HostTensorType>(result.getType());
          program.bufferOf[result] = program.buffers.size();
          program.buffers.push_back(buffer);
        }

        if (auto release = dyn_cast<ReleaseOp>(op)) {
          int32_t index = program.getBufferIndex(release.getValue());
          if (index >= 0 && !program.buffers[index].release) {
            program.buffers[index].release = op;
            program.buffers[index].endPos = pos;
          }
        }
        if (isa<func::ReturnOp>(op))
          for (Value output : op->getOperands())
            if (int32_t index = program.getBufferIndex(output); index >= 0)
              program.buffers[index].isOutput = true;
        return WalkResult::advance();
      });
  if (walk.wasInterrupted())
    return failure();

  for (ProgramBuffer &buffer : program.buffers)
    if (!buffer.release)
      buffer.endPos = program.ops.size();
  return program;
}

std::vector<int64_t> ExplicitProgram::liveBytes(bool host) const {
  std::vector<int64_t> delta(ops.size() + 1, 0);
  for (const ProgramBuffer &buffer : buffers) {
    if (buffer.host != host)
      continue;
    delta[buffer.defPos] += buffer.bytes;
    delta[buffer.endPos] -= buffer.bytes;
  }
  std::vector<int64_t> live(ops.size(), 0);
  int64_t running = 0;
  for (size_t pos = 0; pos < ops.size(); ++pos) {
    running += delta[pos];
    live[pos] = running;
  }
  return live;
}

std::vector<PackInterval> lethe::arenaIntervals(const ExplicitProgram &program,
                                                bool host) {
  std::vector<PackInterval> intervals;
  for (const ProgramBuffer &buffer : program.getBuffers())
    if (buffer.host == host)
      intervals.push_back({buffer.defPos, buffer.endPos, buffer.bytes});
  return intervals;
}

PackedProgram lethe::packProgram(const ExplicitProgram &program,
                                 int64_t alignment) {
  PackedProgram result;
  result.offsets.assign(program.getBuffers().size(), -1);
  for (bool host : {false, true}) {
    std::vector<PackInterval> intervals = arenaIntervals(program, host);
    std::vector<size_t> indices;
    for (auto [index, buffer] : llvm::enumerate(program.getBuffers()))
      if (buffer.host == host)
        indices.push_back(index);
    PackResult packed = packIntervals(intervals, alignment);
    for (auto [slot, index] : llvm::enumerate(indices))
      result.offsets[index] = packed.offsets[slot];
    (host ? result.hostArena : result.deviceArena) = packed.arenaBytes;
    (host ? result.hostMaxLive : result.deviceMaxLive) = packed.maxLiveBytes;
    (host ? result.numHostBuffers : result.numDeviceBuffers) =
        intervals.size();
  }
  return result;
}

std::string lethe::describeProgramValue(Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  Operation *scope = value.getParentBlock()->getParentOp();
  while (scope && !isa<func::FuncOp>(scope) && scope->getParentOp())
    scope = scope->getParentOp();
  if (scope) {
    AsmState state(scope);
    value.printAsOperand(os, state);
  } else {
    value.printAsOperand(os, OpPrintingFlags());
  }
  if (auto node = value.getDefiningOp<NodeOp>()) {
    os << " ('" << node.getKind() << "'";
    if (std::optional<StringRef> name = node.getName())
      os << " \"" << *name << "\"";
    os << ")";
  }
  return text;
}

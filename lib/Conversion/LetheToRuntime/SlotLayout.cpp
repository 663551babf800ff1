//===- SlotLayout.cpp - Every tensor's place in an arena ------------------===//
//
// Planned buffers at their lethe-assign-buffers offsets, resident inputs
// (the function's arguments) after the planned device arena, host buffers
// in the pinned arena; each gets a unique C identifier after its node.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace lethe;
using namespace lethe::lowering;

namespace {

/// Names the generated code defines or includes besides the slots.
bool isReservedName(StringRef name) {
  static const llvm::StringSet<> reserved = {
      // C++ keywords a node could be named after.
      "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class",
      "const", "continue", "default", "delete", "do", "double", "else", "enum",
      "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "not",
      "operator", "or", "private", "protected", "public", "register", "return",
      "short", "signed", "sizeof", "static", "struct", "switch", "template",
      "this", "throw", "true", "try", "typedef", "typename", "union",
      "unsigned", "using", "virtual", "void", "volatile", "while", "xor",
      // The generated program's own names.
      "rt", "init", "step", "checksum", "program", "letheProgram"};
  // The C++ emitter names its locals v1, v2, ...: a node named so would
  // be shadowed by them.
  bool emitterLocal = name.size() > 1 && name.front() == 'v' &&
                      llvm::all_of(name.drop_front(), llvm::isDigit);
  return reserved.contains(name) || emitterLocal || name.starts_with("lethe") ||
         name.starts_with("LETHE") || name.starts_with("__");
}

/// A C identifier for `hint`: other characters become '_'.
std::string sanitize(StringRef hint) {
  std::string name;
  for (char c : hint)
    name.push_back(llvm::isAlnum(c) ? c : '_');
  if (name.empty() || llvm::isDigit(name.front()))
    name = "t_" + name;
  return name;
}

} // namespace

std::string Lowering::uniqueName(StringRef hint) {
  std::string base = sanitize(hint);
  if (isReservedName(base))
    base += "_";
  std::string name = base;
  for (unsigned n = 2; usedNames.contains(name); ++n)
    name = base + "_v" + std::to_string(n);
  usedNames.insert(name);
  return name;
}

/// The node's name (with a result suffix for multi-result nodes), the
/// offloaded tensor's name for host copies and prefetches.
std::string Lowering::bufferHint(Value value) const {
  Operation *op = value.getDefiningOp();
  unsigned index = cast<OpResult>(value).getResultNumber();
  std::string suffix =
      op->getNumResults() > 1 && !isa<OffloadOp, PrefetchOp>(op)
          ? "_r" + std::to_string(index)
          : "";
  if (op->getParentOfType<RecomputeOp>())
    suffix += "_re";
  if (auto node = dyn_cast<NodeOp>(op))
    if (std::optional<StringRef> name = node.getName())
      return (*name + suffix).str();
  if (auto collective = dyn_cast<CollectiveOp>(op))
    if (std::optional<StringRef> name = collective.getName())
      return (*name + suffix).str();
  if (auto offload = dyn_cast<OffloadOp>(op)) {
    Value source = program.getStorage(offload.getSource());
    if (const Slot *slot = slotOf(source))
      return slot->name + "_host";
  }
  if (auto prefetch = dyn_cast<PrefetchOp>(op)) {
    Value host = program.getStorage(prefetch.getSource());
    if (const Slot *slot = slotOf(host)) {
      StringRef name = slot->name;
      name.consume_back("_host");
      return (name + "_back").str();
    }
  }
  return "buf" + std::to_string(program.getBufferIndex(value));
}

const Slot *Lowering::slotOf(Value value) const {
  auto it = slotIndex.find(program.getStorage(value));
  return it == slotIndex.end() ? nullptr : &slots[it->second];
}

LogicalResult Lowering::requireSlot(Operation *op, Value value,
                                    const Slot *&slot) {
  slot = slotOf(value);
  if (!slot)
    return op->emitError("lethe-lower-to-runtime: ")
           << ssa(value) << " has no storage in an arena";
  return success();
}

LogicalResult Lowering::assignSlots() {
  auto i64Attr = [&](StringRef name) -> std::optional<int64_t> {
    if (auto attr = module->getAttrOfType<IntegerAttr>(name))
      return attr.getInt();
    return std::nullopt;
  };
  std::optional<int64_t> deviceArena =
      i64Attr(LetheDialect::DeviceArenaBytesAttrHelper::getNameStr());
  if (!deviceArena)
    return module.emitError("lethe-lower-to-runtime: the module has no ")
           << LetheDialect::DeviceArenaBytesAttrHelper::getNameStr()
           << ": lower an allocated program (run lethe-assign-buffers)";
  plannedArenaBytes = *deviceArena;
  hostArenaBytes =
      i64Attr(LetheDialect::HostArenaBytesAttrHelper::getNameStr()).value_or(0);
  int64_t alignment =
      i64Attr(LetheDialect::ArenaAlignmentAttrHelper::getNameStr())
          .value_or(256);
  if (alignment < 16 || !llvm::isPowerOf2_64(alignment))
    return module.emitError("lethe-lower-to-runtime: ")
           << LetheDialect::ArenaAlignmentAttrHelper::getNameStr()
           << " must be a power of two of at least 16 (the runtime's kernels "
              "move 16 bytes per access), got "
           << alignment;

  // Planned buffers at their offsets; names in issue order, so that a
  // prefetch is named after the offload it reverses.
  for (const ProgramBuffer &buffer : program.getBuffers()) {
    Operation *op = buffer.getDefiningOp();
    unsigned index = cast<OpResult>(buffer.value).getResultNumber();
    auto offsets =
        LetheDialect::OffsetsAttrHelper(op->getContext()).getAttr(op);
    if (!offsets || (int64_t)index >= offsets.size() || offsets[index] < 0)
      return op->emitError("lethe-lower-to-runtime: result #")
             << index << " (" << ssa(buffer.value)
             << ") has no arena offset: run lethe-assign-buffers";
    int64_t limit = buffer.host ? hostArenaBytes : plannedArenaBytes;
    if (offsets[index] + buffer.bytes > limit)
      return op->emitError("lethe-lower-to-runtime: result #")
             << index << " (" << ssa(buffer.value) << ") at [" << offsets[index]
             << ", " << offsets[index] + buffer.bytes << ") lies outside the "
             << (buffer.host ? "host" : "device") << " arena of " << limit
             << " bytes";
    Slot slot;
    slot.name = uniqueName(bufferHint(buffer.value));
    slot.offset = offsets[index];
    slot.bytes = buffer.bytes;
    slot.host = buffer.host;
    slotIndex[buffer.value] = slots.size();
    slots.push_back(std::move(slot));
  }

  // Resident inputs after the planned arena.
  int64_t next = llvm::alignTo(plannedArenaBytes, alignment);
  for (BlockArgument arg : func.getArguments()) {
    if (isa<HostTensorType>(arg.getType()))
      return func.emitError("lethe-lower-to-runtime: argument ")
             << ssa(arg) << " is a host tensor; inputs are device tensors";
    if (!isa<RankedTensorType>(arg.getType()))
      continue;
    int64_t bytes = getTypeBytes(arg.getType());
    if (bytes < 0)
      return func.emitError("lethe-lower-to-runtime: argument ")
             << ssa(arg) << " has no static size";
    auto name = func.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), LetheDialect::NameAttrHelper::getNameStr());
    Slot slot;
    slot.name = uniqueName(
        name ? name.getValue()
             : StringRef("arg" + std::to_string(arg.getArgNumber())));
    slot.offset = next;
    slot.bytes = bytes;
    slot.resident = true;
    slotIndex[arg] = slots.size();
    slots.push_back(std::move(slot));
    next = llvm::alignTo(next + bytes, alignment);
  }
  deviceArenaBytes = next;
  residentBytes = next - llvm::alignTo(plannedArenaBytes, alignment);
  return success();
}

//===- Lowering.h - The state of lethe-lower-to-runtime ---------*- C++ -*-===//
//
// The lowering of an allocated program to runtime calls, shared by the files
// of the pass: LetheToRuntime.cpp (the pass, op and program emission),
// SlotLayout.cpp (every tensor's slot in an arena and its C++ name) and
// P2PGroups.cpp (NCCL groups of point-to-point transfers).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_CONVERSION_LETHETORUNTIME_LOWERING_H
#define LETHE_LIB_CONVERSION_LETHETORUNTIME_LOWERING_H

#include "GemmMatcher.h"

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lethe::lowering {

/// A tensor's place in an arena, and the C++ constant that names it.
struct Slot {
  std::string name;
  int64_t offset = 0;
  int64_t bytes = 0;
  bool host = false;
  /// A function argument: resident before the step, after the planned
  /// arena.
  bool resident = false;
};

/// The NCCL group of a point-to-point op, if it has one.
std::optional<int64_t> p2pGroupOf(mlir::Operation *op);

/// The issue span (first and last position in `ops`) of every NCCL group
/// of two or more point-to-point transfers, by group.
llvm::DenseMap<int64_t, std::pair<size_t, size_t>>
findP2PGroupSpans(llvm::ArrayRef<mlir::Operation *> ops);

/// Lowers one allocated function into the module as EmitC: the slot
/// constants, init, step, checksum and the LetheRtProgram that names them.
class Lowering {
public:
  /// `remarkCategory`: the pass's argument, the category of its remarks.
  Lowering(mlir::ModuleOp module, mlir::func::FuncOp func,
           const ExplicitProgram &program, bool replayViews,
           llvm::StringRef remarkCategory)
      : module(module), func(func), program(program), asmState(func),
        builder(module.getContext()), replayViews(replayViews),
        remarkCategory(remarkCategory) {}

  mlir::LogicalResult run(llvm::StringRef name);

  unsigned numGemms = 0, numReplays = 0, numFallbacks = 0, numCopies = 0;
  uint32_t numEvents = 0;

private:
  // Slots (SlotLayout.cpp).
  mlir::LogicalResult assignSlots();
  std::string uniqueName(llvm::StringRef hint);
  std::string bufferHint(mlir::Value value) const;
  const Slot *slotOf(mlir::Value value) const;
  mlir::LogicalResult requireSlot(mlir::Operation *op, mlir::Value value,
                                  const Slot *&slot);

  // Emission helpers.
  mlir::Attribute opaque(const llvm::Twine &text) {
    return mlir::emitc::OpaqueAttr::get(builder.getContext(), text.str());
  }
  void comment(const llvm::Twine &text);
  void blankLine();
  void call(mlir::Location loc, llvm::StringRef callee,
            llvm::ArrayRef<mlir::Attribute> args);
  void emitWaits(mlir::Location loc, Stream stream,
                 mlir::ValueRange timepoints);
  void emitRecord(mlir::Location loc, Stream stream, mlir::Value timepoint);
  std::string bufExpr(const Slot &slot, int64_t bytes) const;
  std::string ssa(mlir::Value value);
  std::string describe(mlir::Operation *op);
  mlir::emitc::FuncOp beginFunction(llvm::StringRef name);
  void endFunction();

  // Ops.
  mlir::LogicalResult lowerOp(mlir::Operation *op);
  mlir::LogicalResult lowerNode(NodeOp node);
  mlir::LogicalResult lowerGemm(NodeOp node, const GemmMatch &gemm);
  mlir::LogicalResult lowerReplay(NodeOp node, double timeUs);
  mlir::LogicalResult lowerCopy(mlir::Operation *op, bool toHost);
  mlir::LogicalResult lowerRelease(ReleaseOp release);
  mlir::LogicalResult lowerCollective(CollectiveOp collective);
  mlir::LogicalResult lowerPointToPoint(CollectiveOp collective);
  /// Collectives and transfers run on the comm stream of one communicator
  /// (`what` names them in the error); records its size in worldSize.
  mlir::LogicalResult checkOnCommStream(CollectiveOp collective,
                                        llvm::StringRef what);
  /// The runtime buffer expression of `value`, which `collective` sends or
  /// receives.
  mlir::FailureOr<std::string> commBuffer(CollectiveOp collective,
                                          mlir::Value value);
  /// Issues the NCCL group `group` of point-to-point transfers, ops[first]
  /// .. ops[last] (P2PGroups.cpp).
  mlir::LogicalResult emitP2PGroup(llvm::ArrayRef<mlir::Operation *> ops,
                                   size_t first, size_t last, int64_t group);

  void emitSlots();
  void emitInit();
  mlir::LogicalResult emitStep();
  void emitChecksum();
  void emitProgram(llvm::StringRef name);

  mlir::ModuleOp module;
  mlir::func::FuncOp func;
  const ExplicitProgram &program;
  mlir::AsmState asmState;
  mlir::OpBuilder builder;
  bool replayViews;
  llvm::StringRef remarkCategory;

  std::vector<Slot> slots;
  llvm::DenseMap<mlir::Value, unsigned> slotIndex;
  llvm::StringSet<> usedNames;
  int64_t plannedArenaBytes = 0, deviceArenaBytes = 0, hostArenaBytes = 0;
  int64_t residentBytes = 0;
  int32_t worldSize = 0;
  double computeUs = 0;
  llvm::DenseMap<mlir::Value, llvm::SmallVector<uint32_t, 2>> eventsOf;
  /// Per stream, the events it is known to be ordered after.
  std::array<llvm::DenseSet<uint32_t>, 4> ordered;
  /// The `rt` literal of the function being emitted.
  mlir::Value rt;
  mlir::Type rtType;
};

} // namespace lethe::lowering

#endif // LETHE_LIB_CONVERSION_LETHETORUNTIME_LOWERING_H

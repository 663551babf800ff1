//===- AssignBuffers.cpp - Static arena offsets from lifetimes ------------===//

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Support/IntervalPacking.h"
#include "lethe/Support/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Remarks.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

namespace lethe {
#define GEN_PASS_DEF_ASSIGNBUFFERS
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

struct ArenaSizes {
  int64_t deviceArena = 0, deviceMaxLive = 0;
  int64_t hostArena = 0, hostMaxLive = 0;
};

std::string percentOver(int64_t arena, int64_t bound) {
  if (bound == 0)
    return "+0.00%";
  std::string text;
  llvm::raw_string_ostream(text)
      << llvm::format("%+.2f%%", 100.0 * (arena - bound) / bound);
  return text;
}

struct AssignBuffersPass
    : public lethe::impl::AssignBuffersBase<AssignBuffersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!isValidAlignment(alignment)) {
      module.emitError("lethe-assign-buffers: alignment must be a power of "
                       "two at most ")
          << kMaxAlignment << ", got " << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    ArenaSizes total;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FailureOr<ArenaSizes> sizes = assign(func);
      if (failed(sizes))
        return signalPassFailure();
      total.deviceArena = std::max(total.deviceArena, sizes->deviceArena);
      total.deviceMaxLive = std::max(total.deviceMaxLive, sizes->deviceMaxLive);
      total.hostArena = std::max(total.hostArena, sizes->hostArena);
      total.hostMaxLive = std::max(total.hostMaxLive, sizes->hostMaxLive);
    }
    Builder builder(module.getContext());
    MLIRContext *ctx = module.getContext();
    auto setBytes = [&](auto helper, int64_t value) {
      helper.setAttr(module, builder.getI64IntegerAttr(value));
    };
    setBytes(LetheDialect::DeviceArenaBytesAttrHelper(ctx), total.deviceArena);
    setBytes(LetheDialect::HostArenaBytesAttrHelper(ctx), total.hostArena);
    setBytes(LetheDialect::MaxLiveBytesAttrHelper(ctx), total.deviceMaxLive);
    setBytes(LetheDialect::HostMaxLiveBytesAttrHelper(ctx), total.hostMaxLive);
    setBytes(LetheDialect::ArenaAlignmentAttrHelper(ctx), alignment);
    deviceArenaBytes = total.deviceArena;
    maxLiveBytes = total.deviceMaxLive;
    hostArenaBytes = total.hostArena;
    hostMaxLiveBytes = total.hostMaxLive;
  }

  FailureOr<ArenaSizes> assign(func::FuncOp func) {
    FailureOr<ExplicitProgram> program = ExplicitProgram::build(func);
    if (failed(program))
      return failure();
    ArrayRef<ProgramBuffer> buffers = program->getBuffers();
    PackedProgram packed = packProgram(*program, alignment);
    const std::vector<int64_t> &offsets = packed.offsets;
    ArenaSizes sizes{packed.deviceArena, packed.deviceMaxLive,
                     packed.hostArena, packed.hostMaxLive};
    numDeviceBuffers += packed.numDeviceBuffers;
    numHostBuffers += packed.numHostBuffers;

    // One offsets array per op with an allocating result.
    Builder builder(func.getContext());
    llvm::MapVector<Operation *, SmallVector<int64_t>> perOp;
    for (auto [index, buffer] : llvm::enumerate(buffers)) {
      Operation *op = buffer.getDefiningOp();
      auto [it, inserted] = perOp.try_emplace(op);
      if (inserted)
        it->second.assign(op->getNumResults(), -1);
      it->second[cast<OpResult>(buffer.value).getResultNumber()] =
          offsets[index];
    }
    LetheDialect::OffsetsAttrHelper offsetsAttr(func.getContext());
    for (auto &[op, entries] : perOp)
      offsetsAttr.setAttr(op, builder.getDenseI64ArrayAttr(entries));

    // The module's largest arenas are statistics; each function's are an
    // analysis remark (--remarks-filter=lethe-assign-buffers).
    if (remark::detail::InFlightRemark report =
            remark::analysis(func.getLoc(), remark::RemarkOpts::name("arena")
                                                .category(getArgument())
                                                .function(func.getSymName())))
      report << llvm::formatv(
                    "device arena {0} bytes for a max-live of {1} "
                    "({2}); host arena {3} bytes for a max-live of "
                    "{4}",
                    sizes.deviceArena, sizes.deviceMaxLive,
                    percentOver(sizes.deviceArena, sizes.deviceMaxLive),
                    sizes.hostArena, sizes.hostMaxLive)
                    .str();
    return sizes;
  }
};
} // namespace

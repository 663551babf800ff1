//===- AnnotateCosts.cpp - Time every node: measured, else modelled -------===//

#include "lethe/Analysis/CostModel.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/Transforms/Passes.h"
#include "lethe/Support/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Remarks.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace lethe {
#define GEN_PASS_DEF_ANNOTATECOSTS
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;

namespace {

struct AnnotateCostsPass
    : public lethe::impl::AnnotateCostsBase<AnnotateCostsPass> {
  using AnnotateCostsBase::AnnotateCostsBase;

  void runOnOperation() override {
    llvm::Expected<DeviceProfile> profile = DeviceProfile::load(device);
    if (!profile) {
      getOperation()->emitError() << "cannot load device profile: "
                                  << llvm::toString(profile.takeError());
      return signalPassFailure();
    }
    CostModel model(std::move(*profile));
    llvm::StringSet<> remarkedKinds;
    Builder builder(&getContext());

    bool tooLong = false;
    auto record = [&](Operation *op, const OpCost &cost) {
      // Nanosecond resolution is far below what the model can tell apart,
      // and keeps the printed times readable.
      double timeUs = std::round(cost.timeUs * 1000.0) / 1000.0;
      if (!(timeUs <= kMaxTimeUs)) {
        // Sums of such times would overflow.
        op->emitError("the cost model gives this op ")
            << formatNumber(timeUs) << " us, over the limit of "
            << formatNumber(kMaxTimeUs) << " us (check the device profile's "
            << "rates and the op's shapes)";
        tooLong = true;
        return;
      }
      op->setAttr("time_us", builder.getF64FloatAttr(timeUs));
      LetheDialect::CostSourceAttrHelper(op->getContext())
          .setAttr(op, CostSourceAttr::get(op->getContext(), cost.source));
      count(cost.source);
    };

    getOperation()->walk([&](Operation *op) {
      if (auto node = dyn_cast<NodeOp>(op)) {
        if (!overwrite && node.getTimeUsAttr()) {
          keep(op, model.estimate(node).source, builder);
          return;
        }
        OpCost cost = model.model(node);
        if (!cost.knownKind && remarkedKinds.insert(node.getKind()).second) {
          ++numUnknownKinds;
          remark::missed(
              node.getLoc(),
              remark::RemarkOpts::name("no-formula").category(getArgument()))
              << llvm::formatv("no cost formula for op kind '{0}': modelled "
                               "as memory-bound ({1} bytes over HBM "
                               "bandwidth)",
                               node.getKind(), static_cast<int64_t>(cost.bytes))
                     .str();
        }
        record(op, cost);
      } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
        if (!overwrite && collective.getTimeUsAttr()) {
          keep(op, model.estimate(collective).source, builder);
          return;
        }
        record(op, model.model(collective));
      }
    });
    if (tooLong)
      signalPassFailure();
  }

  /// Counts an op whose time stays, marking it measured unless an earlier
  /// run said where its time came from.
  void keep(Operation *op, CostSource source, Builder &builder) {
    LetheDialect::CostSourceAttrHelper helper(op->getContext());
    if (!helper.isAttrPresent(op))
      helper.setAttr(op, CostSourceAttr::get(op->getContext(), source));
    count(source);
  }

  void count(CostSource source) {
    switch (source) {
    case CostSource::Measured:
      ++numMeasured;
      break;
    case CostSource::Analytic:
      ++numAnalytic;
      break;
    case CostSource::Bandwidth:
      ++numBandwidth;
      break;
    }
  }
};

} // namespace

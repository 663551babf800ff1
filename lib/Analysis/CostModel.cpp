//===- CostModel.cpp - Time of an op on a device --------------------------===//
//
// The FLOP formulas by op kind live in OpWork.cpp; this file turns FLOPs and
// bytes into time and decides which model applies.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/CostModel.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace lethe;

StringRef CostModel::dtypeName(Type elementType) {
  if (!elementType)
    return "f32";
  if (elementType.isBF16())
    return "bf16";
  if (elementType.isF16())
    return "f16";
  if (elementType.isF64())
    return "f64";
  if (auto floatType = dyn_cast<FloatType>(elementType))
    return floatType.getWidth() == 8 ? "f8" : "f32";
  if (elementType.isInteger(8))
    return "i8";
  return "f32";
}

/// The op name without its framework prefix and ATen overload:
/// `aten.native_layer_norm.default` -> `native_layer_norm`.
static StringRef atenRoot(StringRef kind) {
  if (!kind.consume_front("aten.") && !kind.consume_front("torch.aten."))
    return {};
  return kind.split('.').first;
}

/// ATen ops that never launch a kernel (they return a view of an operand),
/// for graphs whose importer did not mark the alias.
static bool isAtenViewRoot(StringRef root) {
  return llvm::is_contained(
      {"view", "_unsafe_view", "reshape_alias", "_reshape_alias", "t",
       "transpose", "permute", "expand", "expand_as", "unsqueeze", "squeeze",
       "slice", "select", "split", "split_with_sizes", "unbind", "alias",
       "detach", "as_strided", "narrow", "diagonal", "view_as",
       "lift_fresh", "unfold", "chunk", "tensor_split", "movedim",
       "view_as_real", "view_as_complex", "_conj", "_neg_view"},
      root);
}

bool CostModel::isView(NodeOp node) {
  // In-place ops alias their result to an operand too, but they write it.
  StringRef kind = node.getKind();
  StringRef root = atenRoot(kind);
  if (!root.empty() && root.ends_with("_") && !root.ends_with("__"))
    return false;
  std::optional<ArrayRef<int64_t>> aliases = node.getAliases();
  // Declared aliases decide: a view op into which a fusing compiler folded
  // a pointwise chain writes a buffer of its own (its alias is -1), and
  // pricing it as a free view made recomputing it look free (inductor:
  // 96 MiB for 2.88 us). The name decides only where nothing is declared.
  if (!aliases)
    return !root.empty() && isAtenViewRoot(root);
  if (aliases->empty())
    return false;
  for (auto [index, operand] : llvm::enumerate(*aliases))
    if (operand < 0 && getTypeBytes(node->getResult(index).getType()) > 0)
      return false;
  return true;
}

/// Bytes an ATen op reads of operand `index` when it reads only part of it,
/// or nullopt when it reads all of it: gathers read from their source just
/// the elements they gather, and the NLL-loss backward reads only the shape
/// of its input.
static std::optional<int64_t> partialRead(NodeOp node, StringRef root,
                                          unsigned index) {
  auto tensorBytes = [](Value value) {
    return std::max<int64_t>(0, getTypeBytes(value.getType()));
  };
  if (index == 0 && node.getNumResults() > 0 &&
      llvm::is_contained({"embedding", "index", "index_select", "gather",
                          "take"},
                         root))
    return tensorBytes(node.getResult(0));
  if (index == 0 && node.getInputs().size() > 1 &&
      (root == "nll_loss_forward" || root == "nll_loss2d_forward")) {
    // One element of the input per target.
    auto input = dyn_cast<ShapedType>(node.getInputs()[0].getType());
    auto target = dyn_cast<ShapedType>(node.getInputs()[1].getType());
    if (input && target && input.hasStaticShape() && target.hasStaticShape())
      return target.getNumElements() *
             std::max<int64_t>(1, input.getElementTypeBitWidth() / 8);
  }
  if (index == 1 &&
      (root == "nll_loss_backward" || root == "nll_loss2d_backward"))
    return 0;
  return std::nullopt;
}

double CostModel::bytesMoved(NodeOp node) {
  StringRef root = atenRoot(node.getKind());
  double bytes = 0;
  llvm::SmallPtrSet<Value, 8> seen;
  for (auto [index, operand] : llvm::enumerate(node.getInputs())) {
    if (!seen.insert(operand).second)
      continue;
    std::optional<int64_t> partial =
        root.empty() ? std::nullopt : partialRead(node, root, index);
    bytes += partial ? *partial
                     : std::max<int64_t>(0, getTypeBytes(operand.getType()));
  }
  bool inPlace = !root.empty() && root.ends_with("_") && !root.ends_with("__");
  for (auto [index, result] : llvm::enumerate(node.getResults()))
    if (node.getAliasedOperand(index) < 0 || inPlace)
      bytes += std::max<int64_t>(0, getTypeBytes(result.getType()));
  return bytes;
}

bool CostModel::isKnownMemoryBoundKind(StringRef kind) {
  if (StringRef root = atenRoot(kind); !root.empty()) {
    if (isAtenViewRoot(root))
      return true;
    // Elementwise arithmetic and activations, normalisations, reductions,
    // losses, copies and casts, indexing, pooling, RNG, factories, and the
    // optimizers' foreach/fused updates: all move bytes, little arithmetic.
    // Matched by prefix so that backward and overload forms are included.
    static constexpr StringLiteral prefixes[] = {
        "abs", "acos", "add", "alias", "all", "amax", "amin", "any",
        "arange", "argmax", "argmin", "argsort", "as_strided", "asin", "atan",
        "avg_pool", "adaptive_avg_pool", "adaptive_max_pool",
        "batch_norm", "bernoulli", "bitwise", "bucketize", "cat", "ceil",
        "clamp", "clip", "clone", "constant_pad", "contiguous", "copy", "cos",
        "cudnn_batch_norm", "cumprod", "cumsum", "detach", "div", "dropout",
        "elu", "embedding", "empty", "eq", "erf", "exp", "expand", "fill",
        "flip", "floor", "fmod", "full", "gather", "ge", "gelu", "glu",
        "group_norm", "gt", "hardsigmoid", "hardswish", "hardtanh", "index",
        "isinf", "isnan", "layer_norm", "le", "leaky_relu", "lerp",
        "lift_fresh", "linspace", "log", "logical", "logsumexp", "lt",
        "masked", "max", "maximum", "mean", "min", "minimum", "mish",
        "mse_loss", "mul", "multinomial", "nan_to_num", "native_batch_norm",
        "native_dropout", "native_group_norm", "native_layer_norm", "ne",
        "neg", "new_", "nll_loss", "norm", "normal", "ones", "pad", "permute",
        "pow", "prod", "rand", "reciprocal", "reflection_pad", "relu",
        "remainder", "repeat", "replication_pad", "reshape", "rms_norm",
        "roll", "round", "rsqrt", "rsub", "scalar_tensor", "scatter",
        "select", "sgn", "sigmoid", "sign", "silu", "sin", "slice", "smooth",
        "soft", "sort", "split", "sqrt", "square", "squeeze", "stack", "std",
        "sub", "sum", "tanh", "threshold", "to", "topk", "transpose",
        "tril", "triu", "trunc", "type_as", "unbind", "uniform", "unsqueeze",
        "upsample", "var", "view", "where", "zero", "_adaptive_avg_pool",
        "_amp_", "_foreach_", "_fused_adam", "_fused_sgd", "_fused_rms_norm",
        "_fused_dropout", "_log_softmax", "_masked", "_native_batch_norm",
        "_softmax", "_to_copy", "_unsafe", "_reshape", "_weight_norm",
        "cross_entropy", "binary_cross_entropy", "kl_div", "huber_loss",
        "l1_loss", "one_hot", "bincount", "histc", "unique", "nonzero",
        "masked_fill", "index_put", "_index_put", "_embedding_bag",
        "max_pool", "_unique", "_assert", "sym_", "_local_scalar_dense",
        "item", "resize", "set_"};
    return llvm::any_of(prefixes,
                        [&](StringRef prefix) { return root.starts_with(prefix); });
  }
  StringRef dialect = kind.split('.').first;
  StringRef op = kind.split('.').second;
  if (dialect == "stablehlo" || dialect == "mhlo" || dialect == "chlo")
    // Everything but the ops that may hide arithmetic we cannot count.
    return !llvm::is_contained({"custom_call", "fft", "cholesky",
                                "triangular_solve", "while", "case", "if",
                                "call", "composite", "reduce_window",
                                "sort"},
                               op);
  if (dialect == "tosa")
    return !llvm::is_contained({"fft2d", "rfft2d", "custom", "while_loop",
                                "cond_if"},
                               op);
  if (dialect == "linalg")
    // Named ops other than contractions and convolutions are elementwise,
    // fills, copies, transposes, pooling or reductions; `generic` can hold
    // anything.
    return op != "generic";
  return llvm::is_contained({"tensor", "arith", "math", "bufferization"},
                            dialect);
}

/// Microseconds to move `bytes` at `bytesPerSec`.
static double transferUs(double bytes, double bytesPerSec) {
  return bytesPerSec > 0 ? bytes / bytesPerSec * 1e6 : 0.0;
}

OpCost CostModel::model(NodeOp node) const {
  OpCost cost;
  if (isView(node)) {
    cost.source = CostSource::Bandwidth;
    cost.timeUs = profile.viewUs;
    return cost;
  }
  cost.bytes = bytesMoved(node);
  double memoryUs = transferUs(cost.bytes, profile.hbmBytesPerSec);
  if (std::optional<ComputeWork> work = computeWork(node)) {
    double rate = profile.flopsFor(dtypeName(work->elementType)) *
                  profile.efficiencyFor(work->opClass);
    cost.source = CostSource::Analytic;
    cost.flops = work->flops;
    cost.timeUs = std::max(work->flops / rate * 1e6, memoryUs) +
                  profile.launchOverheadUs;
    return cost;
  }
  cost.source = CostSource::Bandwidth;
  cost.knownKind = isKnownMemoryBoundKind(node.getKind());
  cost.timeUs = memoryUs + profile.launchOverheadUs;
  return cost;
}

/// The source recorded on an op that carries a time: an earlier run of the
/// cost model leaves `lethe.cost_source`; anything else was measured.
static CostSource recordedSource(Operation *op) {
  if (auto attr =
          LetheDialect::CostSourceAttrHelper(op->getContext()).getAttr(op))
    return attr.getValue();
  return CostSource::Measured;
}

OpCost CostModel::estimate(NodeOp node) const {
  if (FloatAttr time = node.getTimeUsAttr()) {
    OpCost cost;
    cost.timeUs = time.getValueAsDouble();
    cost.source = recordedSource(node);
    cost.bytes = bytesMoved(node);
    return cost;
  }
  return model(node);
}

OpCost CostModel::model(CollectiveOp op) const {
  OpCost cost;
  cost.source = CostSource::Bandwidth;
  double ranks = static_cast<double>(op.getGroup().size());
  int64_t inBytes = op.getInput() ? getTypeBytes(op.getInput().getType()) : 0;
  int64_t outBytes =
      op.getResult() ? getTypeBytes(op.getResult().getType()) : 0;
  double full = static_cast<double>(std::max(inBytes, outBytes));
  if (op.isPointToPoint()) {
    // A send (or the matching recv) moves its whole tensor across once.
    cost.bytes = full;
  } else if (ranks > 1) {
    // Ring algorithms (NCCL's for large messages): each rank sends and
    // receives (n-1)/n of the full buffer once, twice for all-reduce
    // (reduce-scatter then all-gather).
    double passes = op.getKind() == CollectiveKind::AllReduce ? 2.0 : 1.0;
    cost.bytes = passes * (ranks - 1) / ranks * full;
  }
  // Without a peer link, collectives go through host memory over PCIe.
  double bandwidth = profile.nvlinkBytesPerSec > 0
                         ? profile.nvlinkBytesPerSec
                         : std::min(profile.d2hBytesPerSec,
                                    profile.h2dBytesPerSec);
  // One NCCL call costs the fitted fixed part of the measured collective
  // (lethe-calibrate: launch, the ring's setup and its latency; 13.2 us on
  // an H200 pair, three kernel launches), else a kernel launch.
  double fixedUs = profile.collectiveFixedUs > 0 ? profile.collectiveFixedUs
                                                 : profile.launchOverheadUs;
  cost.timeUs = transferUs(cost.bytes, bandwidth) + fixedUs;
  return cost;
}

OpCost CostModel::estimate(CollectiveOp op) const {
  if (FloatAttr time = op.getTimeUsAttr()) {
    OpCost cost = model(op);
    cost.timeUs = time.getValueAsDouble();
    cost.source = recordedSource(op);
    return cost;
  }
  return model(op);
}

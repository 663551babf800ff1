//===- OpWork.cpp - FLOPs of matmul, convolution and attention ops --------===//
//
// The analytic half of the cost model: FLOPs by op kind, for the ATen,
// StableHLO, linalg and TOSA spellings of contractions, convolutions and
// attention. One multiply-add counts as 2 FLOPs. Formulas are derived from
// shapes wherever possible, so layouts need not be known; where they must
// be (contracting dimensions, the output-feature dimension of a kernel) the
// source op's attributes decide, and a conventional default is used
// otherwise. docs/CostModel.md lists every formula.
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/CostModel.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace lethe;

namespace {

/// Ranked tensor operand `index` of the node, or null.
RankedTensorType operandType(NodeOp node, unsigned index) {
  if (index >= node.getInputs().size())
    return {};
  auto type = dyn_cast<RankedTensorType>(node.getInputs()[index].getType());
  return type && type.hasStaticShape() ? type : RankedTensorType();
}

/// Ranked tensor result `index` of the node, or null (a `none` result of an
/// ATen op that did not compute that output, say).
RankedTensorType resultType(NodeOp node, unsigned index) {
  if (index >= node.getNumResults())
    return {};
  auto type = dyn_cast<RankedTensorType>(node.getResult(index).getType());
  return type && type.hasStaticShape() ? type : RankedTensorType();
}

double numel(RankedTensorType type) {
  return static_cast<double>(type.getNumElements());
}

/// Dimension `index` of `type`, negative indices counting from the back.
double dim(RankedTensorType type, int64_t index) {
  int64_t rank = type.getRank();
  if (index < 0)
    index += rank;
  if (index < 0 || index >= rank)
    return 1.0;
  return static_cast<double>(type.getDimSize(index));
}

/// The source op's argument: keyword `name` if the importer kept it, else
/// position `position` of the positional `args` list.
Attribute getArgument(NodeOp node, int position, StringRef name) {
  if (!name.empty()) {
    // Named (keyword) arguments the importers keep beside `args`.
    if (auto attrs =
            LetheDialect::AttrsAttrHelper(node->getContext()).getAttr(node))
      if (Attribute attr = attrs.get(name))
        return attr;
    if (auto dict = dyn_cast_or_null<DictionaryAttr>(node.getArgsAttr()))
      if (Attribute attr = dict.get(name))
        return attr;
  }
  auto list = dyn_cast_or_null<ArrayAttr>(node.getArgsAttr());
  if (list && position >= 0 && position < static_cast<int>(list.size()))
    return list[position];
  return {};
}

/// A boolean (or integer flag) argument; nullopt when absent or null.
std::optional<bool> getFlag(NodeOp node, int position, StringRef name) {
  Attribute attr = getArgument(node, position, name);
  if (auto boolean = dyn_cast_or_null<BoolAttr>(attr))
    return boolean.getValue();
  if (auto integer = dyn_cast_or_null<IntegerAttr>(attr))
    return integer.getValue().getSExtValue() != 0;
  return std::nullopt;
}

/// All attributes of the node (inherent `args` and discardable ones) as
/// text, to find StableHLO dimension numbers whatever attribute carries them
/// and whether or not the stablehlo dialect is registered (unregistered
/// attributes print as written).
std::string printedAttributes(NodeOp node) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (Attribute args = node.getArgsAttr())
    os << args << " ";
  os << node->getDiscardableAttrDictionary();
  return text;
}

/// The integers of `key = [a, b, ...]` or `key = a` in `text`.
std::optional<SmallVector<int64_t>> findIntegers(StringRef text,
                                                 StringRef key) {
  size_t at = text.find(key);
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef rest = text.drop_front(at + key.size()).ltrim(" =:");
  SmallVector<int64_t> values;
  if (rest.consume_front("[")) {
    StringRef list = rest.take_until([](char c) { return c == ']'; });
    SmallVector<StringRef> items;
    list.split(items, ',', -1, /*KeepEmpty=*/false);
    for (StringRef item : items) {
      int64_t value;
      if (item.trim().getAsInteger(10, value))
        return std::nullopt;
      values.push_back(value);
    }
    return values;
  }
  int64_t value;
  StringRef number = rest.take_while([](char c) { return llvm::isDigit(c); });
  if (number.empty() || number.getAsInteger(10, value))
    return std::nullopt;
  values.push_back(value);
  return values;
}

ComputeWork work(double flops, RankedTensorType operand,
                 StringRef opClass) {
  return ComputeWork{flops, operand.getElementType(), opClass};
}

/// A matmul with a dimension (M, N or K) that is not a multiple of 16 bytes
/// cannot use the libraries' fast tensor-core paths: cuBLAS needs 16-byte
/// aligned leading dimensions, and each of M, N, K is the row length of
/// some operand depending on transposes (M is, for the weight gradient
/// dYᵀ·X of a linear layer), which the graph does not show.
ComputeWork matmulWork(double flops, RankedTensorType lhs, double k,
                       RankedTensorType out) {
  Type element = lhs.getElementType();
  unsigned bytes = element.isIntOrFloat()
                       ? std::max(1u, element.getIntOrFloatBitWidth() / 8)
                       : 2u;
  int64_t align = std::max<int64_t>(1, 16 / bytes);
  auto misaligned = [&](double size) {
    return static_cast<int64_t>(std::llround(size)) % align != 0;
  };
  bool unaligned = misaligned(k) || misaligned(dim(out, -1)) ||
                   (out.getRank() >= 2 && misaligned(dim(out, -2)));
  return work(flops, lhs, unaligned ? "unaligned_matmul" : "matmul");
}

//===----------------------------------------------------------------------===//
// ATen
//===----------------------------------------------------------------------===//

/// mm, bmm, matmul, addmm, baddbmm, linear, ...: 2 · |out| · K with K the
/// last dimension of the left matrix (the contracting one in every ATen
/// matmul, broadcasting included).
std::optional<ComputeWork> atenMatmul(NodeOp node, StringRef root) {
  unsigned lhsIndex = llvm::is_contained({"addmm", "baddbmm", "addbmm",
                                          "addmv", "_addmm_activation"},
                                         root)
                          ? 1
                          : 0;
  RankedTensorType lhs = operandType(node, lhsIndex);
  RankedTensorType rhs = operandType(node, lhsIndex + 1);
  RankedTensorType out = resultType(node, 0);
  if (!lhs || !rhs || !out)
    return std::nullopt;
  if (root == "addbmm") // sums the batch: out has no batch dimension
    return matmulWork(2 * numel(lhs) * dim(rhs, -1), lhs, dim(lhs, -1), out);
  if (root == "dot" || root == "vdot")
    return work(2 * numel(lhs), lhs, "matmul");
  return matmulWork(2 * numel(out) * dim(lhs, -1), lhs, dim(lhs, -1), out);
}

/// FLOPs of one convolution pass: 2 · |X| · |W| / W[0], where X is the
/// output (W[0] = output channels) or, for a transposed convolution, the
/// input (W[0] = input channels).
double convolutionFlops(RankedTensorType output, RankedTensorType input,
                        RankedTensorType weight, bool transposed) {
  RankedTensorType spatial = transposed ? input : output;
  return 2 * numel(spatial) * numel(weight) / dim(weight, 0);
}

std::optional<ComputeWork> atenConvolution(NodeOp node, StringRef root) {
  RankedTensorType input = operandType(node, 0);
  RankedTensorType weight = operandType(node, 1);
  RankedTensorType out = resultType(node, 0);
  if (!input || !weight || !out)
    return std::nullopt;
  bool transposed = root.contains("transpose");
  if (root == "convolution" || root == "_convolution")
    transposed = getFlag(node, 6, "transposed").value_or(false);
  return work(convolutionFlops(out, input, weight, transposed), input,
              "convolution");
}

/// convolution_backward(grad_output, input, weight, bias_sizes, stride,
/// padding, dilation, transposed, output_padding, groups, output_mask)
/// -> (grad_input, grad_weight, grad_bias): each of grad_input and
/// grad_weight it produces costs one forward convolution; grad_bias is a
/// reduction, covered by the bandwidth bound.
std::optional<ComputeWork> atenConvolutionBackward(NodeOp node) {
  RankedTensorType gradOutput = operandType(node, 0);
  RankedTensorType input = operandType(node, 1);
  RankedTensorType weight = operandType(node, 2);
  if (!gradOutput || !input || !weight)
    return std::nullopt;
  bool transposed = getFlag(node, 7, "transposed").value_or(false);
  int passes = 0;
  auto mask = dyn_cast_or_null<ArrayAttr>(getArgument(node, 10, "output_mask"));
  for (unsigned index : {0u, 1u}) {
    if (node.getNumResults() > index) {
      // A `none` result was not computed.
      passes += resultType(node, index) ? 1 : 0;
    } else if (mask && mask.size() > index) {
      auto flag = dyn_cast<BoolAttr>(mask[index]);
      passes += flag && flag.getValue() ? 1 : 0;
    }
  }
  if (passes == 0)
    return std::nullopt;
  return work(passes * convolutionFlops(gradOutput, input, weight, transposed),
              input, "convolution_backward");
}

/// How one scaled-dot-product-attention op lays out its arguments.
struct AttentionSignature {
  StringLiteral root;
  /// Operand index of the query (1 for backward ops: 0 is the gradient).
  unsigned query;
  bool backward;
  /// Query/key layout: [B, H, L, D] (the SDPA ops) or [B, L, H, D] (the
  /// raw flash / memory-efficient kernels).
  bool seqMajor;
  /// Position of `is_causal` (or of `custom_mask_type`, nonzero = causal).
  int causalPosition;
  StringLiteral causalName;
};

const AttentionSignature attentionSignatures[] = {
    {"scaled_dot_product_attention", 0, false, false, 5, "is_causal"},
    {"_scaled_dot_product_attention_math", 0, false, false, 5, "is_causal"},
    {"_scaled_dot_product_flash_attention", 0, false, false, 4, "is_causal"},
    {"_scaled_dot_product_flash_attention_backward", 1, true, false, 11,
     "is_causal"},
    {"_scaled_dot_product_efficient_attention", 0, false, false, 6,
     "is_causal"},
    {"_scaled_dot_product_efficient_attention_backward", 1, true, false, 11,
     "is_causal"},
    // PyTorch's CPU flash kernel: what a graph traced on CPU holds.
    {"_scaled_dot_product_flash_attention_for_cpu", 0, false, false, 4,
     "is_causal"},
    {"_scaled_dot_product_flash_attention_for_cpu_backward", 1, true, false,
     7, "is_causal"},
    {"_scaled_dot_product_cudnn_attention", 0, false, false, 6, "is_causal"},
    {"_scaled_dot_product_cudnn_attention_backward", 1, true, false, 14,
     "is_causal"},
    {"_scaled_dot_product_fused_attention_overrideable", 0, false, false, 5,
     "is_causal"},
    {"_scaled_dot_product_fused_attention_overrideable_backward", 1, true,
     false, 13, "is_causal"},
    {"_flash_attention_forward", 0, false, true, 8, "is_causal"},
    {"_flash_attention_backward", 1, true, true, 11, "is_causal"},
    {"_efficient_attention_forward", 0, false, true, 9, "custom_mask_type"},
    {"_efficient_attention_backward", 1, true, true, 14, "custom_mask_type"},
};

/// Forward: QKᵀ and PV, 2·B·H·Lq·Lk·(D + Dv) = 4·B·H·Lq·Lk·D; half of it
/// when causal. Backward: about 2.5 times the forward (five matrix products
/// of that size instead of two, QKᵀ recomputed).
std::optional<ComputeWork> atenAttention(NodeOp node,
                                         const AttentionSignature &sig) {
  RankedTensorType query = operandType(node, sig.query);
  RankedTensorType key = operandType(node, sig.query + 1);
  RankedTensorType value = operandType(node, sig.query + 2);
  if (!query || !key || !value || query.getRank() < 3 || key.getRank() < 3)
    return std::nullopt;
  double keyLength = sig.seqMajor ? dim(key, 1) : dim(key, -2);
  double queryRows = numel(query) / dim(query, -1); // B·H·Lq
  double flops =
      2 * queryRows * keyLength * (dim(query, -1) + dim(value, -1));
  if (getFlag(node, sig.causalPosition, sig.causalName).value_or(false))
    flops *= 0.5;
  if (sig.backward)
    flops *= 2.5;
  return work(flops, query, sig.backward ? "attention_backward" : "attention");
}

std::optional<ComputeWork> atenWork(NodeOp node, StringRef root) {
  if (llvm::is_contained({"mm", "bmm", "matmul", "addmm", "baddbmm", "addbmm",
                          "linear", "mv", "addmv", "dot", "vdot", "_int_mm",
                          "_scaled_mm", "_addmm_activation"},
                         root))
    return atenMatmul(node, root);
  if (llvm::is_contained({"convolution", "_convolution", "conv1d", "conv2d",
                          "conv3d", "cudnn_convolution",
                          "cudnn_convolution_transpose", "conv_transpose1d",
                          "conv_transpose2d", "conv_transpose3d",
                          "mkldnn_convolution"},
                         root))
    return atenConvolution(node, root);
  if (root == "convolution_backward")
    return atenConvolutionBackward(node);
  for (const AttentionSignature &sig : attentionSignatures)
    if (root == sig.root)
      return atenAttention(node, sig);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// StableHLO / MHLO
//===----------------------------------------------------------------------===//

/// dot_general: 2 · |out| · Π lhs[contracting dims]; `dot` contracts the
/// last dimension of lhs.
std::optional<ComputeWork> hloDot(NodeOp node, bool general) {
  RankedTensorType lhs = operandType(node, 0);
  RankedTensorType out = resultType(node, 0);
  if (!lhs || !out)
    return std::nullopt;
  double contracted = dim(lhs, -1);
  if (general) {
    std::string text = printedAttributes(node);
    if (std::optional<SmallVector<int64_t>> dims =
            findIntegers(text, "lhs_contracting_dimensions")) {
      contracted = 1;
      for (int64_t d : *dims)
        contracted *= dim(lhs, d);
    }
  }
  return matmulWork(2 * numel(out) * contracted, lhs, contracted, out);
}

/// The kernel's output-feature dimension from StableHLO convolution
/// dimension numbers, in either printed form: the compact
/// `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` or the raw
/// `kernel_output_feature_dimension = 3`. Defaults to the last dimension
/// (HWIO, the StableHLO convention).
int64_t kernelOutputFeatureDim(NodeOp node, RankedTensorType kernel) {
  std::string text = printedAttributes(node);
  if (std::optional<SmallVector<int64_t>> raw =
          findIntegers(text, "kernel_output_feature_dimension"))
    if (raw->size() == 1)
      return raw->front();
  StringRef attrs(text);
  size_t cross = attrs.find("]x[");
  if (cross != StringRef::npos) {
    StringRef spec = attrs.drop_front(cross + 3).take_until(
        [](char c) { return c == ']'; });
    SmallVector<StringRef> dims;
    spec.split(dims, ',');
    for (auto [index, d] : llvm::enumerate(dims))
      if (d.trim() == "o")
        return static_cast<int64_t>(index);
  }
  return kernel.getRank() - 1;
}

std::optional<ComputeWork> hloConvolution(NodeOp node) {
  RankedTensorType input = operandType(node, 0);
  RankedTensorType kernel = operandType(node, 1);
  RankedTensorType out = resultType(node, 0);
  if (!input || !kernel || !out)
    return std::nullopt;
  double outFeatures = dim(kernel, kernelOutputFeatureDim(node, kernel));
  return work(2 * numel(out) * numel(kernel) / outFeatures, input,
              "convolution");
}

//===----------------------------------------------------------------------===//
// linalg and TOSA
//===----------------------------------------------------------------------===//

/// Contractions of any operand layout: with A = b·M·K, B = b·K·N and
/// out = b·M·N elements, K = sqrt(|A|·|B| / (|out|·b)), FLOPs = 2·|out|·K.
/// This covers the transposed variants without knowing their maps.
std::optional<ComputeWork> linalgContraction(NodeOp node, bool batched) {
  RankedTensorType lhs = operandType(node, 0);
  RankedTensorType rhs = operandType(node, 1);
  RankedTensorType out = resultType(node, 0);
  if (!out)
    out = operandType(node, 2); // destination-passing style without a result
  if (!lhs || !rhs || !out || numel(out) == 0)
    return std::nullopt;
  double batch = batched ? dim(lhs, 0) : 1.0;
  double k = std::sqrt(numel(lhs) * numel(rhs) / (numel(out) * batch));
  return matmulWork(2 * numel(out) * k, lhs, k, out);
}

/// linalg.conv_* / depthwise_conv_*: 2 · |out| · |filter| / (filter dims
/// that index the output: f, g and m, plus c for depthwise), read off the
/// filter layout in the op's name (`conv_2d_nhwc_hwcf` -> `hwcf`).
std::optional<ComputeWork> linalgConvolution(NodeOp node, StringRef op) {
  RankedTensorType input = operandType(node, 0);
  RankedTensorType filter = operandType(node, 1);
  RankedTensorType out = resultType(node, 0);
  if (!out)
    out = operandType(node, 2);
  if (!input || !filter || !out)
    return std::nullopt;
  op.consume_back("_q");
  StringRef layout = op.rsplit('_').second;
  bool depthwise = op.starts_with("depthwise");
  double outputDims = 1;
  if (static_cast<int64_t>(layout.size()) == filter.getRank())
    for (auto [index, letter] : llvm::enumerate(layout))
      if (letter == 'f' || letter == 'g' || letter == 'm' ||
          (depthwise && letter == 'c'))
        outputDims *= dim(filter, index);
  return work(2 * numel(out) * numel(filter) / outputDims, input,
              "convolution");
}

std::optional<ComputeWork> tosaWork(NodeOp node, StringRef op) {
  RankedTensorType input = operandType(node, 0);
  RankedTensorType weight = operandType(node, 1);
  RankedTensorType out = resultType(node, 0);
  if (!input || !weight || !out)
    return std::nullopt;
  if (op == "matmul") // [N,H,C] x [N,C,W]
    return matmulWork(2 * numel(out) * dim(input, -1), input, dim(input, -1),
                      out);
  if (op == "conv2d" || op == "conv3d") // weight [OC, ..., IC]
    return work(2 * numel(out) * numel(weight) / dim(weight, 0), input,
                "convolution");
  if (op == "depthwise_conv2d") // weight [KH, KW, C, M]
    return work(2 * numel(out) * numel(weight) /
                    (dim(weight, 2) * dim(weight, 3)),
                input, "convolution");
  if (op == "transpose_conv2d") // weight [OC, KH, KW, IC]
    return work(2 * numel(input) * numel(weight) / dim(weight, -1), input,
                "convolution");
  if (op == "fully_connected") // weight [OC, IC]
    return matmulWork(2 * numel(out) * dim(weight, -1), input, dim(weight, -1),
                      out);
  return std::nullopt;
}

} // namespace

std::optional<ComputeWork> CostModel::computeWork(NodeOp node) {
  StringRef kind = node.getKind();
  std::optional<ComputeWork> result;
  StringRef dialect = kind.split('.').first;
  StringRef op = kind.split('.').second;
  if (dialect == "aten" || kind.starts_with("torch.aten.")) {
    StringRef root = kind;
    root.consume_front("torch.");
    root = root.drop_front(5).split('.').first;
    result = atenWork(node, root);
  } else if (dialect == "stablehlo" || dialect == "mhlo") {
    if (op == "dot_general" || op == "dot")
      result = hloDot(node, op == "dot_general");
    else if (op == "convolution")
      result = hloConvolution(node);
  } else if (dialect == "linalg") {
    if (op.starts_with("batch_matmul") || op.starts_with("batch_matvec") ||
        op.starts_with("batch_vecmat"))
      result = linalgContraction(node, /*batched=*/true);
    else if (op.starts_with("matmul") || op == "matvec" || op == "vecmat" ||
             op == "dot" || op == "batch_reduce_matmul")
      result = linalgContraction(node, /*batched=*/false);
    else if (op.starts_with("conv_") || op.starts_with("depthwise_conv_"))
      result = linalgConvolution(node, op);
  } else if (dialect == "tosa") {
    result = tosaWork(node, op);
  }
  // An op with no arithmetic (an empty tensor) is left to the bandwidth
  // model.
  if (result && !(result->flops > 0 && std::isfinite(result->flops)))
    return std::nullopt;
  return result;
}

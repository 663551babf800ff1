//===- GemmMatcher.cpp - Recognise matmul-like nodes as GEMMs -------------===//

#include "GemmMatcher.h"

#include "lethe/Analysis/Program.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace lethe;

namespace {

/// "aten.mm" for "aten.mm.default" and "aten.mm": the op without its
/// overload.
StringRef baseKind(StringRef kind) {
  if (kind.count('.') >= 2)
    return kind.substr(0, kind.rfind('.'));
  return kind;
}

/// Integer argument `index` of the node's `args` (after the tensor), if any.
std::optional<int64_t> intArg(NodeOp node, unsigned index) {
  auto args = dyn_cast_or_null<ArrayAttr>(node.getArgsAttr());
  if (!args || index >= args.size())
    return std::nullopt;
  if (auto value = dyn_cast<IntegerAttr>(args[index]))
    return value.getInt();
  return std::nullopt;
}

/// Integer-list argument `index` of the node's `args`, if any.
std::optional<SmallVector<int64_t>> intListArg(NodeOp node, unsigned index) {
  auto args = dyn_cast_or_null<ArrayAttr>(node.getArgsAttr());
  if (!args || index >= args.size())
    return std::nullopt;
  auto list = dyn_cast<ArrayAttr>(args[index]);
  if (!list)
    return std::nullopt;
  SmallVector<int64_t> values;
  for (Attribute element : list) {
    auto value = dyn_cast<IntegerAttr>(element);
    if (!value)
      return std::nullopt;
    values.push_back(value.getInt());
  }
  return values;
}

int64_t normalizeDim(int64_t dim, int64_t rank) {
  return dim < 0 ? dim + rank : dim;
}

/// Applies the view `node` (result `result` of it, reading `input`) to the
/// layout state `transposed`. Fails for views that are not a reshape of a
/// row-major tensor or a swap of the last two dimensions.
LogicalResult applyView(NodeOp node, Value input, Value result,
                        bool &transposed, std::string &whyNot) {
  auto in = dyn_cast<RankedTensorType>(input.getType());
  auto out = dyn_cast<RankedTensorType>(result.getType());
  auto fail = [&](const Twine &reason) {
    whyNot = ("'" + node.getKind() + "' " + reason).str();
    return failure();
  };
  if (!in || !out)
    return fail("is not a view of a ranked tensor");
  if (in.getElementType() != out.getElementType())
    return fail("reinterprets the element type");
  int64_t rank = in.getRank();
  bool sameShape = in.getShape() == out.getShape();
  // Same dims but the last two, and the last two kept: the bytes keep their
  // row-major order within each matrix.
  auto keepsMatrices = [&] {
    return in.getRank() >= 2 && out.getRank() >= 2 &&
           in.getShape().take_back(2) == out.getShape().take_back(2);
  };

  StringRef kind = baseKind(node.getKind());
  if (isInPlaceWriter(node)) {
    if (!sameShape)
      return fail("writes in place with another shape");
    return success();
  }
  if (kind == "aten.t") {
    if (rank == 2)
      transposed = !transposed;
    return success();
  }
  if (kind == "aten.transpose") {
    std::optional<int64_t> d0 = intArg(node, 1), d1 = intArg(node, 2);
    if (!d0 || !d1)
      return fail("has no integer dimensions");
    int64_t a = normalizeDim(*d0, rank), b = normalizeDim(*d1, rank);
    if (a == b)
      return success();
    if (std::min(a, b) == rank - 2 && std::max(a, b) == rank - 1) {
      transposed = !transposed;
      return success();
    }
    return fail("swaps dimensions other than the last two");
  }
  if (kind == "aten.permute") {
    std::optional<SmallVector<int64_t>> dims = intListArg(node, 1);
    if (!dims || (int64_t)dims->size() != rank)
      return fail("has no permutation of the tensor's rank");
    bool identityLeading = true;
    for (int64_t i = 0; i + 2 < rank; ++i)
      identityLeading &= normalizeDim((*dims)[i], rank) == i;
    if (rank >= 2 && identityLeading) {
      int64_t x = normalizeDim((*dims)[rank - 2], rank);
      int64_t y = normalizeDim((*dims)[rank - 1], rank);
      if (x == rank - 2 && y == rank - 1)
        return success();
      if (x == rank - 1 && y == rank - 2) {
        transposed = !transposed;
        return success();
      }
    }
    if (rank < 2 && identityLeading)
      return success();
    return fail("permutes dimensions other than the last two");
  }
  if (kind == "aten.view" || kind == "aten._unsafe_view" ||
      kind == "aten.reshape" || kind == "aten.unsqueeze" ||
      kind == "aten.squeeze" || kind == "aten.flatten" ||
      kind == "aten.alias" || kind == "aten.detach" || kind == "aten.expand") {
    if (sameShape)
      return success();
    if (kind == "aten.expand")
      return fail("broadcasts");
    if (!transposed || keepsMatrices())
      return success();
    return fail("reshapes a transposed tensor");
  }
  return fail("is not a reshape or a transpose of the last two dimensions");
}

LogicalResult checkBeta1Alpha1(NodeOp node, std::string &whyNot) {
  auto isOne = [](Attribute value) {
    if (auto i = dyn_cast<IntegerAttr>(value))
      return i.getValue().isOne();
    if (auto f = dyn_cast<FloatAttr>(value))
      return f.getValueAsDouble() == 1.0;
    return false;
  };
  if (auto args = dyn_cast_or_null<ArrayAttr>(node.getArgsAttr()))
    for (Attribute arg : llvm::drop_begin(args.getValue(), 3))
      if (!isOne(arg)) {
        whyNot = "beta or alpha is not 1";
        return failure();
      }
  if (auto kwargs =
          LetheDialect::AttrsAttrHelper(node->getContext()).getAttr(node))
    for (StringRef name : {"beta", "alpha"})
      if (Attribute value = kwargs.get(name); value && !isOne(value)) {
        whyNot = (name + " is not 1").str();
        return failure();
      }
  return success();
}

std::optional<StringRef> runtimeDType(Type element) {
  if (element.isBF16())
    return StringRef("LETHE_DTYPE_BF16");
  if (element.isF16())
    return StringRef("LETHE_DTYPE_F16");
  if (element.isF32())
    return StringRef("LETHE_DTYPE_F32");
  return std::nullopt;
}

} // namespace

bool lethe::isGemmKind(StringRef kind) {
  StringRef base = baseKind(kind);
  return base == "aten.mm" || base == "aten.addmm" || base == "aten.bmm" ||
         base == "aten.linear" || base == "aten.matmul";
}

std::optional<RowMajorView> lethe::getRowMajorView(Value value,
                                                   std::string &whyNot) {
  // The chain of views from the use back to the storage.
  struct Step {
    NodeOp node;
    Value input, result;
  };
  SmallVector<Step> views;
  Value current = value;
  while (true) {
    Operation *def = current.getDefiningOp();
    if (auto node = dyn_cast_or_null<NodeOp>(def)) {
      unsigned index = cast<OpResult>(current).getResultNumber();
      int64_t operand = node.getAliasedOperand(index);
      if (operand < 0)
        break;
      views.push_back({node, node->getOperand(operand), current});
      current = node->getOperand(operand);
    } else if (auto await = dyn_cast_or_null<AwaitOp>(def)) {
      current = await.getValues()[cast<OpResult>(current).getResultNumber()];
    } else if (auto recompute = dyn_cast_or_null<RecomputeOp>(def)) {
      auto yield = cast<YieldOp>(recompute.getBody().front().getTerminator());
      current = yield.getValues()[cast<OpResult>(current).getResultNumber()];
    } else {
      break;
    }
  }
  RowMajorView view{current, false};
  for (const Step &step : llvm::reverse(views))
    if (failed(applyView(step.node, step.input, step.result, view.transposed,
                         whyNot)))
      return std::nullopt;
  return view;
}

std::optional<GemmMatch> lethe::matchGemm(NodeOp node, std::string &whyNot) {
  StringRef kind = baseKind(node.getKind());
  if (node->getNumResults() != 1 || node.getAliasedOperand(0) >= 0) {
    whyNot = "its result is not one fresh tensor";
    return std::nullopt;
  }
  auto tensorType = [](Value value) {
    return dyn_cast<RankedTensorType>(value.getType());
  };
  auto operand = [&](Value value,
                     StringRef role) -> std::optional<GemmOperand> {
    std::string why;
    std::optional<RowMajorView> view = getRowMajorView(value, why);
    if (!view) {
      whyNot = (role + " is read through a view that " + why).str();
      return std::nullopt;
    }
    return GemmOperand{value, *view, getTypeBytes(value.getType())};
  };

  // Operands by kind: (bias,) A, B.
  Value biasValue, aValue, bValue;
  bool linear = kind == "aten.linear";
  unsigned numInputs = node.getInputs().size();
  if (kind == "aten.addmm") {
    if (numInputs != 3) {
      whyNot = "addmm does not have 3 tensor operands";
      return std::nullopt;
    }
    if (failed(checkBeta1Alpha1(node, whyNot)))
      return std::nullopt;
    biasValue = node.getInputs()[0];
    aValue = node.getInputs()[1];
    bValue = node.getInputs()[2];
  } else if (linear) {
    if (numInputs != 2 && numInputs != 3) {
      whyNot = "linear does not have 2 or 3 tensor operands";
      return std::nullopt;
    }
    aValue = node.getInputs()[0];
    bValue = node.getInputs()[1];
    if (numInputs == 3)
      biasValue = node.getInputs()[2];
  } else {
    if (numInputs != 2) {
      whyNot = "it does not have 2 tensor operands";
      return std::nullopt;
    }
    aValue = node.getInputs()[0];
    bValue = node.getInputs()[1];
  }

  RankedTensorType aType = tensorType(aValue), bType = tensorType(bValue);
  auto cType = tensorType(node->getResult(0));
  if (!aType || !bType || !cType || !aType.hasStaticShape() ||
      !bType.hasStaticShape() || !cType.hasStaticShape()) {
    whyNot = "an operand is not a static tensor";
    return std::nullopt;
  }
  std::optional<StringRef> dtype = runtimeDType(cType.getElementType());
  if (!dtype || aType.getElementType() != cType.getElementType() ||
      bType.getElementType() != cType.getElementType()) {
    whyNot = "its operands are not all f32, f16 or bf16 of one type";
    return std::nullopt;
  }

  GemmMatch match;
  match.dtype = *dtype;
  std::optional<GemmOperand> a = operand(aValue, "A");
  std::optional<GemmOperand> b = operand(bValue, "B");
  if (!a || !b)
    return std::nullopt;
  match.a = *a;
  match.b = *b;
  // linear computes x W^T: its B is W read transposed.
  if (linear)
    match.b.view.transposed = !match.b.view.transposed;

  ArrayRef<int64_t> as = aType.getShape(), bs = bType.getShape();
  int64_t aRank = as.size(), bRank = bs.size();
  if (aRank >= 2 && bRank == 2 && (aRank == 2 || !match.transA())) {
    // A's leading dimensions fold into m (row-major, not transposed).
    match.m = 1;
    for (int64_t d : as.drop_back())
      match.m *= d;
    match.k = as.back();
    if (linear) {
      match.n = bs[0];
      if (bs[1] != match.k) {
        whyNot = "the inner dimensions differ";
        return std::nullopt;
      }
    } else {
      match.n = bs[1];
      if (bs[0] != match.k) {
        whyNot = "the inner dimensions differ";
        return std::nullopt;
      }
    }
    if (kind == "aten.bmm") {
      whyNot = "bmm operands are not 3-D";
      return std::nullopt;
    }
  } else if (aRank >= 3 && aRank == bRank && !linear &&
             as.drop_back(2) == bs.drop_back(2) && kind != "aten.mm" &&
             kind != "aten.addmm") {
    match.batch = 1;
    for (int64_t d : as.drop_back(2))
      match.batch *= d;
    match.m = as[aRank - 2];
    match.k = as[aRank - 1];
    match.n = bs[bRank - 1];
    if (bs[bRank - 2] != match.k) {
      whyNot = "the inner dimensions differ";
      return std::nullopt;
    }
  } else {
    whyNot = "its operand ranks do not form a (batched) matrix product";
    return std::nullopt;
  }
  if (cType.getNumElements() != match.batch * match.m * match.n) {
    whyNot = "the result is not batch x m x n";
    return std::nullopt;
  }
  match.c =
      GemmOperand{node->getResult(0), RowMajorView{node->getResult(0), false},
                  getTypeBytes(cType)};

  if (biasValue) {
    auto biasType = tensorType(biasValue);
    if (!biasType || biasType.getRank() != 1 ||
        biasType.getDimSize(0) != match.n ||
        biasType.getElementType() != cType.getElementType()) {
      whyNot = "the bias is not a vector of n elements of the result's type";
      return std::nullopt;
    }
    std::optional<GemmOperand> bias = operand(biasValue, "the bias");
    if (!bias)
      return std::nullopt;
    match.bias = *bias;
  }
  return match;
}

//===- GenericOps.cpp - Classify ops of generic-form exports --------------===//

#include "lethe/Import/GenericOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace lethe;

/// torch-mlir's dtype spellings (`!torch.vtensor<[2],si64>`).
static Type parseTorchElementType(StringRef dtype, MLIRContext *context) {
  Builder b(context);
  if (dtype.consume_front("si") || dtype.consume_front("i")) {
    unsigned width;
    if (!dtype.getAsInteger(10, width) && width > 0 && width <= 64)
      return b.getIntegerType(width);
    return {};
  }
  if (dtype.consume_front("ui")) {
    unsigned width;
    if (!dtype.getAsInteger(10, width) && width > 0 && width <= 64)
      return b.getIntegerType(width, /*isSigned=*/false);
    return {};
  }
  if (dtype == "f16")
    return b.getF16Type();
  if (dtype == "bf16")
    return b.getBF16Type();
  if (dtype == "f32")
    return b.getF32Type();
  if (dtype == "f64")
    return b.getF64Type();
  if (dtype == "f8E4M3FN")
    return b.getType<Float8E4M3FNType>();
  if (dtype == "f8E5M2")
    return b.getType<Float8E5M2Type>();
  if (dtype == "f8E4M3FNUZ")
    return b.getType<Float8E4M3FNUZType>();
  if (dtype == "f8E5M2FNUZ")
    return b.getType<Float8E5M2FNUZType>();
  if (dtype.consume_front("complex<") && dtype.consume_back(">")) {
    Type element = parseTorchElementType(dtype, context);
    if (element && isa<FloatType>(element))
      return ComplexType::get(element);
  }
  return {};
}

/// `vtensor<[2,3],f32>` -> tensor<2x3xf32>.
static Type convertTorchTensor(StringRef data, MLIRContext *context,
                               std::string &reason) {
  StringRef body = data;
  if (!body.consume_front("vtensor<") || !body.consume_back(">")) {
    reason = body.starts_with("tensor")
                 ? "a non-value torch tensor (export value tensors)"
                 : "an unranked torch tensor";
    return {};
  }
  if (!body.consume_front("[")) {
    reason = "an unranked torch tensor";
    return {};
  }
  auto [dims, rest] = body.split(']');
  if (!rest.consume_front(",")) {
    reason = "a torch tensor without dtype";
    return {};
  }
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    part = part.trim();
    int64_t size;
    if (part == "?") {
      reason = "a dynamic shape";
      return {};
    }
    if (part.getAsInteger(10, size) || size < 0) {
      reason = "an invalid dimension '" + part.str() + "'";
      return {};
    }
    shape.push_back(size);
  }
  Type element = parseTorchElementType(rest.trim(), context);
  if (!element) {
    reason = "unknown element type '" + rest.trim().str() + "'";
    return {};
  }
  return RankedTensorType::get(shape, element);
}

static bool isBuiltinScalar(Type type) {
  return type.isIntOrIndexOrFloat() || isa<NoneType, ComplexType>(type);
}

Type lethe::convertImportedType(Type type, std::string &reason) {
  MLIRContext *context = type.getContext();
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    if (!tensor.hasStaticShape()) {
      reason = "a dynamic shape";
      return {};
    }
    if (!isBuiltinScalar(tensor.getElementType()) ||
        isa<NoneType>(tensor.getElementType())) {
      reason = "an unsupported element type";
      return {};
    }
    // Encodings (StableHLO bounds, sparsity) do not change the size.
    return RankedTensorType::get(tensor.getShape(), tensor.getElementType());
  }
  if (isa<UnrankedTensorType>(type)) {
    reason = "an unranked tensor";
    return {};
  }
  if (isa<BaseMemRefType>(type)) {
    reason = "a memref (import tensor-level IR, before bufferization)";
    return {};
  }
  if (isBuiltinScalar(type))
    return type;
  if (auto opaque = dyn_cast<OpaqueType>(type)) {
    if (opaque.getDialectNamespace() != "torch") {
      reason = "an unsupported type";
      return {};
    }
    StringRef data = opaque.getTypeData();
    if (data.starts_with("vtensor") || data.starts_with("tensor"))
      return convertTorchTensor(data, context, reason);
    if (data.contains("tensor")) {
      reason = "a list of tensors (export the tensors as separate values)";
      return {};
    }
    if (data == "int")
      return IntegerType::get(context, 64);
    if (data == "float" || data == "number")
      return Float64Type::get(context);
    if (data == "bool")
      return IntegerType::get(context, 1);
    // None, strings, devices, generators, lists of scalars: no memory.
    return NoneType::get(context);
  }
  // Non-tensor values of registered dialects (a `!tosa.shape`) own no
  // memory either.
  if (!isa<ShapedType>(type) && !isa<BuiltinDialect>(type.getDialect()))
    return NoneType::get(context);
  reason = "an unsupported type";
  return {};
}

std::string lethe::getCanonicalKind(Operation *op) {
  StringRef name = op->getName().getStringRef();
  std::string kind =
      (name.starts_with("torch.aten.") || name.starts_with("torch.prims.") ||
       name.starts_with("torch._c10d_functional."))
          ? name.drop_front(strlen("torch.")).str()
          : name.str();
  if (auto overload = op->getAttrOfType<StringAttr>("overload"))
    if (!overload.getValue().empty())
      kind += "." + overload.getValue().str();
  return kind;
}

/// The op name of an ATen kind: `aten.transpose.int` -> `transpose`.
static StringRef getAtenOpName(StringRef kind) {
  if (!kind.consume_front("aten."))
    return {};
  return kind.split('.').first;
}

bool lethe::isAtenViewKind(StringRef kind) {
  static const llvm::StringSet<> views = {"view",
                                          "_unsafe_view",
                                          "_reshape_alias",
                                          "view_as",
                                          "t",
                                          "numpy_T",
                                          "transpose",
                                          "permute",
                                          "expand",
                                          "expand_as",
                                          "slice",
                                          "select",
                                          "unsqueeze",
                                          "squeeze",
                                          "alias",
                                          "detach",
                                          "as_strided",
                                          "split",
                                          "split_with_sizes",
                                          "unbind",
                                          "chunk",
                                          "narrow",
                                          "diagonal",
                                          "unflatten",
                                          "unfold",
                                          "view_as_real",
                                          "view_as_complex",
                                          "real",
                                          "imag",
                                          "movedim",
                                          "swapaxes",
                                          "tensor_split",
                                          "lift_fresh",
                                          "_conj",
                                          "_neg_view",
                                          "indices",
                                          "values"};
  StringRef op = getAtenOpName(kind);
  return !op.empty() && views.contains(op);
}

bool lethe::isAtenInPlaceKind(StringRef kind) {
  StringRef op = getAtenOpName(kind);
  return op.size() > 1 && op.ends_with("_") && !op.ends_with("__");
}

static bool isScalarLikeType(Type type) {
  std::string reason;
  Type converted = convertImportedType(type, reason);
  return converted && !isa<ShapedType>(converted);
}

bool lethe::isScalarConstant(Operation *op) {
  if (op->getNumOperands() != 0 || op->getNumResults() != 1 ||
      op->getNumRegions() != 0)
    return false;
  StringRef name = op->getName().getStringRef();
  bool constantName = name.starts_with("torch.constant.") ||
                      name.ends_with(".constant") || name.ends_with(".const") ||
                      name == "tosa.const_shape";
  return constantName && isScalarLikeType(op->getResult(0).getType());
}

Attribute lethe::getScalarConstantValue(Operation *op) {
  for (StringRef key : {"value", "values"})
    if (Attribute value = op->getAttr(key))
      return value;
  return UnitAttr::get(op->getContext());
}

bool lethe::isListConstruct(Operation *op) {
  return op->getName().getStringRef() == "torch.prim.ListConstruct";
}

bool lethe::isControlFlowKind(StringRef kind) {
  return kind.starts_with("scf.") || kind.starts_with("cf.") ||
         llvm::is_contained({"stablehlo.while", "stablehlo.if",
                             "stablehlo.case", "mhlo.while", "mhlo.if",
                             "mhlo.case", "torch.prim.If", "torch.prim.Loop"},
                            kind);
}

std::optional<StringRef> lethe::getLocationName(Location loc) {
  std::optional<StringRef> name;
  loc->walk([&](Location inner) {
    if (auto nameLoc = dyn_cast<NameLoc>(inner)) {
      name = nameLoc.getName().getValue();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

bool lethe::isTransposedNameStack(Location loc) {
  bool transposed = false;
  loc->walk([&](Location inner) {
    if (auto nameLoc = dyn_cast<NameLoc>(inner);
        nameLoc && nameLoc.getName().getValue().contains("transpose(")) {
      transposed = true;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return transposed;
}

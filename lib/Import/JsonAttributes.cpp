//===- JsonAttributes.cpp - JSON values as types and attributes ----------===//

#include "lethe/Import/JsonAttributes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <limits>

using namespace mlir;
using namespace lethe;
namespace json = llvm::json;

llvm::StringMap<Type> lethe::getJsonElementTypes(MLIRContext *context) {
  Builder b(context);
  Type f16 = b.getF16Type(), f32 = b.getF32Type(), f64 = b.getF64Type();
  llvm::StringMap<Type> types;
  for (auto [name, type] : std::initializer_list<std::pair<StringRef, Type>>{
           {"bfloat16", b.getBF16Type()},
           {"float16", f16},
           {"half", f16},
           {"float32", f32},
           {"float64", f64},
           {"double", f64},
           {"float8_e4m3fn", b.getType<Float8E4M3FNType>()},
           {"float8_e5m2", b.getType<Float8E5M2Type>()},
           {"float8_e4m3fnuz", b.getType<Float8E4M3FNUZType>()},
           {"float8_e5m2fnuz", b.getType<Float8E5M2FNUZType>()},
           {"int64", b.getI64Type()},
           {"long", b.getI64Type()},
           {"int32", b.getI32Type()},
           {"int16", b.getI16Type()},
           {"short", b.getI16Type()},
           {"int8", b.getI8Type()},
           {"uint8", b.getIntegerType(8, false)},
           {"uint16", b.getIntegerType(16, false)},
           {"uint32", b.getIntegerType(32, false)},
           {"uint64", b.getIntegerType(64, false)},
           {"bool", b.getI1Type()},
           {"complex32", ComplexType::get(f16)},
           {"complex64", ComplexType::get(f32)},
           {"complex128", ComplexType::get(f64)}}) {
    types[name] = type;
    types[("torch." + name).str()] = type;
  }
  return types;
}

FailureOr<Attribute>
lethe::convertJsonValue(const json::Value &value, MLIRContext *context,
                        llvm::function_ref<InFlightDiagnostic()> error) {
  Builder b(context);
  switch (value.kind()) {
  case json::Value::Null:
    return Attribute(b.getUnitAttr());
  case json::Value::Boolean:
    return Attribute(b.getBoolAttr(*value.getAsBoolean()));
  case json::Value::Number: {
    if (std::optional<uint64_t> u = value.getAsUINT64()) {
      if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Attribute(
            b.getIntegerAttr(b.getIntegerType(64, false), APInt(64, *u)));
      return Attribute(b.getI64IntegerAttr(static_cast<int64_t>(*u)));
    }
    std::optional<int64_t> i = value.getAsInteger();
    if (i && *i < 0)
      return Attribute(b.getI64IntegerAttr(*i));
    return Attribute(b.getF64FloatAttr(*value.getAsNumber()));
  }
  case json::Value::String:
    return Attribute(b.getStringAttr(*value.getAsString()));
  case json::Value::Array: {
    SmallVector<Attribute> elements;
    for (const json::Value &element : *value.getAsArray()) {
      FailureOr<Attribute> attr = convertJsonValue(element, context, error);
      if (failed(attr))
        return failure();
      elements.push_back(*attr);
    }
    return Attribute(b.getArrayAttr(elements));
  }
  case json::Value::Object: {
    SmallVector<NamedAttribute> entries;
    for (const auto &[key, element] : *value.getAsObject()) {
      if (StringRef(key).empty())
        return error() << "argument objects cannot have empty keys";
      FailureOr<Attribute> attr = convertJsonValue(element, context, error);
      if (failed(attr))
        return failure();
      entries.push_back(b.getNamedAttr(StringRef(key), *attr));
    }
    return Attribute(b.getDictionaryAttr(entries));
  }
  }
  llvm_unreachable("unknown JSON kind");
}

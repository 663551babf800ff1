//===- LetheTypes.cpp - Lethe types ---------------------------------------===//

#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <limits>

using namespace mlir;
using namespace lethe;

#define GET_TYPEDEF_CLASSES
#include "lethe/Dialect/Lethe/IR/LetheTypes.cpp.inc"

void LetheDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "lethe/Dialect/Lethe/IR/LetheTypes.cpp.inc"
      >();
}

LogicalResult
HostTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                       RankedTensorType tensorType) {
  if (!tensorType.hasStaticShape())
    return emitError() << "host tensor must have a static shape, got "
                       << tensorType;
  return success();
}

int64_t lethe::getTypeBytes(Type type) {
  if (auto host = dyn_cast<HostTensorType>(type))
    type = host.getTensorType();
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped)
    return 0;
  if (!shaped.hasStaticShape())
    return -1;
  Type elementType = shaped.getElementType();
  int64_t bitWidth = 0;
  if (elementType.isIntOrIndexOrFloat())
    bitWidth = elementType.isIndex() ? 64 : elementType.getIntOrFloatBitWidth();
  else if (auto complex = dyn_cast<ComplexType>(elementType))
    bitWidth = 2 * complex.getElementType().getIntOrFloatBitWidth();
  else
    bitWidth = 8;
  // Saturates rather than wraps: a size past int64 is then refused by the
  // first bound it meets (kMaxGraphBytes) instead of turning negative.
  std::optional<int64_t> bytes = (bitWidth + 7) / 8;
  for (int64_t dim : shaped.getShape())
    if (bytes)
      bytes = llvm::checkedMul(*bytes, dim);
  return bytes.value_or(std::numeric_limits<int64_t>::max());
}

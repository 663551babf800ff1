//===- LetheDialect.cpp - Lethe dialect registration ----------------------===//

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace lethe;

#include "lethe/Dialect/Lethe/IR/LetheDialect.cpp.inc"
#include "lethe/Dialect/Lethe/IR/LetheEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "lethe/Dialect/Lethe/IR/LetheAttrs.cpp.inc"

void LetheDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "lethe/Dialect/Lethe/IR/LetheOps.cpp.inc"
      >();
}

void LetheDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "lethe/Dialect/Lethe/IR/LetheAttrs.cpp.inc"
      >();
}

//===- LetheAttrs.h - Lethe attributes --------------------------*- C++ -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEATTRS_H
#define LETHE_DIALECT_LETHE_IR_LETHEATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "lethe/Dialect/Lethe/IR/LetheEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "lethe/Dialect/Lethe/IR/LetheAttrs.h.inc"

#endif // LETHE_DIALECT_LETHE_IR_LETHEATTRS_H

//===- LetheTypes.h - Lethe types -------------------------------*- C++ -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHETYPES_H
#define LETHE_DIALECT_LETHE_IR_LETHETYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "lethe/Dialect/Lethe/IR/LetheTypes.h.inc"

namespace lethe {
/// Bytes a value of type `type` occupies: static tensors and host tensors
/// count their elements (sub-byte elements round up to a byte); scalars and
/// `none` occupy nothing. Returns -1 for a dynamically shaped tensor, and
/// INT64_MAX for one whose size does not fit in int64.
int64_t getTypeBytes(mlir::Type type);
} // namespace lethe

#endif // LETHE_DIALECT_LETHE_IR_LETHETYPES_H

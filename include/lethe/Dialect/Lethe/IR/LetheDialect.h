//===- LetheDialect.h - Lethe dialect ---------------------------*- C++ -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEDIALECT_H
#define LETHE_DIALECT_LETHE_IR_LETHEDIALECT_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

// The discardable-attribute helpers name the attribute classes.
#include "lethe/Dialect/Lethe/IR/LetheDialect.h.inc"

#endif // LETHE_DIALECT_LETHE_IR_LETHEDIALECT_H

//===- LetheDialect.h - Lethe dialect ---------------------------*- C++ -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEDIALECT_H
#define LETHE_DIALECT_LETHE_IR_LETHEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "lethe/Dialect/Lethe/IR/LetheDialect.h.inc"

#endif // LETHE_DIALECT_LETHE_IR_LETHEDIALECT_H

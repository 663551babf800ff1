//===- Lethe.td - Lethe dialect aggregator -----------------*- tablegen -*-===//
//
// Include order: dialect, then attributes, types, ops. Attributes and types
// come before ops because ops name them in their arguments.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHE_TD
#define LETHE_DIALECT_LETHE_IR_LETHE_TD

include "lethe/Dialect/Lethe/IR/LetheDialect.td"
include "lethe/Dialect/Lethe/IR/LetheAttrs.td"
include "lethe/Dialect/Lethe/IR/LetheTypes.td"
include "lethe/Dialect/Lethe/IR/LetheOps.td"
include "lethe/Dialect/Lethe/IR/LetheTestOps.td"

#endif // LETHE_DIALECT_LETHE_IR_LETHE_TD

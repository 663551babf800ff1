//===- LetheOps.h - Lethe operations ----------------------------*- C++ -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEOPS_H
#define LETHE_DIALECT_LETHE_IR_LETHEOPS_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "lethe/Dialect/Lethe/IR/LetheOps.h.inc"

namespace lethe {
/// On a `lethe.node` or `lethe.collective` imported from a JSON graph: the
/// node's `id` there (i64). Plans name decisions by it (and by the node's
/// `name`), so that a framework can apply them to the graph it exported.
constexpr llvm::StringLiteral kNodeIdAttr = "lethe.node_id";
} // namespace lethe

#endif // LETHE_DIALECT_LETHE_IR_LETHEOPS_H

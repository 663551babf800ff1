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
/// The training graph's kind of a collective (`lethe.collective.all_gather`,
/// ...): the op's name and its collective.
std::string collectiveNodeKind(CollectiveKind kind);
} // namespace lethe

#endif // LETHE_DIALECT_LETHE_IR_LETHEOPS_H

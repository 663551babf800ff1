//===- GenericOps.h - Classify ops of generic-form exports ------*- C++ -*-===//
//
// What `lethe-import-ops` needs to know about the ops and types of PyTorch
// (ATen, torch-mlir), JAX (StableHLO) and upstream (linalg, tensor, tosa,
// arith) graphs: their canonical types, views, constants and phases.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_GENERICOPS_H
#define LETHE_IMPORT_GENERICOPS_H

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace lethe {

/// The canonical-form type of a value of an imported graph: static builtin
/// tensors stay, torch-mlir's `!torch.vtensor<[2,3],f32>` becomes
/// `tensor<2x3xf32>` (signed integers signless), scalars (`!torch.int`,
/// `!torch.float`, `!torch.bool`, builtin integers and floats) stay or become
/// builtin scalars, `!torch.none` and other non-tensor torch values become
/// `none`. Returns null and sets `reason` for dynamic or unranked shapes,
/// unknown element types, memrefs, lists of tensors and unknown types.
mlir::Type convertImportedType(mlir::Type type, std::string &reason);

/// The canonical kind of a source op: its name, with torch-mlir's `torch.`
/// dialect prefix dropped (`torch.aten.mm` -> `aten.mm`) and an `overload`
/// attribute appended (`aten.t` + "default" -> `aten.t.default`).
std::string getCanonicalKind(mlir::Operation *op);

/// Whether an ATen kind (`aten.transpose.int`) is a view of its first
/// operand: every result shares the first operand's storage.
bool isAtenViewKind(llvm::StringRef kind);

/// Whether an ATen kind writes its first operand in place (`aten.add_.Tensor`).
bool isAtenInPlaceKind(llvm::StringRef kind);

/// Whether `op` is a constant of a non-tensor value (a Python scalar, list
/// of scalars, string, device or None; a TOSA shape), which the importer
/// folds into its users' `args` instead of keeping as a node.
bool isScalarConstant(mlir::Operation *op);

/// The value of a scalar constant, as an attribute (`unit` for None).
mlir::Attribute getScalarConstantValue(mlir::Operation *op);

/// Whether `op` builds a list from its operands (`torch.prim.ListConstruct`):
/// the importer splices the list into its users.
bool isListConstruct(mlir::Operation *op);

/// Whether `kind` is structured control flow, which the canonical form
/// cannot carry.
bool isControlFlowKind(llvm::StringRef kind);

/// The first name in a location (a NameLoc, possibly inside fused or
/// call-site locations), if any.
std::optional<llvm::StringRef> getLocationName(mlir::Location loc);

/// Whether a JAX name stack in `loc` says the op belongs to a transposed
/// (backward) computation: `jit(step)/transpose(jvp(mlp))/dot_general`.
bool isTransposedNameStack(mlir::Location loc);

} // namespace lethe

#endif // LETHE_IMPORT_GENERICOPS_H

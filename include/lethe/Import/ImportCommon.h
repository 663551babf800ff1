//===- ImportCommon.h - Helpers shared by Lethe's importers -----*- C++ -*-===//
//
// The JSON importer and the `lethe-import-ops` pass produce the same
// canonical graph form; what they must agree on (scope names, phase
// inference, collectives) lives here.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_IMPORTCOMMON_H
#define LETHE_IMPORT_IMPORTCOMMON_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace lethe {

/// Argument attributes of the canonical form's `func.func`.
constexpr llvm::StringLiteral kArgKindAttr = "lethe.kind";
constexpr llvm::StringLiteral kArgNameAttr = "lethe.name";
/// Marks a value the exporter saved for the backward pass: a unit argument
/// attribute on graph inputs, the list of saved result indices on nodes.
constexpr llvm::StringLiteral kSavedAttr = "lethe.saved";
/// On a step result: the name of the parameter it is the gradient of.
constexpr llvm::StringLiteral kGradOfAttr = "lethe.grad_of";
/// Named (keyword) arguments and other source attributes of a node.
constexpr llvm::StringLiteral kNodeAttrsAttr = "lethe.attrs";

/// Drops the TorchDynamo local-variable prefix of an `nn.Module` path:
/// `L['model'].transformer.h.0` -> `transformer.h.0`, `L['model']` -> ``.
llvm::StringRef stripDynamoScope(llvm::StringRef scope);

/// The collective a source op kind performs (`_c10d_functional.*`,
/// `stablehlo.all_gather`, ...), if any. Waits and barriers are not
/// collectives.
std::optional<CollectiveKind> getCollectiveKind(llvm::StringRef kind);

/// The group size a `_c10d_functional` collective names in its positional
/// arguments (after the input, and the reduce op for reduce-scatter), if
/// any: all-reduce and all-to-all name only the group.
std::optional<int64_t> getC10dGroupSize(CollectiveKind kind,
                                        mlir::ArrayAttr args);

/// Creates a `lethe.collective` for a source op with one tensor input and one
/// tensor result over `group`, or returns null (creating nothing) when the
/// op does not fit that form (then the caller keeps it as a `lethe.node`,
/// which the planner still treats as a collective by its kind).
mlir::Operation *createCollectiveIfValid(
    mlir::OpBuilder &builder, mlir::Location loc, CollectiveKind kind,
    mlir::ValueRange inputs, mlir::TypeRange resultTypes,
    llvm::ArrayRef<int64_t> group, Phase phase, mlir::FloatAttr timeUs,
    mlir::StringAttr scope, mlir::StringAttr name);

} // namespace lethe

#endif // LETHE_IMPORT_IMPORTCOMMON_H

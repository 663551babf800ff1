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

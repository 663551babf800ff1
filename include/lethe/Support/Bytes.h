//===- Bytes.h - Byte counts as people write them ---------------*- C++ -*-===//

#ifndef LETHE_SUPPORT_BYTES_H
#define LETHE_SUPPORT_BYTES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>

namespace lethe {

/// Parses a byte count: a non-negative number with an optional unit (B,
/// KiB, MiB, GiB, TiB binary; KB, MB, GB, TB decimal; case-insensitive,
/// spaces allowed: "512", "1.5GiB", "800 MB"), or a percentage ("50%") of
/// `percentOf` when given. Fractional bytes are rounded down.
llvm::Expected<int64_t> parseByteCount(llvm::StringRef text,
                                       std::optional<int64_t> percentOf = {});

} // namespace lethe

#endif // LETHE_SUPPORT_BYTES_H

//===- TypeBytes.h - getTypeBytes once per distinct type --------*- C++ -*-===//

#ifndef LETHE_ANALYSIS_TYPEBYTES_H
#define LETHE_ANALYSIS_TYPEBYTES_H

#include "lethe/Dialect/Lethe/IR/LetheTypes.h"

#include "mlir/IR/Types.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>

namespace lethe {

/// getTypeBytes, computed once per distinct type: a step's 100,000s of
/// values have a few hundred types, and each call looks the shaped-type
/// interface up and multiplies through APInts (checkedMul): ~2% of a
/// `lethe plan` at 100k ops, where the graph was imported and built and
/// the program built.
class TypeBytesCache {
public:
  int64_t get(mlir::Type type) {
    auto [it, inserted] = bytes.try_emplace(type, 0);
    if (inserted)
      it->second = getTypeBytes(type);
    return it->second;
  }

private:
  llvm::DenseMap<mlir::Type, int64_t> bytes;
};

} // namespace lethe

#endif // LETHE_ANALYSIS_TYPEBYTES_H

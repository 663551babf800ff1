//===- Passes.h - Lethe dialect passes --------------------------*- C++ -*-===//

#ifndef LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_H
#define LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_H

#include "lethe/Dialect/Lethe/IR/LetheDialect.h"

#include "mlir/Pass/Pass.h"

#include <memory>

namespace lethe {

#define GEN_PASS_DECL
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lethe/Dialect/Lethe/Transforms/Passes.h.inc"

} // namespace lethe

#endif // LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_H

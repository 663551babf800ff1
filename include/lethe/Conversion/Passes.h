//===- Passes.h - Lethe conversion passes -----------------------*- C++ -*-===//

#ifndef LETHE_CONVERSION_PASSES_H
#define LETHE_CONVERSION_PASSES_H

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace lethe {

#define GEN_PASS_DECL
#include "lethe/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lethe/Conversion/Passes.h.inc"

} // namespace lethe

#endif // LETHE_CONVERSION_PASSES_H

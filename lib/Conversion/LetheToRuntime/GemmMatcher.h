//===- GemmMatcher.h - Recognise matmul-like nodes as GEMMs -----*- C++ -*-===//
//
// Whether an ATen matmul-like node is a plain row-major GEMM the runtime's
// letheRtGemm can run: every operand a tensor laid out row-major in its
// storage, possibly with its last two dimensions swapped by transpose views
// (which become the GEMM's trans flags on the base buffer).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_CONVERSION_LETHETORUNTIME_GEMMMATCHER_H
#define LETHE_LIB_CONVERSION_LETHETORUNTIME_GEMMMATCHER_H

#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace lethe {

/// How a tensor value lies in its storage, for a GEMM.
struct RowMajorView {
  /// The value owning the bytes: an allocating result or a function
  /// argument.
  mlir::Value storage;
  /// The value is the storage's bytes read row-major with its last two
  /// dimensions swapped.
  bool transposed = false;
};

/// Follows views, awaits and recompute yields from `value` back to its
/// storage. Fails with the reason when a view on the way is not a reshape
/// or a transpose of the last two dimensions of a row-major tensor.
std::optional<RowMajorView> getRowMajorView(mlir::Value value,
                                            std::string &whyNot);

/// A GEMM operand: the value as the op sees it, and its layout.
struct GemmOperand {
  mlir::Value value;
  RowMajorView view;
  /// Bytes the GEMM reads or writes: the operand's elements.
  int64_t bytes = 0;
};

/// C[batch][m][n] = op(A) op(B) (+ bias[n]) as in lethe-c/Runtime.h.
struct GemmMatch {
  /// LETHE_DTYPE_F32 / F16 / BF16.
  llvm::StringRef dtype;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  GemmOperand a, b, c;
  std::optional<GemmOperand> bias;
  bool transA() const { return a.view.transposed; }
  bool transB() const { return b.view.transposed; }
};

/// Kinds lowered through matchGemm: mm, addmm, bmm, linear, matmul.
bool isGemmKind(llvm::StringRef kind);

/// The GEMM `node` computes, or std::nullopt with the reason in `whyNot`.
std::optional<GemmMatch> matchGemm(NodeOp node, std::string &whyNot);

} // namespace lethe

#endif // LETHE_LIB_CONVERSION_LETHETORUNTIME_GEMMMATCHER_H

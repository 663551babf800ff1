// RUN: lethe-translate --lethe-to-cpp %s | FileCheck %s
// RUN: sed 's/expected-remark.*//' %s | lethe-translate --lethe-to-cpp 2>&1 >/dev/null | FileCheck %s --allow-empty --check-prefix=QUIET
// RUN: lethe-opt %s --lethe-lower-to-runtime --remarks-filter=lethe-lower-to-runtime --remark-format=emitRemark -verify-diagnostics -o /dev/null
// RUN: lethe-translate --lethe-to-cpp %s -o %t.cpp
// RUN: %host_cxx -std=c++17 -fsyntax-only -Wall -Werror -I%lethe_src/include -x c++ %t.cpp

// Matmul-like ATen nodes become letheRtGemm with their real shapes; transpose
// views in front of an operand become its trans flag on the base buffer.
// Layouts that are not a plain GEMM are replayed: counted (the statistic
// num-gemm-fallbacks), with the reason as a comment in the C++ and as a
// missed remark of lethe-lower-to-runtime (shown with
// --remarks-filter=lethe-lower-to-runtime; the translation prints nothing:
// the QUIET run drops the expected-remark lines, which would be reported as
// not produced).
// QUIET-NOT: {{.}}

module attributes {lethe.arena_alignment = 256 : i64, lethe.device_arena_bytes = 65536 : i64, lethe.host_arena_bytes = 0 : i64, lethe.model = "gemms"} {
func.func @step(%x: tensor<4x4x32xbf16> {lethe.kind = "input", lethe.name = "x"},
                %w: tensor<64x32xbf16> {lethe.kind = "param", lethe.name = "fc.weight"},
                %b: tensor<64xbf16> {lethe.kind = "param", lethe.name = "fc.bias"},
                %q: tensor<2x8x16xf32> {lethe.kind = "input", lethe.name = "q"},
                %k: tensor<2x8x16xf32> {lethe.kind = "input", lethe.name = "k"},
                %g: tensor<16x64xbf16> {lethe.kind = "tangent", lethe.name = "tangents_1"})
    -> (tensor<16x64xbf16>, tensor<64x32xbf16>, tensor<2x8x8xf32>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<4x4x64xbf16>, tensor<8x64xbf16>) {
  // A 3-D input flattened by a view, the weight read through aten.t: the
  // GEMM reads x and fc.weight in place, B transposed.
  // CHECK: static const LetheRtBuf x = {65536, 1024};
  // CHECK: static const LetheRtBuf fc_weight = {66560, 4096};
  // CHECK-LABEL: static LetheRtStatus step(
  // CHECK: // %2 = aten.addmm.default "addmm" fwd [fc] (%arg2, %0, %1)
  // CHECK-NEXT: // GEMM 16x32 @ 32x64^T + bias
  // CHECK-NEXT: letheRtGemm(rt, "aten.addmm.default addmm", 5.5, {LETHE_DTYPE_BF16, 0, 1, 1, 16, 64, 32, x, fc_weight, fc_bias, addmm});
  %xv = lethe.node "aten.view.default" fwd (%x) {aliases = array<i64: 0>, args = [{in = 0 : i64}, [16, 32]], name = "view", time_us = 1.0 : f64} : (tensor<4x4x32xbf16>) -> tensor<16x32xbf16>
  %wt = lethe.node "aten.t.default" fwd (%w) {aliases = array<i64: 0>, args = [{in = 0 : i64}], name = "t", time_us = 1.0 : f64} : (tensor<64x32xbf16>) -> tensor<32x64xbf16>
  %y = lethe.node "aten.addmm.default" fwd (%b, %xv, %wt) {args = [{in = 0 : i64}, {in = 1 : i64}, {in = 2 : i64}], name = "addmm", scope = "fc", time_us = 5.5 : f64, lethe.offsets = array<i64: 0>} : (tensor<64xbf16>, tensor<16x32xbf16>, tensor<32x64xbf16>) -> tensor<16x64xbf16>

  // The weight gradient: grad^T @ x, A transposed (m = 64, k = 16).
  // CHECK: // GEMM 64x16^T @ 16x32
  // CHECK-NEXT: letheRtGemm(rt, "aten.mm.default mm", 4.0, {LETHE_DTYPE_BF16, 1, 0, 1, 64, 32, 16, tangents_1, x, {0, 0}, mm});
  %gt = lethe.node "aten.t.default" bwd (%g) {aliases = array<i64: 0>, name = "t_1", time_us = 1.0 : f64} : (tensor<16x64xbf16>) -> tensor<64x16xbf16>
  %dw = lethe.node "aten.mm.default" bwd (%gt, %xv) {name = "mm", time_us = 4.0 : f64, lethe.offsets = array<i64: 2048>} : (tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<64x32xbf16>

  // Attention scores: q @ k^T with transpose(-2, -1) on a 3-D tensor.
  // CHECK: // GEMM 2 x 8x16 @ 16x8^T
  // CHECK-NEXT: letheRtGemm(rt, "aten.bmm.default bmm", 3.0, {LETHE_DTYPE_F32, 0, 1, 2, 8, 8, 16, q, k, {0, 0}, bmm});
  %kt = lethe.node "aten.transpose.int" fwd (%k) {aliases = array<i64: 0>, args = [{in = 0 : i64}, -2, -1], name = "transpose", time_us = 1.0 : f64} : (tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  %s = lethe.node "aten.bmm.default" fwd (%q, %kt) {name = "bmm", time_us = 3.0 : f64, lethe.offsets = array<i64: 6144>} : (tensor<2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<2x8x8xf32>

  // aten.linear reads its weight transposed; a weight stored [k][n] and
  // read through aten.t cancels that. Views compose: t(permute) is no
  // transpose at all.
  // CHECK: letheRtGemm(rt, "aten.linear.default linear", 2.0, {LETHE_DTYPE_BF16, 0, 1, 1, 16, 64, 32, x, fc_weight, fc_bias, linear});
  // CHECK: letheRtGemm(rt, "aten.linear.default linear_1", 2.0, {LETHE_DTYPE_BF16, 0, 0, 1, 16, 64, 32, x, t_4, {0, 0}, linear_1});
  // CHECK: letheRtGemm(rt, "aten.matmul.default matmul", 2.0, {LETHE_DTYPE_BF16, 0, 1, 1, 16, 64, 32, x, fc_weight, {0, 0}, matmul});
  %l = lethe.node "aten.linear.default" fwd (%xv, %w, %b) {name = "linear", time_us = 2.0 : f64, lethe.offsets = array<i64: 7168>} : (tensor<16x32xbf16>, tensor<64x32xbf16>, tensor<64xbf16>) -> tensor<16x64xbf16>
  %wc = lethe.node "aten.t.default" fwd (%w) {name = "t_4", time_us = 1.0 : f64, lethe.offsets = array<i64: 11264>} : (tensor<64x32xbf16>) -> tensor<32x64xbf16>
  %wct = lethe.node "aten.t.default" fwd (%wc) {aliases = array<i64: 0>, name = "t_2", time_us = 1.0 : f64} : (tensor<32x64xbf16>) -> tensor<64x32xbf16>
  %l1 = lethe.node "aten.linear.default" fwd (%xv, %wct) {name = "linear_1", time_us = 2.0 : f64, lethe.offsets = array<i64: 9216>} : (tensor<16x32xbf16>, tensor<64x32xbf16>) -> tensor<16x64xbf16>
  %w2 = lethe.node "aten.permute.default" fwd (%w) {aliases = array<i64: 0>, args = [{in = 0 : i64}, [1, 0]], name = "permute", time_us = 1.0 : f64} : (tensor<64x32xbf16>) -> tensor<32x64xbf16>
  %w3 = lethe.node "aten.t.default" fwd (%w2) {aliases = array<i64: 0>, name = "t_3", time_us = 1.0 : f64} : (tensor<32x64xbf16>) -> tensor<64x32xbf16>
  %w4 = lethe.node "aten.transpose.int" fwd (%w3) {aliases = array<i64: 0>, args = [{in = 0 : i64}, 0, 1], name = "transpose_1", time_us = 1.0 : f64} : (tensor<64x32xbf16>) -> tensor<32x64xbf16>

  // A 3-D matmul with a 2-D weight folds the leading dimensions into m.
  %m = lethe.node "aten.matmul.default" fwd (%x, %w4) {name = "matmul", time_us = 2.0 : f64, lethe.offsets = array<i64: 15360>} : (tensor<4x4x32xbf16>, tensor<32x64xbf16>) -> tensor<4x4x64xbf16>

  // Not plain GEMMs: replayed with their time, with a remark.
  // CHECK: // (replayed: A is read through a view that 'aten.slice.Tensor' is not a reshape or a transpose of the last two dimensions)
  // The replay reads the slice's 8x32 bf16 (512 B) of x's 1024, not all of x.
  // CHECK-NEXT: letheRtReplay(rt, "aten.mm.default mm_2", 2.0, {{[{][{]}}x.offset, 512}, fc_weight}, {mm_2});
  %xs = lethe.node "aten.slice.Tensor" fwd (%xv) {aliases = array<i64: 0>, args = [{in = 0 : i64}, 0, 0, 8], name = "slice", time_us = 1.0 : f64} : (tensor<16x32xbf16>) -> tensor<8x32xbf16>
  // expected-remark @+1 {{replayed, not a GEMM: A is read through a view that 'aten.slice.Tensor' is not a reshape or a transpose of the last two dimensions}}
  %ms = lethe.node "aten.mm.default" fwd (%xs, %wt) {name = "mm_2", time_us = 2.0 : f64, lethe.offsets = array<i64: 17408>} : (tensor<8x32xbf16>, tensor<32x64xbf16>) -> tensor<8x64xbf16>
  // CHECK: letheRtReplay(rt, "aten.addmm.default addmm_1", 5.5, {fc_bias, x, fc_weight}, {addmm_1});
  // expected-remark @+1 {{replayed, not a GEMM: beta or alpha is not 1}}
  %y2 = lethe.node "aten.addmm.default" fwd (%b, %xv, %wt) {args = [{in = 0 : i64}, {in = 1 : i64}, {in = 2 : i64}, 2, 1], name = "addmm_1", time_us = 5.5 : f64, lethe.offsets = array<i64: 18432>} : (tensor<64xbf16>, tensor<16x32xbf16>, tensor<32x64xbf16>) -> tensor<16x64xbf16>
  %tv = lethe.node "aten.view.default" fwd (%wt) {aliases = array<i64: 0>, name = "view_1", time_us = 1.0 : f64} : (tensor<32x64xbf16>) -> tensor<16x128xbf16>
  // expected-remark @+1 {{replayed, not a GEMM: A is read through a view that 'aten.view.default' reshapes a transposed tensor}}
  %bad = lethe.node "aten.mm.default" fwd (%tv, %w) {name = "mm_3", time_us = 2.0 : f64, lethe.offsets = array<i64: 20480>} : (tensor<16x128xbf16>, tensor<64x32xbf16>) -> tensor<16x32xbf16>
  lethe.release %bad : tensor<16x32xbf16>
  return %y, %dw, %s, %l, %l1, %y2, %m, %ms : tensor<16x64xbf16>, tensor<64x32xbf16>, tensor<2x8x8xf32>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<4x4x64xbf16>, tensor<8x64xbf16>
}
}

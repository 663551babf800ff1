//===- MlpCommon.h - Sizes and times of the example MLP programs -*- C++
//-*-===//
//
// The example programs (mlp-*.cpp) are one 4-layer training step, planned
// three ways. Forward layer i: h_i = x_i W_i (GEMM), x_{i+1} = mix(h_i) (a
// replay op standing in for attention and friends); the loss gives
// g_4 = lossGrad(x_4); backward layer i: dh_i = mixGrad(g_{i+1}, h_i),
// dW_i = x_i^T dh_i, g_i = dh_i W_i^T. All bf16.
//
// LETHE_EXAMPLE_SMALL shrinks them for compute-sanitizer runs.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_TEST_INTEGRATION_MLPCOMMON_H
#define LETHE_TEST_INTEGRATION_MLPCOMMON_H

#include "lethe-c/Runtime.h"

#ifdef LETHE_EXAMPLE_SMALL
constexpr int64_t T = 1024, D = 256; // tokens, width
constexpr double kGemmUs = 10, kMixUs = 30, kMixGradUs = 60, kLossUs = 5;
#else
constexpr int64_t T = 8192, D = 2048;
constexpr double kGemmUs = 105, kMixUs = 1500, kMixGradUs = 2000, kLossUs = 50;
#endif

/// Bytes of one activation [T, D] and one weight [D, D].
constexpr uint64_t ACT = (uint64_t)T * D * 2;
constexpr uint64_t WB = (uint64_t)D * D * 2;

/// Parameters and their gradients lead the device arena in every plan.
constexpr LetheRtBuf W0 = {0 * WB, WB}, W1 = {1 * WB, WB}, W2 = {2 * WB, WB},
                     W3 = {3 * WB, WB};
constexpr LetheRtBuf DW0 = {4 * WB, WB}, DW1 = {5 * WB, WB}, DW2 = {6 * WB, WB},
                     DW3 = {7 * WB, WB};
/// Where activation slots start.
constexpr uint64_t A = 8 * WB;

/// The GEMMs of a layer: forward x W, weight gradient x^T dh, input
/// gradient dh W^T.
constexpr LetheRtGemm forwardGemm(LetheRtBuf x, LetheRtBuf w, LetheRtBuf h) {
  return {LETHE_DTYPE_BF16, 0, 0, 1, T, D, D, x, w, {0, 0}, h};
}
constexpr LetheRtGemm weightGradGemm(LetheRtBuf x, LetheRtBuf dh,
                                     LetheRtBuf dw) {
  return {LETHE_DTYPE_BF16, 1, 0, 1, D, D, T, x, dh, {0, 0}, dw};
}
constexpr LetheRtGemm inputGradGemm(LetheRtBuf dh, LetheRtBuf w, LetheRtBuf g) {
  return {LETHE_DTYPE_BF16, 0, 1, 1, T, D, D, dh, w, {0, 0}, g};
}

/// Parameters and the input batch: the same contents in every plan.
inline LetheRtStatus initMlp(LetheRt *rt, LetheRtBuf x0) {
  letheRtFill(rt, W0, LETHE_DTYPE_BF16, 100);
  letheRtFill(rt, W1, LETHE_DTYPE_BF16, 101);
  letheRtFill(rt, W2, LETHE_DTYPE_BF16, 102);
  letheRtFill(rt, W3, LETHE_DTYPE_BF16, 103);
  letheRtFill(rt, x0, LETHE_DTYPE_BF16, 1);
  return letheRtGetStatus(rt);
}

/// The tensors every plan must reproduce bit for bit.
inline LetheRtStatus checksumMlp(LetheRt *rt, LetheRtBuf gradX0) {
  letheRtChecksum(rt, "dW0", DW0);
  letheRtChecksum(rt, "dW1", DW1);
  letheRtChecksum(rt, "dW2", DW2);
  letheRtChecksum(rt, "dW3", DW3);
  letheRtChecksum(rt, "grad_x0", gradX0);
  return letheRtGetStatus(rt);
}

/// The unplanned step's predicted time: every op once.
constexpr double kUnplannedUs =
    4 * (kGemmUs + kMixUs) + kLossUs + 4 * (kMixGradUs + 2 * kGemmUs);

#endif // LETHE_TEST_INTEGRATION_MLPCOMMON_H

//===- mlp-unplanned.cpp - Example program: every activation retained -----===//
//
// Hand-written in the style lethe-lower-to-runtime emits: a tensor table of
// arena slots, then one runtime call per op. This plan keeps every
// activation on the device; it is the reference the planned variants'
// checksums must equal (MlpCommon.h describes the model).
//
//===----------------------------------------------------------------------===//

#include "MlpCommon.h"

namespace {

// Activation slots: x_0..x_4, h_0..h_3, two gradient slots, dh.
constexpr LetheRtBuf X0 = {A + 0 * ACT, ACT}, X1 = {A + 1 * ACT, ACT},
                     X2 = {A + 2 * ACT, ACT}, X3 = {A + 3 * ACT, ACT},
                     X4 = {A + 4 * ACT, ACT};
constexpr LetheRtBuf H0 = {A + 5 * ACT, ACT}, H1 = {A + 6 * ACT, ACT},
                     H2 = {A + 7 * ACT, ACT}, H3 = {A + 8 * ACT, ACT};
constexpr LetheRtBuf G0 = {A + 9 * ACT, ACT}, G1 = {A + 10 * ACT, ACT};
constexpr LetheRtBuf DH = {A + 11 * ACT, ACT};
constexpr uint64_t kDeviceArena = A + 12 * ACT;

LetheRtStatus init(LetheRt *rt) { return initMlp(rt, X0); }

LetheRtStatus step(LetheRt *rt) {
  // Forward.
  letheRtGemm(rt, "h0 = x0 @ W0", kGemmUs, forwardGemm(X0, W0, H0));
  letheRtReplay(rt, "x1 = mix(h0)", kMixUs, {H0}, {X1});
  letheRtGemm(rt, "h1 = x1 @ W1", kGemmUs, forwardGemm(X1, W1, H1));
  letheRtReplay(rt, "x2 = mix(h1)", kMixUs, {H1}, {X2});
  letheRtGemm(rt, "h2 = x2 @ W2", kGemmUs, forwardGemm(X2, W2, H2));
  letheRtReplay(rt, "x3 = mix(h2)", kMixUs, {H2}, {X3});
  letheRtGemm(rt, "h3 = x3 @ W3", kGemmUs, forwardGemm(X3, W3, H3));
  letheRtReplay(rt, "x4 = mix(h3)", kMixUs, {H3}, {X4});
  letheRtReplay(rt, "g4 = lossGrad(x4)", kLossUs, {X4}, {G0});

  // Backward.
  letheRtReplay(rt, "dh3 = mixGrad(g4, h3)", kMixGradUs, {G0, H3}, {DH});
  letheRtGemm(rt, "dW3 = x3^T @ dh3", kGemmUs, weightGradGemm(X3, DH, DW3));
  letheRtGemm(rt, "g3 = dh3 @ W3^T", kGemmUs, inputGradGemm(DH, W3, G1));
  letheRtReplay(rt, "dh2 = mixGrad(g3, h2)", kMixGradUs, {G1, H2}, {DH});
  letheRtGemm(rt, "dW2 = x2^T @ dh2", kGemmUs, weightGradGemm(X2, DH, DW2));
  letheRtGemm(rt, "g2 = dh2 @ W2^T", kGemmUs, inputGradGemm(DH, W2, G0));
  letheRtReplay(rt, "dh1 = mixGrad(g2, h1)", kMixGradUs, {G0, H1}, {DH});
  letheRtGemm(rt, "dW1 = x1^T @ dh1", kGemmUs, weightGradGemm(X1, DH, DW1));
  letheRtGemm(rt, "g1 = dh1 @ W1^T", kGemmUs, inputGradGemm(DH, W1, G1));
  letheRtReplay(rt, "dh0 = mixGrad(g1, h0)", kMixGradUs, {G1, H0}, {DH});
  letheRtGemm(rt, "dW0 = x0^T @ dh0", kGemmUs, weightGradGemm(X0, DH, DW0));
  letheRtGemm(rt, "g0 = dh0 @ W0^T", kGemmUs, inputGradGemm(DH, W0, G0));
  return letheRtGetStatus(rt);
}

LetheRtStatus checksum(LetheRt *rt) { return checksumMlp(rt, G0); }

} // namespace

extern "C" const LetheRtProgram *letheProgram(void) {
  static const LetheRtProgram program = {LETHE_RT_ABI_VERSION,
                                         "mlp-unplanned",
                                         kDeviceArena,
                                         /*hostArenaBytes=*/0,
                                         /*numEvents=*/0,
                                         /*worldSize=*/0,
                                         kUnplannedUs,
                                         kDeviceArena,
                                         init,
                                         step,
                                         checksum};
  return &program;
}

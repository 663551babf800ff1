//===- mlp-recompute.cpp - Example program: recompute --------------------===//
//
// The MLP step (MlpCommon.h) keeping x0..x4 and recomputing every h_i
// (one GEMM each) right before its backward use, in one shared slot: 9
// activation slots instead of the unplanned 12, for 4 extra GEMMs.
//
// Negative variant, built from this file, must change the checksums:
//   LETHE_NEGATIVE_WRONG_INPUT  h1 is recomputed from x2 instead of x1.
//
//===----------------------------------------------------------------------===//

#include "MlpCommon.h"

namespace {

constexpr LetheRtBuf X0 = {A + 0 * ACT, ACT}, X1 = {A + 1 * ACT, ACT},
                     X2 = {A + 2 * ACT, ACT}, X3 = {A + 3 * ACT, ACT},
                     X4 = {A + 4 * ACT, ACT};
constexpr LetheRtBuf HS = {A + 5 * ACT, ACT};
constexpr LetheRtBuf G0 = {A + 6 * ACT, ACT}, G1 = {A + 7 * ACT, ACT};
constexpr LetheRtBuf DH = {A + 8 * ACT, ACT};
constexpr uint64_t kDeviceArena = A + 9 * ACT;

#ifdef LETHE_NEGATIVE_WRONG_INPUT
constexpr LetheRtBuf kRecomputeH1From = X2;
constexpr const char *kName = "mlp-recompute-wrong-input";
#else
constexpr LetheRtBuf kRecomputeH1From = X1;
constexpr const char *kName = "mlp-recompute";
#endif

LetheRtStatus init(LetheRt *rt) { return initMlp(rt, X0); }

LetheRtStatus step(LetheRt *rt) {
  // Forward: each h_i lives only until mix has read it.
  letheRtGemm(rt, "h0 = x0 @ W0", kGemmUs, forwardGemm(X0, W0, HS));
  letheRtReplay(rt, "x1 = mix(h0)", kMixUs, {HS}, {X1});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtGemm(rt, "h1 = x1 @ W1", kGemmUs, forwardGemm(X1, W1, HS));
  letheRtReplay(rt, "x2 = mix(h1)", kMixUs, {HS}, {X2});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtGemm(rt, "h2 = x2 @ W2", kGemmUs, forwardGemm(X2, W2, HS));
  letheRtReplay(rt, "x3 = mix(h2)", kMixUs, {HS}, {X3});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtGemm(rt, "h3 = x3 @ W3", kGemmUs, forwardGemm(X3, W3, HS));
  letheRtReplay(rt, "x4 = mix(h3)", kMixUs, {HS}, {X4});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtReplay(rt, "g4 = lossGrad(x4)", kLossUs, {X4}, {G0});

  // Backward: recompute h_i, use it, release it.
  letheRtGemm(rt, "recompute h3 = x3 @ W3", kGemmUs, forwardGemm(X3, W3, HS));
  letheRtReplay(rt, "dh3 = mixGrad(g4, h3)", kMixGradUs, {G0, HS}, {DH});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtGemm(rt, "dW3 = x3^T @ dh3", kGemmUs, weightGradGemm(X3, DH, DW3));
  letheRtGemm(rt, "g3 = dh3 @ W3^T", kGemmUs, inputGradGemm(DH, W3, G1));

  letheRtGemm(rt, "recompute h2 = x2 @ W2", kGemmUs, forwardGemm(X2, W2, HS));
  letheRtReplay(rt, "dh2 = mixGrad(g3, h2)", kMixGradUs, {G1, HS}, {DH});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtGemm(rt, "dW2 = x2^T @ dh2", kGemmUs, weightGradGemm(X2, DH, DW2));
  letheRtGemm(rt, "g2 = dh2 @ W2^T", kGemmUs, inputGradGemm(DH, W2, G0));

  letheRtGemm(rt, "recompute h1 = x1 @ W1", kGemmUs,
              forwardGemm(kRecomputeH1From, W1, HS));
  letheRtReplay(rt, "dh1 = mixGrad(g2, h1)", kMixGradUs, {G0, HS}, {DH});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtGemm(rt, "dW1 = x1^T @ dh1", kGemmUs, weightGradGemm(X1, DH, DW1));
  letheRtGemm(rt, "g1 = dh1 @ W1^T", kGemmUs, inputGradGemm(DH, W1, G1));

  letheRtGemm(rt, "recompute h0 = x0 @ W0", kGemmUs, forwardGemm(X0, W0, HS));
  letheRtReplay(rt, "dh0 = mixGrad(g1, h0)", kMixGradUs, {G1, HS}, {DH});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HS);
  letheRtGemm(rt, "dW0 = x0^T @ dh0", kGemmUs, weightGradGemm(X0, DH, DW0));
  letheRtGemm(rt, "g0 = dh0 @ W0^T", kGemmUs, inputGradGemm(DH, W0, G0));
  return letheRtGetStatus(rt);
}

LetheRtStatus checksum(LetheRt *rt) { return checksumMlp(rt, G0); }

} // namespace

extern "C" const LetheRtProgram *letheProgram(void) {
  static const LetheRtProgram program = {LETHE_RT_ABI_VERSION,
                                         kName,
                                         kDeviceArena,
                                         /*hostArenaBytes=*/0,
                                         /*numEvents=*/0,
                                         /*worldSize=*/0,
                                         kUnplannedUs + 4 * kGemmUs,
                                         kDeviceArena,
                                         init,
                                         step,
                                         checksum};
  return &program;
}

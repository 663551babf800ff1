//===- mlp-offload.cpp - Example program: offload and prefetch
//-------------===//
//
// The MLP step (MlpCommon.h) with h0, x1, h1 and x2 offloaded to pinned
// host memory after they are produced and prefetched back ahead of their
// backward use, so that two pairs of slots (XA/XB, HA/HB) carry x1..x4 and
// h0..h3: 8 activation slots instead of the unplanned 12. Every slot is
// reused only after an event says its copy finished; a slot is released
// (poisoned, in checksum mode) after its last use.
//
// Negative variants, built from this file, must change the checksums:
//   LETHE_NEGATIVE_DROP_WAIT      the D2H copy of h0 does not wait for the
//                                 GEMM that produces it;
//   LETHE_NEGATIVE_RELEASE_EARLY  x2's slot is released after its last
//                                 compute use, while its D2H copy still runs.
//
//===----------------------------------------------------------------------===//

#include "MlpCommon.h"

namespace {

constexpr LetheRtBuf X0 = {A + 0 * ACT, ACT};
constexpr LetheRtBuf XA = {A + 1 * ACT, ACT}, XB = {A + 2 * ACT, ACT};
constexpr LetheRtBuf HA = {A + 3 * ACT, ACT}, HB = {A + 4 * ACT, ACT};
constexpr LetheRtBuf G0 = {A + 5 * ACT, ACT}, G1 = {A + 6 * ACT, ACT};
constexpr LetheRtBuf DH = {A + 7 * ACT, ACT};
constexpr uint64_t kDeviceArena = A + 8 * ACT;

// Host slots of the offloaded activations.
constexpr uint64_t kHostH0 = 0 * ACT, kHostX1 = 1 * ACT, kHostH1 = 2 * ACT,
                   kHostX2 = 3 * ACT;
constexpr uint64_t kHostArena = 4 * ACT;

enum Event : uint32_t {
  kH0Ready,
  kH0Saved,
  kX1Ready,
  kX1Saved,
  kH1Ready,
  kH1Saved,
  kX2Ready,
  kX2Saved,
  kXAFree,
  kX2Back,
  kHBXBFree,
  kH1X1Back,
  kHAFree,
  kH0Back,
  kNumEvents
};

LetheRtStatus init(LetheRt *rt) { return initMlp(rt, X0); }

LetheRtStatus step(LetheRt *rt) {
  // Forward layer 0: h0 -> HA, x1 -> XB; both offloaded.
  letheRtGemm(rt, "h0 = x0 @ W0", kGemmUs, forwardGemm(X0, W0, HA));
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, kH0Ready);
#ifndef LETHE_NEGATIVE_DROP_WAIT
  letheRtWait(rt, LETHE_STREAM_D2H, kH0Ready);
#endif
  letheRtCopyD2H(rt, HA.offset, kHostH0, ACT);
  letheRtRecord(rt, LETHE_STREAM_D2H, kH0Saved);
  letheRtReplay(rt, "x1 = mix(h0)", kMixUs, {HA}, {XB});
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, kX1Ready);
  letheRtWait(rt, LETHE_STREAM_D2H, kX1Ready);
  letheRtCopyD2H(rt, XB.offset, kHostX1, ACT);
  letheRtRecord(rt, LETHE_STREAM_D2H, kX1Saved);

  // Forward layer 1: h1 -> HB, x2 -> XA; both offloaded.
  letheRtGemm(rt, "h1 = x1 @ W1", kGemmUs, forwardGemm(XB, W1, HB));
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, kH1Ready);
  letheRtWait(rt, LETHE_STREAM_D2H, kH1Ready);
  letheRtCopyD2H(rt, HB.offset, kHostH1, ACT);
  letheRtRecord(rt, LETHE_STREAM_D2H, kH1Saved);
  letheRtReplay(rt, "x2 = mix(h1)", kMixUs, {HB}, {XA});
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, kX2Ready);
  letheRtWait(rt, LETHE_STREAM_D2H, kX2Ready);
  letheRtCopyD2H(rt, XA.offset, kHostX2, ACT);
  letheRtRecord(rt, LETHE_STREAM_D2H, kX2Saved);

  // Forward layer 2: h2 takes h0's slot, x3 takes x1's, once they are saved.
  letheRtWait(rt, LETHE_STREAM_COMPUTE, kH0Saved);
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HA);
  letheRtGemm(rt, "h2 = x2 @ W2", kGemmUs, forwardGemm(XA, W2, HA));
#ifdef LETHE_NEGATIVE_RELEASE_EARLY
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, XA);
#endif
  letheRtWait(rt, LETHE_STREAM_COMPUTE, kX1Saved);
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, XB);
  letheRtReplay(rt, "x3 = mix(h2)", kMixUs, {HA}, {XB});

  // Forward layer 3: h3 takes h1's slot, x4 takes x2's.
  letheRtWait(rt, LETHE_STREAM_COMPUTE, kH1Saved);
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HB);
  letheRtGemm(rt, "h3 = x3 @ W3", kGemmUs, forwardGemm(XB, W3, HB));
  letheRtWait(rt, LETHE_STREAM_COMPUTE, kX2Saved);
#ifndef LETHE_NEGATIVE_RELEASE_EARLY
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, XA);
#endif
  letheRtReplay(rt, "x4 = mix(h3)", kMixUs, {HB}, {XA});
  letheRtReplay(rt, "g4 = lossGrad(x4)", kLossUs, {XA}, {G0});
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, XA);
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, kXAFree);
  letheRtWait(rt, LETHE_STREAM_H2D, kXAFree);
  letheRtCopyH2D(rt, kHostX2, XA.offset, ACT);
  letheRtRecord(rt, LETHE_STREAM_H2D, kX2Back);

  // Backward layer 3: h3 (HB) and x3 (XB) never left; then they make room
  // for h1 and x1.
  letheRtReplay(rt, "dh3 = mixGrad(g4, h3)", kMixGradUs, {G0, HB}, {DH});
  letheRtGemm(rt, "dW3 = x3^T @ dh3", kGemmUs, weightGradGemm(XB, DH, DW3));
  letheRtGemm(rt, "g3 = dh3 @ W3^T", kGemmUs, inputGradGemm(DH, W3, G1));
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HB);
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, XB);
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, kHBXBFree);
  letheRtWait(rt, LETHE_STREAM_H2D, kHBXBFree);
  letheRtCopyH2D(rt, kHostH1, HB.offset, ACT);
  letheRtCopyH2D(rt, kHostX1, XB.offset, ACT);
  letheRtRecord(rt, LETHE_STREAM_H2D, kH1X1Back);

  // Backward layer 2: h2 (HA) stayed, x2 came back into XA.
  letheRtWait(rt, LETHE_STREAM_COMPUTE, kX2Back);
  letheRtReplay(rt, "dh2 = mixGrad(g3, h2)", kMixGradUs, {G1, HA}, {DH});
  letheRtGemm(rt, "dW2 = x2^T @ dh2", kGemmUs, weightGradGemm(XA, DH, DW2));
  letheRtGemm(rt, "g2 = dh2 @ W2^T", kGemmUs, inputGradGemm(DH, W2, G0));
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, HA);
  letheRtRelease(rt, LETHE_STREAM_COMPUTE, XA);
  letheRtRecord(rt, LETHE_STREAM_COMPUTE, kHAFree);
  letheRtWait(rt, LETHE_STREAM_H2D, kHAFree);
  letheRtCopyH2D(rt, kHostH0, HA.offset, ACT);
  letheRtRecord(rt, LETHE_STREAM_H2D, kH0Back);

  // Backward layer 1: h1 and x1 are back in HB and XB.
  letheRtWait(rt, LETHE_STREAM_COMPUTE, kH1X1Back);
  letheRtReplay(rt, "dh1 = mixGrad(g2, h1)", kMixGradUs, {G0, HB}, {DH});
  letheRtGemm(rt, "dW1 = x1^T @ dh1", kGemmUs, weightGradGemm(XB, DH, DW1));
  letheRtGemm(rt, "g1 = dh1 @ W1^T", kGemmUs, inputGradGemm(DH, W1, G1));

  // Backward layer 0: h0 is back in HA; x0 never left.
  letheRtWait(rt, LETHE_STREAM_COMPUTE, kH0Back);
  letheRtReplay(rt, "dh0 = mixGrad(g1, h0)", kMixGradUs, {G1, HA}, {DH});
  letheRtGemm(rt, "dW0 = x0^T @ dh0", kGemmUs, weightGradGemm(X0, DH, DW0));
  letheRtGemm(rt, "g0 = dh0 @ W0^T", kGemmUs, inputGradGemm(DH, W0, G0));
  return letheRtGetStatus(rt);
}

LetheRtStatus checksum(LetheRt *rt) { return checksumMlp(rt, G0); }

#if defined(LETHE_NEGATIVE_DROP_WAIT)
constexpr const char *kName = "mlp-offload-drop-wait";
#elif defined(LETHE_NEGATIVE_RELEASE_EARLY)
constexpr const char *kName = "mlp-offload-release-early";
#else
constexpr const char *kName = "mlp-offload";
#endif

} // namespace

extern "C" const LetheRtProgram *letheProgram(void) {
  // Every copy hides behind compute: the plan predicts the unplanned time.
  static const LetheRtProgram program = {LETHE_RT_ABI_VERSION,
                                         kName,
                                         kDeviceArena,
                                         kHostArena,
                                         kNumEvents,
                                         /*worldSize=*/0,
                                         kUnplannedUs,
                                         kDeviceArena,
                                         init,
                                         step,
                                         checksum};
  return &program;
}

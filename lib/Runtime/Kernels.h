//===- Kernels.h - The runtime's device kernels (internal) ------*- C++ -*-===//
//
// Launch wrappers for the kernels in Kernels.cu. Plain host C++ can include
// this (only the CUDA runtime API's types appear); Kernels.cu is the one
// file nvcc compiles.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_RUNTIME_KERNELS_H
#define LETHE_LIB_RUNTIME_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace lethe::rt {

/// A byte range of device memory. Kernels read and write it with 16-byte
/// accesses, so ptr must be 16-byte aligned; any length works.
struct Span {
  unsigned char *ptr;
  uint64_t bytes;
};

/// Inputs plus outputs of one kernel launch, passed by value as a kernel
/// parameter (1 KiB).
constexpr int kMaxKernelBuffers = 64;

/// Reads every input byte, writes every output byte with finite values in
/// f32, f16 and bf16 alike, and spins until `spinCycles` SM cycles have
/// passed since each block started. `sink` (8 bytes of scratch) keeps the
/// reads alive.
cudaError_t launchReplay(const Span *inputs, int numInputs, const Span *outputs,
                         int numOutputs, uint64_t spinCycles, int numSMs,
                         uint64_t *sink, cudaStream_t stream);

/// Checksum mode's kernel: digests every input into `sums`
/// (kMaxKernelBuffers words of scratch), then writes every output word as a
/// function of the digests (Hash.h) and spins like launchReplay.
cudaError_t launchHashOp(const Span *inputs, int numInputs, const Span *outputs,
                         int numOutputs, uint64_t spinCycles, int numSMs,
                         uint64_t *sums, cudaStream_t stream);

/// Writes digest(buf) (Hash.h) to *slot.
cudaError_t launchDigest(Span buf, uint64_t *slot, int numSMs,
                         cudaStream_t stream);

/// Fills buf with values of dtype (LetheRtDType) drawn from seed and the
/// element index: magnitudes in [1/16, 1), random signs.
cudaError_t launchFill(Span buf, int dtype, uint64_t seed, int numSMs,
                       cudaStream_t stream);

/// One thread polls *flag until it is 0: `stream` waits for every open
/// collective window (the copy-yield fallback without stream memory ops).
cudaError_t launchWaitFlagZero(const uint32_t *flag, cudaStream_t stream);

/// Measures the SM clock against %globaltimer with a spin of `cycles`
/// cycles on one thread; synchronous. out: SM cycles per microsecond.
cudaError_t measureClockRate(uint64_t cycles, cudaStream_t stream,
                             double *cyclesPerUs);

// lethe-calibrate's kernels.

/// One thread that does nothing: the smallest kernel.
cudaError_t launchEmpty(cudaStream_t stream);

/// Holds `stream` until the host sets *gate (pinned, mapped host memory) to
/// non-zero, or `timeoutNs` pass; a timeout sets *timedOut to 1.
cudaError_t launchGate(const uint32_t *gate, uint32_t *timedOut,
                       uint64_t timeoutNs, cudaStream_t stream);

/// Fills buf for GEMMs of types the runtime has no fill for: kind 0 writes
/// bytes that are finite e4m3 floats and small int8s (|x| < 64), kind 1
/// f64 values in [-1, 1).
cudaError_t launchFillBytes(Span buf, int kind, uint64_t seed, int numSMs,
                            cudaStream_t stream);

} // namespace lethe::rt

#endif // LETHE_LIB_RUNTIME_KERNELS_H

//===- Kernels.cu - Replay, checksum, fill and clock kernels
//---------------===//
//
// The only CUDA C++ in the runtime. Replay kernels stand in for every op
// that has no real kernel here: they move the op's bytes (every input byte
// read, every output byte written, 16 bytes per access) and take the op's
// time, measured by one thread spinning on the SM clock; the other blocks
// only move bytes, so a grid larger than the GPU holds does not multiply the
// spin. Checksum mode swaps them for kernels whose outputs hash the inputs'
// contents (Hash.h), read at the op's start and written at its end.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "lethe-c/Runtime.h"
#include "lethe/Runtime/Hash.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

namespace lethe::rt {
namespace {

constexpr int kThreads = 256;

struct SpanList {
  Span spans[kMaxKernelBuffers];
  int numInputs;
  int numOutputs;
};

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void spinFrom(uint64_t start, uint64_t cycles) {
  while ((uint64_t)clock64() - start < cycles) {
  }
}

/// A 32-bit word that is finite read as one f32 or as two f16 / bf16
/// halves: each half is 0x3C00 with 10 varied low bits and a varied sign
/// (f16 in [1, 2), bf16 and f32 exponents in [-7, 0]). Never all zeros, so
/// GEMMs downstream of replays run on realistic data.
__device__ __forceinline__ uint32_t finiteWord(uint64_t index) {
  uint32_t x = (uint32_t)((index * kGolden) >> 32);
  return 0x3C003C00u | (x & 0x83FF83FFu);
}

__global__ void __launch_bounds__(kThreads)
    replayKernel(SpanList list, uint64_t spinCycles, uint64_t *sink) {
  uint64_t start = clock64();
  uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint32_t acc = 0;
  for (int s = 0; s < list.numInputs; ++s) {
    const unsigned char *p = list.spans[s].ptr;
    uint64_t bytes = list.spans[s].bytes;
    uint64_t chunks = bytes / 16;
    const uint4 *v = reinterpret_cast<const uint4 *>(p);
#pragma unroll 4
    for (uint64_t i = tid; i < chunks; i += stride) {
      uint4 x = v[i];
      acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    for (uint64_t i = chunks * 16 + tid; i < bytes; i += stride)
      acc ^= p[i];
  }
  for (int o = 0; o < list.numOutputs; ++o) {
    const Span out = list.spans[list.numInputs + o];
    uint64_t chunks = out.bytes / 16;
    uint4 *v = reinterpret_cast<uint4 *>(out.ptr);
#pragma unroll 4
    for (uint64_t i = tid; i < chunks; i += stride)
      v[i] = make_uint4(finiteWord(4 * i), finiteWord(4 * i + 1),
                        finiteWord(4 * i + 2), finiteWord(4 * i + 3));
    for (uint64_t i = chunks * 16 + tid; i < out.bytes; i += stride)
      out.ptr[i] = (unsigned char)(finiteWord(i / 4) >> (8 * (i % 4)));
  }
  // Keeps the loads: the compiler cannot prove this never happens.
  if (acc == 0x5bd1e995u)
    *sink = acc;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    spinFrom(start, spinCycles);
}

__device__ uint64_t blockSum(uint64_t value) {
  __shared__ uint64_t warpSums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    warpSums[warp] = value;
  __syncthreads();
  uint64_t total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < (int)(blockDim.x / 32); ++w)
      total += warpSums[w];
  return total; // valid in thread 0
}

/// blockIdx.y picks the span; sums[y] += the span's word terms.
__global__ void __launch_bounds__(kThreads)
    digestKernel(SpanList list, uint64_t *sums) {
  const Span in = list.spans[blockIdx.y];
  uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint64_t words = in.bytes / 8;
  const uint64_t *w = reinterpret_cast<const uint64_t *>(in.ptr);
  uint64_t local = 0;
  for (uint64_t i = tid; i < words; i += stride)
    local += wordTerm(w[i], i);
  if (tid == 0 && (in.bytes % 8) != 0) {
    uint64_t last = 0;
    for (uint64_t b = 0; words * 8 + b < in.bytes; ++b)
      last |= (uint64_t)in.ptr[words * 8 + b] << (8 * b);
    local += wordTerm(last, words);
  }
  uint64_t total = blockSum(local);
  if (threadIdx.x == 0)
    atomicAdd(reinterpret_cast<unsigned long long *>(&sums[blockIdx.y]),
              (unsigned long long)total);
}

__global__ void finishDigestKernel(uint64_t *slot, uint64_t bytes) {
  *slot = finishDigest(*slot, bytes);
}

/// Writes every output of a checksum-mode op from its inputs' digests, at
/// the end of the op's time: every block spins first (the grid is small
/// enough to be resident at once), so a reader that does not wait for the
/// producer sees the old contents. (The digests read the inputs at the
/// start, so a producer that does not wait for an input's writer is caught
/// too.)
__global__ void __launch_bounds__(kThreads)
    hashWriteKernel(SpanList list, const uint64_t *sums, uint64_t spinCycles) {
  uint64_t start = clock64();
  if (threadIdx.x == 0)
    spinFrom(start, spinCycles);
  __syncthreads();
  uint64_t seed = seedStart((uint32_t)list.numInputs);
  for (int j = 0; j < list.numInputs; ++j)
    seed = foldDigest(seed, finishDigest(sums[j], list.spans[j].bytes));
  uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (int o = 0; o < list.numOutputs; ++o) {
    const Span out = list.spans[list.numInputs + o];
    uint64_t oseed = outputSeed(seed, (uint32_t)o);
    uint64_t words = out.bytes / 8;
    uint64_t *w = reinterpret_cast<uint64_t *>(out.ptr);
    for (uint64_t i = tid; i < words; i += stride)
      w[i] = outputWord(oseed, i);
    if (tid == 0 && (out.bytes % 8) != 0) {
      uint64_t last = outputWord(oseed, words);
      for (uint64_t b = 0; words * 8 + b < out.bytes; ++b)
        out.ptr[words * 8 + b] = (unsigned char)(last >> (8 * b));
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    fillKernel(unsigned char *p, uint64_t bytes, int dtype, uint64_t seed) {
  uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint64_t eltSize = dtype == LETHE_DTYPE_F32 ? 4
                     : dtype == LETHE_DTYPE_F16 || dtype == LETHE_DTYPE_BF16
                         ? 2
                         : 8;
  uint64_t n = bytes / eltSize;
  for (uint64_t i = tid; i < n; i += stride) {
    uint64_t u = outputWord(seed, i);
    float mag = 0.0625f + 0.9375f * (float)(u >> 40) * 0x1p-24f;
    float v = (u & 1) ? -mag : mag;
    switch (dtype) {
    case LETHE_DTYPE_F32:
      reinterpret_cast<float *>(p)[i] = v;
      break;
    case LETHE_DTYPE_F16:
      reinterpret_cast<__half *>(p)[i] = __float2half_rn(v);
      break;
    case LETHE_DTYPE_BF16:
      reinterpret_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
      break;
    default:
      reinterpret_cast<uint64_t *>(p)[i] = u;
      break;
    }
  }
  if (tid == 0)
    for (uint64_t b = n * eltSize; b < bytes; ++b)
      p[b] = (unsigned char)outputWord(seed ^ kGolden, b);
}

__global__ void clockProbeKernel(uint64_t cycles, uint64_t *out) {
  uint64_t g0 = globalTimerNs();
  uint64_t c0 = clock64();
  uint64_t c1;
  do {
    c1 = clock64();
  } while (c1 - c0 < cycles);
  uint64_t g1 = globalTimerNs();
  out[0] = c1 - c0;
  out[1] = g1 - g0;
}

/// Enough 256-thread blocks to keep every SM streaming, fewer for small
/// buffers (each thread moves about four 16-byte chunks).
int gridFor(uint64_t bytes, int numSMs) {
  uint64_t perBlock = (uint64_t)kThreads * 16 * 4;
  uint64_t blocks = (bytes + perBlock - 1) / perBlock;
  uint64_t cap = (uint64_t)std::max(numSMs, 1) * 8;
  return (int)std::max<uint64_t>(1, std::min(blocks, cap));
}

SpanList makeList(const Span *inputs, int numInputs, const Span *outputs,
                  int numOutputs, uint64_t *totalBytes) {
  SpanList list{};
  list.numInputs = numInputs;
  list.numOutputs = numOutputs;
  uint64_t total = 0;
  for (int i = 0; i < numInputs; ++i) {
    list.spans[i] = inputs[i];
    total += inputs[i].bytes;
  }
  for (int o = 0; o < numOutputs; ++o) {
    list.spans[numInputs + o] = outputs[o];
    total += outputs[o].bytes;
  }
  *totalBytes = total;
  return list;
}

/// Holds its stream until *flag is 0 (the copy-yield fallback where stream
/// memory operations are missing). Volatile loads see the comm stream's
/// writes; the sleep keeps the poll off the memory system.
__global__ void waitFlagZeroKernel(const volatile uint32_t *flag) {
  while (*flag != 0)
    __nanosleep(500);
}

__global__ void emptyKernel() {}

/// Polls a word of host memory with system-scope acquire loads, so the
/// host's store is seen without any cache in the way.
__global__ void gateKernel(const uint32_t *gate, uint32_t *timedOut,
                           uint64_t timeoutNs) {
  uint64_t start = globalTimerNs();
  while (true) {
    uint32_t open;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];"
                 : "=r"(open)
                 : "l"(gate)
                 : "memory");
    if (open)
      return;
    if (globalTimerNs() - start > timeoutNs) {
      *(volatile uint32_t *)timedOut = 1;
      return;
    }
    __nanosleep(200);
  }
}

__global__ void __launch_bounds__(kThreads)
    fillBytesKernel(unsigned char *p, uint64_t bytes, int kind, uint64_t seed) {
  uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  if (kind == 1) {
    double *d = reinterpret_cast<double *>(p);
    for (uint64_t i = tid; i < bytes / 8; i += stride)
      d[i] = (double)(int64_t)(mix64(seed ^ i) >> 11) / 4503599627370496.0 - 1;
    return;
  }
  for (uint64_t i = tid; i < bytes; i += stride) {
    uint64_t x = mix64(seed ^ i);
    // Sign bit and six low bits: e4m3 below 2 (never NaN), int8 in (-64, 64).
    p[i] = (unsigned char)((x & 0x3F) | ((x >> 8) & 0x80));
  }
}

} // namespace

cudaError_t launchEmpty(cudaStream_t stream) {
  emptyKernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launchGate(const uint32_t *gate, uint32_t *timedOut,
                       uint64_t timeoutNs, cudaStream_t stream) {
  gateKernel<<<1, 1, 0, stream>>>(gate, timedOut, timeoutNs);
  return cudaGetLastError();
}

cudaError_t launchFillBytes(Span buf, int kind, uint64_t seed, int numSMs,
                            cudaStream_t stream) {
  fillBytesKernel<<<gridFor(buf.bytes, numSMs), kThreads, 0, stream>>>(
      buf.ptr, buf.bytes, kind, mix64(seed));
  return cudaGetLastError();
}

cudaError_t launchWaitFlagZero(const uint32_t *flag, cudaStream_t stream) {
  waitFlagZeroKernel<<<1, 1, 0, stream>>>(flag);
  return cudaGetLastError();
}

cudaError_t launchReplay(const Span *inputs, int numInputs, const Span *outputs,
                         int numOutputs, uint64_t spinCycles, int numSMs,
                         uint64_t *sink, cudaStream_t stream) {
  if (numInputs + numOutputs > kMaxKernelBuffers)
    return cudaErrorInvalidValue;
  uint64_t total;
  SpanList list = makeList(inputs, numInputs, outputs, numOutputs, &total);
  replayKernel<<<gridFor(total, numSMs), kThreads, 0, stream>>>(
      list, spinCycles, sink);
  return cudaGetLastError();
}

cudaError_t launchHashOp(const Span *inputs, int numInputs, const Span *outputs,
                         int numOutputs, uint64_t spinCycles, int numSMs,
                         uint64_t *sums, cudaStream_t stream) {
  if (numInputs + numOutputs > kMaxKernelBuffers)
    return cudaErrorInvalidValue;
  uint64_t total;
  SpanList list = makeList(inputs, numInputs, outputs, numOutputs, &total);
  if (numInputs > 0) {
    cudaError_t err =
        cudaMemsetAsync(sums, 0, sizeof(uint64_t) * numInputs, stream);
    if (err != cudaSuccess)
      return err;
    uint64_t largest = 0;
    for (int i = 0; i < numInputs; ++i)
      largest = std::max(largest, inputs[i].bytes);
    dim3 grid(gridFor(largest, numSMs), numInputs);
    digestKernel<<<grid, kThreads, 0, stream>>>(list, sums);
    if ((err = cudaGetLastError()) != cudaSuccess)
      return err;
  }
  hashWriteKernel<<<gridFor(total, numSMs), kThreads, 0, stream>>>(list, sums,
                                                                   spinCycles);
  return cudaGetLastError();
}

cudaError_t launchDigest(Span buf, uint64_t *slot, int numSMs,
                         cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(slot, 0, sizeof(uint64_t), stream);
  if (err != cudaSuccess)
    return err;
  uint64_t total;
  SpanList list = makeList(&buf, 1, nullptr, 0, &total);
  digestKernel<<<dim3(gridFor(total, numSMs), 1), kThreads, 0, stream>>>(list,
                                                                         slot);
  if ((err = cudaGetLastError()) != cudaSuccess)
    return err;
  finishDigestKernel<<<1, 1, 0, stream>>>(slot, buf.bytes);
  return cudaGetLastError();
}

cudaError_t launchFill(Span buf, int dtype, uint64_t seed, int numSMs,
                       cudaStream_t stream) {
  fillKernel<<<gridFor(buf.bytes, numSMs), kThreads, 0, stream>>>(
      buf.ptr, buf.bytes, dtype, mix64(seed ^ (0x51ed27ULL * (dtype + 1))));
  return cudaGetLastError();
}

cudaError_t measureClockRate(uint64_t cycles, cudaStream_t stream,
                             double *cyclesPerUs) {
  uint64_t *deviceOut = nullptr;
  cudaError_t err = cudaMalloc(&deviceOut, 2 * sizeof(uint64_t));
  if (err != cudaSuccess)
    return err;
  // One long spin lets the clocks ramp up from idle; then the median of
  // three measured spins.
  double rates[3];
  for (int i = -1; i < 3 && err == cudaSuccess; ++i) {
    clockProbeKernel<<<1, 1, 0, stream>>>(i < 0 ? 10 * cycles : cycles,
                                          deviceOut);
    uint64_t hostOut[2] = {0, 0};
    if ((err = cudaGetLastError()) == cudaSuccess)
      err = cudaMemcpyAsync(hostOut, deviceOut, sizeof(hostOut),
                            cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess)
      err = cudaStreamSynchronize(stream);
    if (err == cudaSuccess && i >= 0)
      rates[i] = hostOut[1] ? (double)hostOut[0] * 1000.0 / hostOut[1] : 0;
  }
  cudaError_t freeErr = cudaFree(deviceOut);
  if (err != cudaSuccess)
    return err;
  std::sort(rates, rates + 3);
  *cyclesPerUs = rates[1];
  return freeErr;
}

} // namespace lethe::rt

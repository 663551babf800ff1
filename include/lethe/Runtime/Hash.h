//===- Hash.h - Checksum-mode hashing, shared by host and device -*- C++
//-*-===//
//
// The functions checksum mode is built from. They are header-only so the
// kernels, the host reference (tests) and the docs agree on one definition:
//
//   digest(buf)  = mix(bytes + sum_i wordTerm(w_i, i))   (sum mod 2^64)
//
// over the little-endian 8-byte words w_i of the buffer, the last one padded
// with zero bytes. The sum is order-free, so the kernels may reduce in any
// order and still give one value; the index in wordTerm keeps it position-
// sensitive. The digest depends on the contents only, not on the offset.
//
// An op's outputs are a function of its inputs' digests:
//   opSeed = fold of digests (in input order), outputSeed(o) = mix(opSeed,o),
//   output word i = mix(outputSeed + i).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_RUNTIME_HASH_H
#define LETHE_RUNTIME_HASH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define LETHE_HD __host__ __device__ __forceinline__
#else
#define LETHE_HD inline
#endif

namespace lethe::rt {

/// splitmix64's finalizer: a bijection on 64-bit words with full avalanche.
LETHE_HD uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

/// One word's contribution to a digest.
LETHE_HD uint64_t wordTerm(uint64_t word, uint64_t index) {
  return mix64(word ^ mix64(index * kGolden + 0x632be59bd9b4e019ULL));
}

/// Closes a digest's sum.
LETHE_HD uint64_t finishDigest(uint64_t sum, uint64_t bytes) {
  return mix64(sum + mix64(bytes ^ 0xd6e8feb86659fd93ULL));
}

/// Folds input j's digest into an op's seed (start: seedStart(numInputs)).
LETHE_HD uint64_t seedStart(uint32_t numInputs) {
  return mix64(0x2545f4914f6cdd1dULL + numInputs);
}
LETHE_HD uint64_t foldDigest(uint64_t seed, uint64_t digest) {
  return mix64(seed * kGolden + digest);
}

/// The seed of output o of an op whose inputs folded to `seed`.
LETHE_HD uint64_t outputSeed(uint64_t seed, uint32_t output) {
  return mix64(seed ^ ((uint64_t)(output + 1) * 0xff51afd7ed558ccdULL));
}

/// Word i of an output (or of a fill) with the given seed.
LETHE_HD uint64_t outputWord(uint64_t seed, uint64_t index) {
  return mix64(seed + index * kGolden);
}

/// Host reference digest of `bytes` bytes at `data` (tests compare the
/// device's digests against this).
inline uint64_t hostDigest(const void *data, uint64_t bytes) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  uint64_t sum = 0;
  uint64_t words = (bytes + 7) / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w = 0;
    for (uint64_t b = 0; b < 8 && i * 8 + b < bytes; ++b)
      w |= (uint64_t)p[i * 8 + b] << (8 * b);
    sum += wordTerm(w, i);
  }
  return finishDigest(sum, bytes);
}

} // namespace lethe::rt

#endif // LETHE_RUNTIME_HASH_H

//===- Limits.h - The ranges Lethe accepts for times and sizes --*- C++ -*-===//
//
// Every number Lethe reads (an op's time, a tensor's size, a device rate, an
// alignment) is checked against these bounds where it is parsed, so that
// every sum and product the planner, the simulator and the reports form
// from them stays finite and inside int64: no check is needed where they are
// summed. The bounds are far beyond any real training step.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SUPPORT_LIMITS_H
#define LETHE_SUPPORT_LIMITS_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace lethe {

/// The longest time one op may take, microseconds (about 11.6 days). With
/// fewer than 2^40 ops, any sum of op times stays below 1.2e24 us.
constexpr double kMaxTimeUs = 1e12;

/// The most bytes all tensors of a graph may total (4 EiB): any sum of live
/// tensors, plus a budget or an alignment padding, stays inside int64.
constexpr int64_t kMaxGraphBytes = int64_t(1) << 62;

/// The largest arena alignment, bytes (4 GiB).
constexpr int64_t kMaxAlignment = int64_t(1) << 32;

/// Whether `alignment` is a power of two no larger than kMaxAlignment.
constexpr bool isValidAlignment(int64_t alignment) {
  return alignment >= 1 && alignment <= kMaxAlignment &&
         (alignment & (alignment - 1)) == 0;
}

/// `value` as "%g" prints it (1e+12, 0.5): numbers in error messages.
inline std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

} // namespace lethe

#endif // LETHE_SUPPORT_LIMITS_H

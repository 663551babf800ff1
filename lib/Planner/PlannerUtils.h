//===- PlannerUtils.h - Small helpers shared by the planner -----*- C++ -*-===//

#ifndef LETHE_LIB_PLANNER_PLANNERUTILS_H
#define LETHE_LIB_PLANNER_PLANNERUTILS_H

#include "llvm/Support/FormatVariadic.h"

#include <cstdint>
#include <string>

namespace lethe::planner {

/// "1.50 MiB", "512 B": sizes in remarks and reasons.
inline std::string humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  unsigned unit = 0;
  while ((value >= 1024.0 || value <= -1024.0) && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0)
    return llvm::formatv("{0} B", bytes).str();
  return llvm::formatv("{0:F2} {1}", value, units[unit]).str();
}

/// "12.5 us" with two decimals at most.
inline std::string humanUs(double us) {
  if (us >= 1000.0)
    return llvm::formatv("{0:F2} ms", us / 1000.0).str();
  return llvm::formatv("{0:F2} us", us).str();
}

} // namespace lethe::planner

#endif // LETHE_LIB_PLANNER_PLANNERUTILS_H

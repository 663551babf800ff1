//===- Bytes.cpp - Byte counts as people write them -----------------------===//

#include "lethe/Support/Bytes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <cstdlib>
#include <string>

using namespace llvm;

/// Byte counts past this do not fit int64 (2^63 is exact in a double).
static constexpr double kMaxByteCount = 9223372036854775808.0;

Expected<int64_t> lethe::parseByteCount(StringRef text,
                                        std::optional<int64_t> percentOf) {
  StringRef trimmed = text.trim();
  auto fail = [&](const Twine &why) {
    return createStringError(inconvertibleErrorCode(),
                             "invalid byte count '" + text + "': " + why);
  };
  size_t numberEnd = 0;
  while (numberEnd < trimmed.size() &&
         (isDigit(trimmed[numberEnd]) || trimmed[numberEnd] == '.'))
    ++numberEnd;
  StringRef number = trimmed.take_front(numberEnd);
  StringRef unit = trimmed.drop_front(numberEnd).trim();
  if (number.empty())
    return fail("expected a number");
  std::string numberText = number.str();
  char *end = nullptr;
  double value = std::strtod(numberText.c_str(), &end);
  if (end != numberText.c_str() + numberText.size() || !std::isfinite(value))
    return fail("expected a number");

  if (unit == "%") {
    if (!percentOf)
      return fail("a percentage needs a reference size");
    // Nudged so that decimal percentages land on the byte they name.
    double bytes =
        std::floor(value * static_cast<double>(*percentOf) / 100.0 + 1e-6);
    if (!(bytes < kMaxByteCount))
      return fail("too large");
    return static_cast<int64_t>(bytes);
  }
  std::string lower = unit.lower();
  double scale = StringSwitch<double>(lower)
                     .Cases({"", "b"}, 1.0)
                     .Case("kib", 1024.0)
                     .Case("mib", 1024.0 * 1024)
                     .Case("gib", 1024.0 * 1024 * 1024)
                     .Case("tib", 1024.0 * 1024 * 1024 * 1024)
                     .Case("kb", 1e3)
                     .Case("mb", 1e6)
                     .Case("gb", 1e9)
                     .Case("tb", 1e12)
                     .Default(-1.0);
  if (scale < 0)
    return fail("unknown unit '" + unit +
                "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB or %)");
  double bytes = value * scale;
  if (!(bytes < kMaxByteCount))
    return fail("too large");
  return static_cast<int64_t>(std::floor(bytes));
}

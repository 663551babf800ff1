//===- DeviceProfile.cpp - Device profiles from JSON ----------------------===//

#include "lethe/Support/DeviceProfile.h"
#include "lethe/Support/Files.h"
#include "lethe/Support/Limits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace llvm;
using namespace lethe;

namespace {

struct BuiltinProfile {
  const char *name;
  const char *json;
};

// devices/*.json, embedded by cmake/EmbedDeviceProfiles.cmake.
#define LETHE_DEVICE_PROFILE(NAME, JSON) {NAME, JSON},
const BuiltinProfile builtinProfiles[] = {
#include "DeviceProfiles.inc"
};
#undef LETHE_DEVICE_PROFILE

/// The largest device profile read (profiles are a few KB; a calibrated one
/// with its collective tables some tens of KB).
constexpr uint64_t kMaxProfileBytes = uint64_t(16) << 20;

enum class Range { Positive, NonNegative, Fraction, AtLeastOne };

/// A numeric field of the file: its key, the member it fills, the factor
/// from the file's unit to SI, whether it must be present, its valid range,
/// and the least (when non-zero) and largest value it may have in the
/// file's unit. The bounds keep every time derived from the profile finite:
/// a rate of 1e-300 GB/s would make copies take forever.
struct NumericField {
  StringLiteral key;
  double DeviceProfile::*member;
  double scale;
  bool required;
  Range range;
  double least;
  double most;
};

/// Rates (GB/s, TFLOP/s) from a millionth of a unit to a billion units.
constexpr double kLeastRate = 1e-6, kMostRate = 1e9;
constexpr double kMostFactor = 1e6;
constexpr double kMostBytes = static_cast<double>(kMaxGraphBytes);

const NumericField numericFields[] = {
    {"hbm_gb_per_s", &DeviceProfile::hbmBytesPerSec, 1e9, true, Range::Positive,
     kLeastRate, kMostRate},
    {"d2h_gb_per_s", &DeviceProfile::d2hBytesPerSec, 1e9, true, Range::Positive,
     kLeastRate, kMostRate},
    {"h2d_gb_per_s", &DeviceProfile::h2dBytesPerSec, 1e9, true, Range::Positive,
     kLeastRate, kMostRate},
    {"duplex_factor", &DeviceProfile::duplexFactor, 1, false, Range::Fraction,
     kLeastRate, 1},
    {"nvlink_gb_per_s", &DeviceProfile::nvlinkBytesPerSec, 1e9, false,
     Range::NonNegative, kLeastRate, kMostRate},
    {"launch_overhead_us", &DeviceProfile::launchOverheadUs, 1, true,
     Range::NonNegative, 0, kMaxTimeUs},
    {"view_us", &DeviceProfile::viewUs, 1, false, Range::NonNegative, 0,
     kMaxTimeUs},
    {"collective_slowdown_with_copies",
     &DeviceProfile::collectiveSlowdownWithCopies, 1, false, Range::AtLeastOne,
     0, kMostFactor},
    {"collective_slowdown_with_both_copies",
     &DeviceProfile::collectiveSlowdownWithBothCopies, 1, false,
     Range::AtLeastOne, 0, kMostFactor},
    {"copy_slowdown_with_collectives",
     &DeviceProfile::copySlowdownWithCollectives, 1, false, Range::Fraction,
     1 / kMostFactor, 1},
    {"d2h_fixed_us", &DeviceProfile::d2hFixedUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"h2d_fixed_us", &DeviceProfile::h2dFixedUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"host_d2h_gb_per_s", &DeviceProfile::hostD2HBytesPerSec, 1e9, false,
     Range::NonNegative,
     0, kMostRate},
    {"host_h2d_gb_per_s", &DeviceProfile::hostH2DBytesPerSec, 1e9, false,
     Range::NonNegative,
     0, kMostRate},
    {"host_both_gb_per_s", &DeviceProfile::hostBothBytesPerSec, 1e9, false,
     Range::NonNegative,
     0, kMostRate},
    {"matmul_slowdown_with_copies", &DeviceProfile::matmulSlowdownWithCopies,
     1, false, Range::AtLeastOne,
     0, kMostFactor},
    {"matmul_slowdown_with_both_copies",
     &DeviceProfile::matmulSlowdownWithBothCopies, 1, false,
     Range::AtLeastOne,
     0, kMostFactor},
    {"memory_bound_slowdown_with_copies",
     &DeviceProfile::memoryBoundSlowdownWithCopies, 1, false,
     Range::AtLeastOne,
     0, kMostFactor},
    {"memory_bound_slowdown_with_both_copies",
     &DeviceProfile::memoryBoundSlowdownWithBothCopies, 1, false,
     Range::AtLeastOne,
     0, kMostFactor},
    {"memory_kernel_gb_per_s", &DeviceProfile::memoryKernelBytesPerSec, 1e9,
     false, Range::NonNegative, kLeastRate, kMostRate},
    {"copy_slowdown_with_matmul", &DeviceProfile::copySlowdownWithMatmul, 1,
     false, Range::Fraction,
     1 / kMostFactor, 1},
    {"copy_slowdown_with_memory_bound",
     &DeviceProfile::copySlowdownWithMemoryBound, 1, false, Range::Fraction,
     1 / kMostFactor, 1},
    {"host_launch_us", &DeviceProfile::hostLaunchUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"graph_kernel_us", &DeviceProfile::graphKernelUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"graph_launch_us", &DeviceProfile::graphLaunchUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"event_record_us", &DeviceProfile::eventRecordUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"wait_us", &DeviceProfile::waitUs, 1, false, Range::NonNegative,
     0, kMaxTimeUs},
    {"graph_wait_us", &DeviceProfile::graphWaitUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"collective_fixed_us", &DeviceProfile::collectiveFixedUs, 1, false,
     Range::NonNegative,
     0, kMaxTimeUs},
    {"device_memory_bytes", &DeviceProfile::deviceMemoryBytes, 1, true,
     Range::Positive, 0, kMostBytes},
    {"host_pinned_bytes", &DeviceProfile::hostMemoryBytes, 1, true,
     Range::NonNegative, 0, kMostBytes},
};

/// "between 1e-06 and 1e+09" or "at most 1e+12".
std::string describeBounds(double least, double most) {
  if (least > 0)
    return "between " + formatNumber(least) + " and " + formatNumber(most);
  return "at most " + formatNumber(most);
}

const StringLiteral dtypeNames[] = {"bf16", "f16", "f32", "tf32",
                                    "f8",   "f64", "i8"};

const StringLiteral opClassNames[] = {"attention", "attention_backward",
                                      "convolution", "convolution_backward",
                                      "unaligned_matmul"};

const StringLiteral otherFields[] = {"name", "description", "peak_tflops",
                                     "kernel_efficiency", "notes"};

StringRef describe(Range range) {
  switch (range) {
  case Range::Positive:
    return "a positive number";
  case Range::NonNegative:
    return "a non-negative number";
  case Range::Fraction:
    return "a number in (0, 1]";
  case Range::AtLeastOne:
    return "a number >= 1";
  }
  llvm_unreachable("unknown range");
}

bool inRange(double value, Range range) {
  if (!std::isfinite(value))
    return false;
  switch (range) {
  case Range::Positive:
    return value > 0;
  case Range::NonNegative:
    return value >= 0;
  case Range::Fraction:
    return value > 0 && value <= 1;
  case Range::AtLeastOne:
    return value >= 1;
  }
  llvm_unreachable("unknown range");
}

std::string allFieldNames() {
  SmallVector<StringRef> names(std::begin(otherFields), std::end(otherFields));
  for (const NumericField &field : numericFields)
    names.push_back(field.key);
  return join(names, ", ");
}

bool isKnownField(StringRef key) {
  return is_contained(otherFields, key) ||
         any_of(numericFields,
                [&](const NumericField &f) { return f.key == key; });
}

/// Builds errors of the form "<source>: field '<key>': <message>".
class ErrorReporter {
public:
  explicit ErrorReporter(StringRef source) : source(source) {}

  Error field(StringRef key, const Twine &message) const {
    return createStringError(inconvertibleErrorCode(), "%s: field '%s': %s",
                             source.str().c_str(), key.str().c_str(),
                             message.str().c_str());
  }
  Error general(const Twine &message) const {
    return createStringError(inconvertibleErrorCode(), "%s: %s",
                             source.str().c_str(), message.str().c_str());
  }

private:
  StringRef source;
};

/// The value as the user wrote it, more or less: numbers in %g rather than
/// JSON's round-trip precision (0.9, not 0.90000000000000002).
std::string printed(const json::Value &value) {
  std::string text;
  raw_string_ostream os(text);
  if (value.kind() == json::Value::Number)
    os << format("%g", *value.getAsNumber());
  else
    os << value;
  return text;
}

Error parsePeakFlops(const json::Value &value, DeviceProfile &profile,
                     const ErrorReporter &report) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return report.field("peak_tflops",
                        "expected an object of TFLOP/s by dtype, got " +
                            printed(value));
  for (const auto &[key, rate] : *object) {
    StringRef dtype = key;
    if (!is_contained(dtypeNames, dtype))
      return report.field(("peak_tflops." + dtype).str(),
                          "unknown dtype (known: " + join(std::begin(dtypeNames), std::end(dtypeNames), ", ") +
                              ")");
    std::optional<double> tflops = rate.getAsNumber();
    if (!tflops || !inRange(*tflops, Range::Positive))
      return report.field(("peak_tflops." + dtype).str(),
                          "expected a positive number, got " + printed(rate));
    if (*tflops < kLeastRate || *tflops > kMostRate)
      return report.field(("peak_tflops." + dtype).str(),
                          "expected a rate " +
                              describeBounds(kLeastRate, kMostRate) + ", got " +
                              printed(rate));
    profile.peakFlops[dtype] = *tflops * 1e12;
  }
  if (!profile.peakFlops.count("f32"))
    return report.field("peak_tflops", "missing required dtype 'f32' (the "
                                       "rate other dtypes fall back to)");
  return Error::success();
}

Error parseKernelEfficiency(const json::Value &value, DeviceProfile &profile,
                            const ErrorReporter &report) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return report.field("kernel_efficiency",
                        "expected an object of fractions by op class, got " +
                            printed(value));
  for (const auto &[key, fraction] : *object) {
    StringRef opClass = key;
    std::string field = ("kernel_efficiency." + opClass).str();
    if (!is_contained(opClassNames, opClass))
      return report.field(field, "unknown op class (known: " +
                                     join(std::begin(opClassNames),
                                          std::end(opClassNames), ", ") +
                                     ")");
    std::optional<double> number = fraction.getAsNumber();
    if (!number || !inRange(*number, Range::Fraction))
      return report.field(field,
                          "expected a number in (0, 1], got " + printed(fraction));
    profile.kernelEfficiency[opClass] = *number;
  }
  return Error::success();
}

Error parseNotes(const json::Value &value, DeviceProfile &profile,
                 const ErrorReporter &report) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return report.field("notes", "expected an object of strings by field "
                                 "name, got " +
                                     printed(value));
  for (const auto &[key, note] : *object) {
    // A note for a field that does not exist is almost always a typo.
    if (!isKnownField(key))
      return report.field(("notes." + StringRef(key)).str(),
                          "names no field of the profile");
    std::optional<StringRef> text = note.getAsString();
    if (!text)
      return report.field(("notes." + StringRef(key)).str(),
                          "expected a string, got " + printed(note));
    profile.notes[key] = text->str();
  }
  return Error::success();
}

} // namespace

double DeviceProfile::efficiencyFor(StringRef opClass) const {
  auto it = kernelEfficiency.find(opClass);
  return it != kernelEfficiency.end() ? it->second : 1.0;
}

double DeviceProfile::flopsFor(StringRef dtype) const {
  auto it = peakFlops.find(dtype);
  if (it != peakFlops.end())
    return it->second;
  return peakFlops.lookup("f32");
}

std::vector<std::string> DeviceProfile::builtinNames() {
  std::vector<std::string> names;
  for (const BuiltinProfile &builtin : builtinProfiles)
    names.push_back(builtin.name);
  llvm::sort(names);
  return names;
}

Expected<DeviceProfile> DeviceProfile::parse(StringRef text,
                                             StringRef source) {
  ErrorReporter report(source);
  Expected<json::Value> root = json::parse(text);
  if (!root)
    return report.general("invalid JSON: " + toString(root.takeError()));
  const json::Object *object = root->getAsObject();
  if (!object)
    return report.general("expected a JSON object at the top level");

  for (const auto &entry : *object)
    if (!isKnownField(entry.first))
      return report.general("unknown field '" + StringRef(entry.first) +
                            "' (known fields: " + allFieldNames() + ")");

  DeviceProfile profile;
  const json::Value *name = object->get("name");
  if (!name)
    return report.general("missing required field 'name'");
  if (!name->getAsString() || name->getAsString()->empty())
    return report.field("name", "expected a non-empty string, got " +
                                    printed(*name));
  profile.name = name->getAsString()->str();

  if (const json::Value *description = object->get("description")) {
    if (!description->getAsString())
      return report.field("description",
                          "expected a string, got " + printed(*description));
    profile.description = description->getAsString()->str();
  }

  const json::Value *peak = object->get("peak_tflops");
  if (!peak)
    return report.general("missing required field 'peak_tflops'");
  if (Error error = parsePeakFlops(*peak, profile, report))
    return std::move(error);

  if (const json::Value *efficiency = object->get("kernel_efficiency"))
    if (Error error = parseKernelEfficiency(*efficiency, profile, report))
      return std::move(error);

  for (const NumericField &field : numericFields) {
    const json::Value *value = object->get(field.key);
    if (!value) {
      if (field.required)
        return report.general("missing required field '" + field.key + "'");
      continue;
    }
    std::optional<double> number = value->getAsNumber();
    if (!number || !inRange(*number, field.range))
      return report.field(field.key, "expected " + describe(field.range) +
                                         ", got " + printed(*value));
    if ((*number != 0 && *number < field.least) || *number > field.most)
      return report.field(field.key,
                          "expected " + describe(field.range) + " " +
                              describeBounds(field.least, field.most) +
                              ", got " + printed(*value));
    profile.*field.member = *number * field.scale;
  }

  if (const json::Value *notes = object->get("notes"))
    if (Error error = parseNotes(*notes, profile, report))
      return std::move(error);
  return profile;
}

Expected<DeviceProfile> DeviceProfile::load(StringRef nameOrPath) {
  for (const BuiltinProfile &builtin : builtinProfiles)
    if (nameOrPath == builtin.name)
      return parse(builtin.json,
                   ("devices/" + nameOrPath + ".json (built in)").str());

  // Every error says which names would have worked.
  std::string known = join(builtinNames(), ", ");
  auto withBuiltinNames = [&](const Twine &message) -> Error {
    return createStringError(inconvertibleErrorCode(),
                             "%s (built-in profiles: %s)",
                             message.str().c_str(), known.c_str());
  };
  // Anything that is not a built-in name and does not look like a path is
  // most likely a misspelt device name.
  if (!nameOrPath.ends_with(".json") && !nameOrPath.contains('/'))
    return withBuiltinNames("unknown device '" + nameOrPath +
                            "': give a built-in profile name or the path of "
                            "a JSON profile");
  // Bounded like every input: `--device /dev/zero` would otherwise be read
  // until memory runs out.
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      readInputFile(nameOrPath, kMaxProfileBytes);
  if (!buffer)
    return withBuiltinNames("device profile " + toString(buffer.takeError()));
  Expected<DeviceProfile> profile = parse((*buffer)->getBuffer(), nameOrPath);
  if (!profile)
    return withBuiltinNames(toString(profile.takeError()));
  return profile;
}

//===- Samples.h - Median, min and max of timing samples --------*- C++ -*-===//
//
// The summary lethe-run and lethe-rt-bench report for repeated timings, and
// its JSON form.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_RUNTIME_SAMPLES_H
#define LETHE_LIB_RUNTIME_SAMPLES_H

#include "Json.h"

#include <algorithm>
#include <string>
#include <vector>

namespace lethe::rt {

struct SampleSummary {
  double median = 0, min = 0, max = 0;
};

inline SampleSummary summarize(std::vector<double> samples) {
  SampleSummary s;
  if (samples.empty())
    return s;
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

/// `name: {median, min, max[, n]}`; `count` < 0 leaves out `n`.
inline void writeSummary(JsonWriter &json, const std::string &name,
                         const SampleSummary &s, int count = -1) {
  json.key(name).beginObject();
  json.field("median", s.median);
  json.field("min", s.min);
  json.field("max", s.max);
  if (count >= 0)
    json.field("n", count);
  json.endObject();
}

} // namespace lethe::rt

#endif // LETHE_LIB_RUNTIME_SAMPLES_H

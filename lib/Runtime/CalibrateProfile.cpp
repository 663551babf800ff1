//===- CalibrateProfile.cpp - lethe-calibrate: samples to a profile -------===//
//
// The part of lethe-calibrate that needs no GPU: fitting copy and
// collective times over sizes, deriving the profile's fields (clamped into
// the ranges the loader accepts, each with a note saying how it was
// measured), carrying a base profile's unmeasured fields over (read by
// CalibrateBase.cpp), and writing the profile as JSON.
//
//===----------------------------------------------------------------------===//

#include "lethe/Runtime/Calibrate.h"

#include "Json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

using namespace lethe::rt;
using namespace lethe::rt::calibrate;

//===----------------------------------------------------------------------===//
// Fits
//===----------------------------------------------------------------------===//

RateFit calibrate::fitRate(const std::vector<Sample> &samples) {
  RateFit fit;
  // Weighted least squares of us = a + b * bytes with weights 1 / us^2: the
  // relative error, so that a 64 KiB copy's fixed cost counts as much as a
  // 1 GiB copy's bandwidth.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (const Sample &s : samples) {
    if (!(s.us > 0) || !(s.bytes > 0))
      continue;
    double w = 1.0 / (s.us * s.us);
    sw += w;
    sx += w * s.bytes;
    sy += w * s.us;
    sxx += w * s.bytes * s.bytes;
    sxy += w * s.bytes * s.us;
    ++n;
  }
  if (n == 0)
    return fit;
  double a = 0, b = 0;
  double det = sw * sxx - sx * sx;
  if (n >= 2 && det > 0) {
    b = (sw * sxy - sx * sy) / det;
    a = (sy - b * sx) / sw;
  }
  // A negative fixed cost is noise: fit the slope alone through the origin.
  if (n < 2 || !(det > 0) || a < 0) {
    a = 0;
    b = sxy / sxx;
  }
  if (!(b > 0) || !std::isfinite(b))
    return fit;
  fit.fixedUs = a;
  fit.bytesPerSec = 1e6 / b;
  for (const Sample &s : samples)
    if (s.us > 0 && s.bytes > 0)
      fit.maxRelError =
          std::max(fit.maxRelError, std::fabs((a + b * s.bytes) / s.us - 1));
  fit.valid = true;
  return fit;
}

double calibrate::busBytes(const CollectivePoint &p) {
  if (p.ranks < 2)
    return 0;
  double ring = (double)(p.ranks - 1) / p.ranks * (double)p.fullBytes;
  return p.kind == "all_reduce" ? 2 * ring : ring;
}

int calibrate::itemsPerRound(double wanted, int opsEach) {
  int most = std::max(1, (kMaxOpsPerStream - kGateOps) / std::max(1, opsEach));
  if (!(wanted >= 1)) // also NaN
    return 1;
  return (int)std::min<double>(most, std::ceil(wanted));
}

int calibrate::busiestStreamOps(
    const std::vector<std::pair<uint64_t, int>> &lanes) {
  std::map<uint64_t, int> perStream;
  int most = 0;
  for (const auto &[stream, ops] : lanes)
    most = std::max(most, perStream[stream] += ops);
  return most + kGateOps;
}

std::vector<size_t> calibrate::timingOrigins(const std::vector<int> &devices) {
  std::vector<size_t> origin(devices.size());
  for (size_t j = 0; j < devices.size(); ++j)
    origin[j] =
        std::find(devices.begin(), devices.end(), devices[j]) - devices.begin();
  return origin;
}

std::vector<size_t> calibrate::interleavedOrder(size_t sets, int round) {
  std::vector<size_t> order(sets);
  for (size_t k = 0; k < sets; ++k)
    order[k] = (k + (size_t)std::max(round, 0)) % sets;
  return order;
}

//===----------------------------------------------------------------------===//
// Deriving the profile
//===----------------------------------------------------------------------===//

std::string calibrate::slug(const std::string &deviceName) {
  std::string out;
  for (char c : deviceName) {
    if (std::isalnum((unsigned char)c))
      out += (char)std::tolower((unsigned char)c);
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-')
    out.pop_back();
  return out.empty() ? "gpu" : out;
}

namespace {

/// `value` with at most `decimals` decimals, trailing zeros dropped.
std::string num(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0')
      s.pop_back();
    if (s.back() == '.')
      s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

std::string sizeName(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0)
    return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }
double gbps(uint64_t bytes, double us) { return us > 0 ? bytes / us / 1e3 : 0; }

/// A factor that only slows down (>= 1), and one that only cuts bandwidth
/// ((0, 1]): a measurement on the other side of 1 is noise.
double atLeastOne(double x) { return std::max(1.0, x); }
double fraction(double x) { return std::min(1.0, std::max(1e-3, x)); }

class Deriver {
public:
  Deriver(const Measurements &m, const BaseProfile *base) : m(m), base(base) {
    stamp = "lethe-calibrate, " + m.device + ", " + m.date +
            (m.quick ? " (--quick)" : "");
  }

  /// A measured field.
  void add(const std::string &key, const std::string &json,
           const std::string &note) {
    ProfileField f;
    f.key = key;
    f.json = json;
    f.noteJson = JsonWriter::quote(note + "; " + stamp);
    fields.push_back(std::move(f));
  }

  /// The base profile's field, if it has one.
  void carry(const std::string &key) {
    const std::string *raw = base ? base->fields.get(key) : nullptr;
    if (!raw)
      return;
    ProfileField f;
    f.key = key;
    f.json = *raw;
    f.noteJson = carriedNote(key);
    fields.push_back(std::move(f));
  }

  /// "from BASE: <its note>" (or "not measured here; from BASE").
  std::string carriedNote(const std::string &key) const {
    std::string prefix = "not measured by lethe-calibrate; from " + base->path;
    const std::string *note = base->notes.get(key);
    if (!note || note->size() < 2 || (*note)[0] != '"')
      return JsonWriter::quote(prefix);
    std::string quoted = JsonWriter::quote(prefix + ": ");
    return quoted.substr(0, quoted.size() - 1) + note->substr(1);
  }

  bool measuredAny(const char *const *keys) const {
    for (; *keys; ++keys)
      for (const ProfileField &f : fields)
        if (f.key == *keys)
          return true;
    return false;
  }

  const Measurements &m;
  const BaseProfile *base;
  std::string stamp;
  std::vector<ProfileField> fields;
};

const char *const kDtypeOrder[] = {"bf16", "f16", "f8", "i8",
                                   "tf32", "f32", "f64"};
const char *const kEfficiencyOrder[] = {"attention", "attention_backward",
                                        "convolution", "convolution_backward",
                                        "unaligned_matmul"};

void derivePeaks(Deriver &d) {
  const Measurements &m = d.m;
  ProfileField f;
  f.key = "peak_tflops";
  std::vector<std::string> carried;
  std::vector<std::string> seen;
  auto fromBase = [&](const std::string &dtype) {
    const std::string *raw = d.base ? d.base->peakTflops.get(dtype) : nullptr;
    if (raw) {
      f.members.emplace_back(dtype, *raw);
      carried.push_back(dtype);
    }
  };
  for (const char *dtype : kDtypeOrder) {
    seen.push_back(dtype);
    auto it = m.peakFlops.find(dtype);
    if (it != m.peakFlops.end() && it->second > 0)
      f.members.emplace_back(dtype, num(it->second / 1e12, 1));
    else
      fromBase(dtype);
  }
  if (d.base)
    for (const auto &[dtype, raw] : d.base->peakTflops.members)
      if (std::find(seen.begin(), seen.end(), dtype) == seen.end())
        fromBase(dtype);
  std::string note = "dense matrix product through cuBLASLt on random data, "
                     "median after 3 warm-ups: 8192^3 (f64 4096^3); f8 = "
                     "e4m3 inputs, bf16 output; i8 = int32 output; tf32 = "
                     "f32 with TF32 compute";
  for (const auto &[dtype, why] : m.skippedDtypes)
    note += "; " + dtype + " not measured (" + why + ")";
  if (!carried.empty()) {
    note += "; from " + d.base->path + ":";
    for (const std::string &c : carried)
      note += " " + c;
  }
  f.noteJson = JsonWriter::quote(note + "; " + d.stamp);
  d.fields.push_back(std::move(f));
}

void deriveEfficiency(Deriver &d) {
  const Measurements &m = d.m;
  ProfileField f;
  f.key = "kernel_efficiency";
  double unaligned = 0;
  for (double x : m.unalignedFractions)
    unaligned += x / m.unalignedFractions.size();
  std::vector<std::string> carried;
  for (const char *cls : kEfficiencyOrder) {
    if (std::string(cls) == "unaligned_matmul" && unaligned > 0) {
      f.members.emplace_back(cls, num(fraction(unaligned), 2));
      continue;
    }
    const std::string *raw =
        d.base ? d.base->kernelEfficiency.get(cls) : nullptr;
    if (raw) {
      f.members.emplace_back(cls, *raw);
      carried.push_back(cls);
    }
  }
  if (f.members.empty())
    return;
  std::string note;
  if (unaligned > 0) {
    note = "unaligned_matmul = bf16 8192x4096x4095 and 8192x4095x4096 "
           "through cuBLASLt (row-major, the odd dimension a leading "
           "dimension) as fractions of the bf16 peak:";
    for (double x : m.unalignedFractions)
      note += " " + num(x, 3);
  } else {
    note = "unaligned_matmul not measured";
  }
  if (!carried.empty()) {
    note += "; not measured here (cuDNN / attention kernels), from " +
            d.base->path + ":";
    for (const std::string &c : carried)
      note += " " + c;
  }
  f.noteJson = JsonWriter::quote(note + "; " + d.stamp);
  d.fields.push_back(std::move(f));
}

void deriveCopies(Deriver &d) {
  const Measurements &m = d.m;
  if (m.copies.empty())
    return;
  std::vector<Sample> d2h, h2d;
  for (const CopyPoint &p : m.copies) {
    d2h.push_back({(double)p.bytes, p.d2hUs});
    h2d.push_back({(double)p.bytes, p.h2dUs});
  }
  RateFit fd = fitRate(d2h), fh = fitRate(h2d);
  const CopyPoint &big = m.copies.back();
  std::string sizes =
      sizeName(m.copies.front().bytes) + " to " + sizeName(big.bytes);
  auto fitNote = [&](const char *dir, const RateFit &fit, double bigUs) {
    return std::string("pinned memory, one GPU, ") + dir +
           " alone: per-copy time of " + sizes +
           " copies back to back on their stream fitted as " +
           num(fit.fixedUs, 2) + " us + bytes / " +
           num(fit.bytesPerSec / 1e9, 1) + " GB/s (largest error " +
           num(100 * fit.maxRelError, 1) + "%); " + sizeName(big.bytes) +
           " copies alone: " + num(gbps(big.bytes, bigUs), 1) + " GB/s";
  };
  if (fd.valid)
    d.add("d2h_gb_per_s", num(fd.bytesPerSec / 1e9, 1),
          fitNote("D2H", fd, big.d2hUs));
  if (fh.valid)
    d.add("h2d_gb_per_s", num(fh.bytesPerSec / 1e9, 1),
          fitNote("H2D", fh, big.h2dUs));
  double dx = ratio(big.d2hUs, big.d2hBothUs),
         hx = ratio(big.h2dUs, big.h2dBothUs);
  if (dx > 0 && hx > 0)
    d.add("duplex_factor", num(fraction(std::min(dx, hx)), 2),
          "both directions at once, " + sizeName(big.bytes) + " copies: D2H " +
              num(gbps(big.bytes, big.d2hBothUs), 1) + " + H2D " +
              num(gbps(big.bytes, big.h2dBothUs), 1) + " GB/s, " + num(dx, 3) +
              " and " + num(hx, 3) + " of the lone figures; the lower kept");
}

/// matmul_slowdown_* from the mixed loop: the GEMMs' part of its slowdown
/// beside one direction (the mean of D2H and H2D) and both.
void mixedGemm(Deriver &d) {
  const Measurements &m = d.m;
  const KernelContention &x = m.mixed, &mb = m.memoryBound, &g = m.matmul;
  double share = m.mixedGemmShare;
  double d2h = gemmSlowdownInMix(x.slowdownBesideD2H(), mb.slowdownBesideD2H(),
                                 share);
  double h2d = gemmSlowdownInMix(x.slowdownBesideH2D(), mb.slowdownBesideH2D(),
                                 share);
  double both = gemmSlowdownInMix(x.slowdownBesideBoth(),
                                  mb.slowdownBesideBoth(), share);
  std::string how =
      "bf16 8192^3 GEMMs (cuBLASLt) each followed by " +
      std::to_string(m.mixedMemoryPerGemm) +
      " memory-bound replays in one loop (GEMMs " + num(share, 2) +
      " of its " + num(x.aloneMs, 2) + " ms alone), beside " +
      sizeName(m.contentionBytes) +
      " pinned copies that outlast it; the GEMMs' part: (loop factor - (1 - " +
      "share) x the memory-bound loop's) / share";
  std::string pure = g.aloneMs > 0
                         ? "; a loop of GEMMs alone, at the power limit, read x" +
                               num((g.slowdownBesideD2H() +
                                    g.slowdownBesideH2D()) /
                                       2,
                                   3) +
                               " / x" + num(g.slowdownBesideBoth(), 3) +
                               " (not used)"
                         : "";
  if (d2h > 0 && h2d > 0)
    d.add("matmul_slowdown_with_copies", num(atLeastOne((d2h + h2d) / 2), 3),
          how + ": loop x" + num(x.slowdownBesideD2H(), 3) + " beside D2H, x" +
              num(x.slowdownBesideH2D(), 3) + " beside H2D; GEMMs x" +
              num(d2h, 3) + " and x" + num(h2d, 3) +
              ", the mean kept (at least 1)" + pure);
  if (both > 0)
    d.add("matmul_slowdown_with_both_copies", num(atLeastOne(both), 3),
          how + ": loop x" + num(x.slowdownBesideBoth(), 3) +
              " beside D2H and H2D at once; GEMMs x" + num(both, 3) +
              " (at least 1)" + pure);
}

void deriveContention(Deriver &d) {
  const Measurements &m = d.m;
  auto kernel = [&](const char *prefix, const KernelContention &k,
                    const std::string &what) {
    if (!(k.aloneMs > 0))
      return;
    double one = (k.slowdownBesideD2H() + k.slowdownBesideH2D()) / 2;
    double both = k.slowdownBesideBoth();
    std::string copies =
        sizeName(m.contentionBytes) +
        " pinned copies repeated to outlast the loop" +
        (k.d2hSlowdown > 0 ? "; each factor the median of per-round ratios"
                           : "");
    d.add(std::string(prefix) + "_slowdown_with_copies",
          num(atLeastOne(one), 3),
          what + ": " + num(k.aloneMs, 2) + " ms alone, x" +
              num(k.slowdownBesideD2H(), 3) + " beside D2H, x" +
              num(k.slowdownBesideH2D(), 3) + " beside H2D (" + copies +
              "); the mean of the two kept (at least 1)");
    d.add(std::string(prefix) + "_slowdown_with_both_copies",
          num(atLeastOne(both), 3),
          what + ": x" + num(both, 3) + " beside D2H and H2D copies at once (" +
              copies + "; at least 1)");
  };
  if (m.mixed.aloneMs > 0 && m.mixedGemmShare > 0 &&
      m.memoryBound.aloneMs > 0)
    mixedGemm(d);
  else
    kernel("matmul", m.matmul, "a loop of bf16 8192^3 GEMMs (cuBLASLt)");
  kernel("memory_bound", m.memoryBound,
         "a loop of the runtime's replay kernel streaming through HBM "
         "(memory-bound)");
  // The rate that loop streams at: the simulator slows a memory-bound op
  // beside copies only as far as its bytes at this rate fill its time.
  if (m.memoryBound.aloneMs > 0 && m.memoryKernelBytesPerSec > 0)
    d.add("memory_kernel_gb_per_s", num(m.memoryKernelBytesPerSec / 1e9, 0),
          "the runtime's memory-bound replay kernel streaming through HBM "
          "alone (bytes read plus written): the rate at which "
          "memory_bound_slowdown_* were measured");
  else
    d.carry("memory_kernel_gb_per_s");
  auto copy = [&](const char *key, double d2hDuring, double h2dDuring,
                  const std::string &what) {
    if (!(m.d2hAloneGBs > 0 && m.h2dAloneGBs > 0 && d2hDuring > 0 &&
          h2dDuring > 0))
      return;
    double dx = d2hDuring / m.d2hAloneGBs, hx = h2dDuring / m.h2dAloneGBs;
    d.add(key, num(fraction((dx + hx) / 2), 3),
          sizeName(m.contentionBytes) + " pinned copies during " + what +
              " that outlasts them: D2H " + num(d2hDuring, 1) + " GB/s (x" +
              num(dx, 3) + "), H2D " + num(h2dDuring, 1) + " GB/s (x" +
              num(hx, 3) + "); the mean of the two kept (at most 1)");
  };
  copy("copy_slowdown_with_matmul", m.d2hDuringMatmulGBs, m.h2dDuringMatmulGBs,
       "a bf16 GEMM loop");
  copy("copy_slowdown_with_memory_bound", m.d2hDuringMemoryGBs,
       m.h2dDuringMemoryGBs, "a memory-bound kernel loop");
}

void deriveHost(Deriver &d) {
  const Measurements &m = d.m;
  const HostPoint *all = nullptr;
  for (const HostPoint &p : m.host)
    if (p.gpus == m.gpus && (!all || p.bytes >= all->bytes))
      all = &p;
  if (!all || m.gpus < 2)
    return;
  const HostPoint *one = nullptr;
  for (const HostPoint &p : m.host)
    if (p.gpus == 1 && p.bytes == all->bytes)
      one = &p;
  auto note = [&](const char *what, double perGpu, double lone) {
    std::string s = std::to_string(m.gpus) + " GPUs of this host copying " +
                    sizeName(all->bytes) + " at once, " + what + ": " +
                    num(perGpu, 1) + " GB/s per GPU";
    if (lone > 0)
      s += " (one GPU alone: " + num(lone, 1) + ")";
    s += "; by number of GPUs:";
    for (const HostPoint &p : m.host)
      if (p.bytes == all->bytes) {
        double x = std::string(what) == "D2H"   ? p.d2hGBs
                   : std::string(what) == "H2D" ? p.h2dGBs
                                                : p.bothGBs;
        s += " " + std::to_string(p.gpus) + ": " + num(x, 1);
      }
    return s + ". Each of k GPUs copying at once gets at most 1/k of the sum";
  };
  d.add("host_d2h_gb_per_s", num(all->d2hGBs * m.gpus, 1),
        note("D2H", all->d2hGBs, one ? one->d2hGBs : 0));
  d.add("host_h2d_gb_per_s", num(all->h2dGBs * m.gpus, 1),
        note("H2D", all->h2dGBs, one ? one->h2dGBs : 0));
  d.add("host_both_gb_per_s", num(all->bothGBs * m.gpus, 1),
        note("both directions (D2H + H2D per GPU)", all->bothGBs,
             one ? one->bothGBs : 0));
}

void deriveCollectives(Deriver &d) {
  const Measurements &m = d.m;
  std::vector<Sample> ag, ar;
  for (const CollectivePoint &p : m.collectives)
    (p.kind == "all_gather" ? ag : ar).push_back({busBytes(p), p.us});
  RateFit fag = fitRate(ag), far = fitRate(ar);
  if (!fag.valid)
    return;
  int ranks = m.collectives.front().ranks;
  std::string arNote =
      far.valid
          ? "; all-reduce (2x the ring bytes): " + num(far.fixedUs, 1) +
                " us + bus bytes / " + num(far.bytesPerSec / 1e9, 1) + " GB/s"
          : "";
  d.add("nvlink_gb_per_s", num(fag.bytesPerSec / 1e9, 1),
        "NCCL all-gather over " + std::to_string(ranks) +
            " GPUs of this host, one process: bus bytes ((n-1)/n of the "
            "gathered buffer) per call fitted as " +
            num(fag.fixedUs, 1) + " us + bytes / " +
            num(fag.bytesPerSec / 1e9, 1) + " GB/s (largest error " +
            num(100 * fag.maxRelError, 1) + "%)" + arNote);
  if (m.collectiveAloneMs > 0) {
    std::string what =
        "an all-gather of " + sizeName(m.contendedCollectiveBytes) +
        " (gathered, per rank), " + num(m.collectiveAloneMs, 2) + " ms alone";
    d.add(
        "collective_slowdown_with_copies",
        num(atLeastOne(ratio(m.collectiveBesideD2HMs, m.collectiveAloneMs)), 3),
        what + ", x" +
            num(ratio(m.collectiveBesideD2HMs, m.collectiveAloneMs), 3) +
            " beside D2H copies on every GPU (at least 1)");
    d.add("collective_slowdown_with_both_copies",
          num(atLeastOne(ratio(m.collectiveBesideBothMs, m.collectiveAloneMs)),
              3),
          what + ", x" +
              num(ratio(m.collectiveBesideBothMs, m.collectiveAloneMs), 3) +
              " beside D2H and H2D copies on every GPU (at least 1)");
  }
  double dx = ratio(m.hostD2HDuringCollectiveGBs, m.hostD2HAloneGBs),
         hx = ratio(m.hostH2DDuringCollectiveGBs, m.hostH2DAloneGBs);
  if (dx > 0 && hx > 0)
    d.add("copy_slowdown_with_collectives", num(fraction((dx + hx) / 2), 3),
          "every GPU's copies during an all-gather loop that outlasts them, "
          "against every GPU copying alone: D2H x" +
              num(dx, 3) + ", H2D x" + num(hx, 3) +
              "; the mean of the two kept (at most 1)");
  d.add("collective_fixed_us", num(fag.fixedUs, 1),
        "the fixed part of the all-gather fit (see nvlink_gb_per_s)");
}

void deriveLaunches(Deriver &d) {
  const Measurements &m = d.m;
  auto us = [&](const char *key, double value, const std::string &note) {
    if (value >= 0 && std::isfinite(value))
      d.add(key, num(std::max(0.0, value), 2), note);
  };
  if (m.launchUs > 0)
    us("launch_overhead_us", m.launchUs,
       "the smallest kernel (one thread) between two events behind a GPU "
       "spin, as the shared graphs were timed: " +
           num(m.launchUs, 2) + " us");
  if (m.viewUs > 0)
    us("view_us", m.viewUs,
       "two events with nothing between them, timed the same way (the floor "
       "of per-op event timing)");
}

void deriveFixedCosts(Deriver &d) {
  const Measurements &m = d.m;
  // The copy fits' fixed parts are written beside the other fixed costs.
  if (!m.copies.empty()) {
    std::vector<Sample> d2h, h2d;
    for (const CopyPoint &p : m.copies) {
      d2h.push_back({(double)p.bytes, p.d2hUs});
      h2d.push_back({(double)p.bytes, p.h2dUs});
    }
    RateFit fd = fitRate(d2h), fh = fitRate(h2d);
    if (fd.valid)
      d.add("d2h_fixed_us", num(fd.fixedUs, 2),
            "the fixed part of the D2H fit (see d2h_gb_per_s)");
    if (fh.valid)
      d.add("h2d_fixed_us", num(fh.fixedUs, 2),
            "the fixed part of the H2D fit (see h2d_gb_per_s)");
  }
  auto us = [&](const char *key, double value, const std::string &note) {
    if (value != 0 && std::isfinite(value))
      d.add(key, num(std::max(0.0, value), 2),
            note + (value < 0 ? " (measured " + num(value, 2) +
                                    ": noise, written as 0)"
                              : ""));
  };
  us("host_launch_us", m.hostLaunchUs,
     "host time to enqueue one runtime kernel (letheRtReplay, no buffers) "
     "while the GPU is busy: an eager step of short kernels runs no faster");
  us("graph_kernel_us", m.graphKernelUs,
     "per empty kernel, back to back inside a CUDA graph (the replay floor)");
  us("graph_launch_us", m.graphLaunchUs,
     "a one-kernel CUDA graph launched between two events, beyond the same "
     "kernel launched eagerly");
  us("event_record_us", m.eventRecordUs,
     "a chain of empty kernels with an event recorded after each, against "
     "the chain without, per record");
  us("wait_us", m.waitUs,
     "empty kernels alternating between two streams, each waiting for the "
     "other's event, against the same chain on one stream, per wait");
  us("graph_wait_us", m.graphWaitUs,
     "the same two chains captured into CUDA graphs, per cross-stream edge");
}

} // namespace

std::vector<ProfileField> calibrate::deriveProfile(const Measurements &m,
                                                   const BaseProfile *base,
                                                   const std::string &name) {
  Deriver d(m, base);
  std::string profileName = name;
  const std::string *baseName = base ? base->fields.get("name") : nullptr;
  if (profileName.empty() && baseName && baseName->size() >= 2)
    profileName = baseName->substr(1, baseName->size() - 2);
  if (profileName.empty())
    profileName = slug(m.device);
  d.fields.push_back({"name", JsonWriter::quote(profileName), {}, ""});
  std::string described =
      m.device + " (" + std::to_string(m.sms) + " SMs, " +
      num(m.deviceMemoryBytes / (1ull << 30), 1) +
      " GiB); measured by lethe-calibrate on " + m.date +
      (m.gpus > 1 ? " with " + std::to_string(m.gpus) + " GPUs of one host"
                  : "");
  const std::string *baseDescription =
      base ? base->fields.get("description") : nullptr;
  if (baseDescription && baseDescription->size() >= 2 &&
      (*baseDescription)[0] == '"') {
    std::string suffix = JsonWriter::quote("; " + described);
    d.fields.push_back(
        {"description",
         baseDescription->substr(0, baseDescription->size() - 1) +
             suffix.substr(1),
         {},
         ""});
  } else {
    d.fields.push_back({"description", JsonWriter::quote(described), {}, ""});
  }

  derivePeaks(d);
  deriveEfficiency(d);
  if (m.hbmBytesPerSec > 0)
    d.add("hbm_gb_per_s", num(m.hbmBytesPerSec / 1e9, 0),
          "device-to-device copy, bytes read plus written; the runtime's "
          "memory-bound replay kernel moving the same bytes reaches " +
              num(m.memoryKernelBytesPerSec / 1e9, 0) + " GB/s");
  else
    d.carry("hbm_gb_per_s");
  deriveCopies(d);

  // Fields measured in this order only where their measurement ran; the
  // base fills the rest, key by key, in the file's canonical order.
  std::vector<ProfileField> measured;
  measured.swap(d.fields);
  deriveCollectives(d);
  deriveLaunches(d);
  deriveFixedCosts(d);
  deriveHost(d);
  deriveContention(d);
  std::vector<ProfileField> later;
  later.swap(d.fields);
  d.fields.swap(measured);

  const char *const canonical[] = {
      "nvlink_gb_per_s",
      "launch_overhead_us",
      "view_us",
      "collective_slowdown_with_copies",
      "collective_slowdown_with_both_copies",
      "copy_slowdown_with_collectives",
      "d2h_fixed_us",
      "h2d_fixed_us",
      "host_d2h_gb_per_s",
      "host_h2d_gb_per_s",
      "host_both_gb_per_s",
      "matmul_slowdown_with_copies",
      "matmul_slowdown_with_both_copies",
      "memory_bound_slowdown_with_copies",
      "memory_bound_slowdown_with_both_copies",
      "memory_kernel_gb_per_s",
      "copy_slowdown_with_matmul",
      "copy_slowdown_with_memory_bound",
      "host_launch_us",
      "graph_kernel_us",
      "graph_launch_us",
      "event_record_us",
      "wait_us",
      "graph_wait_us",
      "collective_fixed_us",
  };
  for (const char *key : canonical) {
    auto it = std::find_if(later.begin(), later.end(),
                           [&](const ProfileField &f) { return f.key == key; });
    if (it != later.end())
      d.fields.push_back(*it);
    else
      d.carry(key);
  }
  // Fields measured nowhere above (a new kind) keep their place at the end.
  for (const ProfileField &f : later)
    if (std::find(std::begin(canonical), std::end(canonical), f.key) ==
        std::end(canonical))
      d.fields.push_back(f);

  if (m.deviceMemoryBytes > 0)
    d.add("device_memory_bytes", num(m.deviceMemoryBytes, 0),
          "cudaDeviceProp::totalGlobalMem");
  if (base && base->fields.get("host_pinned_bytes")) {
    d.carry("host_pinned_bytes");
  } else {
    double pinned =
        std::floor(m.hostMemoryBytes / 2 / std::max(1, m.gpus) / (1ull << 30)) *
        (1ull << 30);
    d.add("host_pinned_bytes", num(pinned, 0),
          "a policy, not a measurement: half of this host's " +
              num(m.hostMemoryBytes / (1ull << 30), 0) + " GiB of memory" +
              (m.gpus > 1 ? " shared by " + std::to_string(m.gpus) + " GPUs"
                          : std::string()) +
              ", in whole GiB");
  }
  // Whatever else the base has (fields this tool does not know) stays.
  if (base)
    for (const auto &member : base->fields.members) {
      const std::string &key = member.first;
      if (key == "notes" || key == "name" || key == "description")
        continue;
      bool have =
          std::any_of(d.fields.begin(), d.fields.end(),
                      [&](const ProfileField &f) { return f.key == key; });
      if (!have)
        d.carry(key);
    }
  return d.fields;
}

std::string calibrate::writeProfile(const std::vector<ProfileField> &fields) {
  std::string out = "{\n";
  bool first = true;
  auto line = [&](const std::string &text) {
    out += first ? "" : ",\n";
    out += text;
    first = false;
  };
  for (const ProfileField &f : fields) {
    if (f.members.empty()) {
      line("  " + JsonWriter::quote(f.key) + ": " + f.json);
      continue;
    }
    std::string object = "  " + JsonWriter::quote(f.key) + ": {\n";
    for (size_t i = 0; i < f.members.size(); ++i)
      object += "    " + JsonWriter::quote(f.members[i].first) + ": " +
                f.members[i].second + (i + 1 < f.members.size() ? ",\n" : "\n");
    line(object + "  }");
  }
  std::string notes;
  for (const ProfileField &f : fields)
    if (!f.noteJson.empty())
      notes += (notes.empty() ? "" : ",\n") + std::string("    ") +
               JsonWriter::quote(f.key) + ": " + f.noteJson;
  if (!notes.empty())
    line("  \"notes\": {\n" + notes + "\n  }");
  return out + "\n}\n";
}

double calibrate::hostLaunchFromRounds(std::vector<double> roundsUs,
                                       std::string &why) {
  why.clear();
  roundsUs.erase(std::remove_if(roundsUs.begin(), roundsUs.end(),
                                [](double us) {
                                  return !(us > 0) || !std::isfinite(us);
                                }),
                 roundsUs.end());
  if (roundsUs.size() < 3) {
    why = std::to_string(roundsUs.size()) +
          " rounds kept the GPU busy, 3 needed";
    return 0;
  }
  std::sort(roundsUs.begin(), roundsUs.end());
  double least = roundsUs.front(), median = roundsUs[roundsUs.size() / 2];
  if (median > kMaxHostLaunchUs)
    why = "of " + num(median, 2) + " us (median of " +
          std::to_string(roundsUs.size()) + " rounds) is past " +
          num(kMaxHostLaunchUs, 0) + " us: the host stalled";
  else if (median > 1.5 * least)
    why = "rounds disagree: median " + num(median, 2) + " us, least " +
          num(least, 2) + " us: the host stalled in most rounds";
  return why.empty() ? median : 0;
}

double calibrate::gemmSlowdownInMix(double mixed, double memoryFactor,
                                    double gemmShare) {
  if (!(mixed > 0 && memoryFactor > 0 && gemmShare > 0 && gemmShare <= 1))
    return 0;
  return (mixed - (1 - gemmShare) * memoryFactor) / gemmShare;
}

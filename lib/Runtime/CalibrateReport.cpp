//===- CalibrateReport.cpp - lethe-calibrate: summary and samples ---------===//
//
// What lethe-calibrate prints (markdown tables of what it measured, then
// the profile's figures) and the raw measurements it writes with --samples.
//
//===----------------------------------------------------------------------===//

#include "lethe/Runtime/Calibrate.h"

#include "Json.h"

#include <cstdarg>
#include <cstdio>

using namespace lethe::rt;
using namespace lethe::rt::calibrate;

namespace {

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

std::string size(uint64_t bytes) {
  if (bytes >= (1ull << 30))
    return format("%g GiB", bytes / double(1ull << 30));
  if (bytes >= (1ull << 20))
    return format("%g MiB", bytes / double(1ull << 20));
  return format("%g KiB", bytes / 1024.0);
}

double gbps(uint64_t bytes, double us) { return us > 0 ? bytes / us / 1e3 : 0; }
double ratio(double a, double b) { return b > 0 ? a / b : 0; }

} // namespace

std::string calibrate::summarize(const Measurements &m,
                                 const std::vector<ProfileField> &fields) {
  std::string out;
  out += format("# lethe-calibrate: %s, %d SMs, %.1f GiB, %d GPU%s\n\n",
                m.device.c_str(), m.sms, m.deviceMemoryBytes / (1ull << 30),
                m.gpus, m.gpus > 1 ? "s" : "");
  out += m.software + "; " + m.date + (m.quick ? "; --quick" : "") + "\n\n";

  if (!m.copies.empty()) {
    out += "## Pinned host copies, one GPU (per copy, back to back on its "
           "stream)\n\n| size | copies | D2H us | D2H GB/s | H2D us | H2D GB/s "
           "| both: D2H GB/s | both: H2D GB/s |\n|---|---|---|---|---|---|---|"
           "---|\n";
    std::vector<Sample> d2h, h2d;
    for (const CopyPoint &p : m.copies) {
      out += format("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                    size(p.bytes).c_str(), p.count, p.d2hUs,
                    gbps(p.bytes, p.d2hUs), p.h2dUs, gbps(p.bytes, p.h2dUs),
                    gbps(p.bytes, p.d2hBothUs), gbps(p.bytes, p.h2dBothUs));
      d2h.push_back({(double)p.bytes, p.d2hUs});
      h2d.push_back({(double)p.bytes, p.h2dUs});
    }
    RateFit fd = fitRate(d2h), fh = fitRate(h2d);
    out += format("\nFit: D2H %.2f us + bytes / %.1f GB/s (largest error "
                  "%.1f%%), H2D %.2f us + bytes / %.1f GB/s (%.1f%%).\n\n",
                  fd.fixedUs, fd.bytesPerSec / 1e9, 100 * fd.maxRelError,
                  fh.fixedUs, fh.bytesPerSec / 1e9, 100 * fh.maxRelError);
  }

  if (!m.host.empty()) {
    out += format("## GPUs of this host copying at once (per GPU GB/s: mean "
                  "/ slowest)\n\n| GPUs | size | D2H | H2D | both (D2H + H2D) "
                  "| host total D2H | H2D | both |\n|---|---|---|---|---|---|"
                  "---|---|\n");
    for (const HostPoint &p : m.host)
      out += format("| %d | %s | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | "
                    "%.1f | %.1f | %.1f |\n",
                    p.gpus, size(p.bytes).c_str(), p.d2hGBs, p.d2hMinGBs,
                    p.h2dGBs, p.h2dMinGBs, p.bothGBs, p.bothMinGBs,
                    p.d2hGBs * p.gpus, p.h2dGBs * p.gpus, p.bothGBs * p.gpus);
    out += "\n";
  }

  if (!m.peakFlops.empty()) {
    out += "## Dense matrix products (cuBLASLt, random data)\n\n| dtype | "
           "TFLOP/s |\n|---|---|\n";
    for (const auto &[dtype, flops] : m.peakFlops)
      out += format("| %s | %.1f |\n", dtype.c_str(), flops / 1e12);
    for (const auto &[dtype, why] : m.skippedDtypes)
      out += format("| %s | not measured: %s |\n", dtype.c_str(), why.c_str());
    if (m.unalignedFractions.size() == 2)
      out += format("\nbf16 8192x4096x4095 / 8192x4095x4096: %.3f / %.3f of "
                    "the bf16 rate.\n",
                    m.unalignedFractions[0], m.unalignedFractions[1]);
    out += format("Device-to-device copy: %.0f GB/s (read + write); the "
                  "runtime's memory-bound replay kernel: %.0f GB/s.\n\n",
                  m.hbmBytesPerSec / 1e9, m.memoryKernelBytesPerSec / 1e9);
  }

  if (m.matmul.aloneMs > 0 || m.memoryBound.aloneMs > 0) {
    out += format("## Kernels beside copies (%s pinned copies outlasting "
                  "the loop)\n\n| kernel loop | alone ms | beside D2H | beside "
                  "H2D | beside both |\n|---|---|---|---|---|\n",
                  size(m.contentionBytes).c_str());
    auto row = [&](const char *name, const KernelContention &k) {
      out += format("| %s | %.2f | x%.3f | x%.3f | x%.3f |\n", name, k.aloneMs,
                    k.slowdownBesideD2H(), k.slowdownBesideH2D(),
                    k.slowdownBesideBoth());
    };
    row("bf16 GEMM 8192^3", m.matmul);
    row("memory-bound replay", m.memoryBound);
    if (m.mixed.aloneMs > 0)
      row(format("GEMM + %d memory-bound replays (GEMMs %.2f of the time)",
                 m.mixedMemoryPerGemm, m.mixedGemmShare)
              .c_str(),
          m.mixed);
    out += format("\n| %s copy | alone GB/s | during GEMMs | during "
                  "memory-bound |\n|---|---|---|---|\n",
                  size(m.contentionBytes).c_str());
    out += format("| D2H | %.1f | %.1f | %.1f |\n", m.d2hAloneGBs,
                  m.d2hDuringMatmulGBs, m.d2hDuringMemoryGBs);
    out += format("| H2D | %.1f | %.1f | %.1f |\n\n", m.h2dAloneGBs,
                  m.h2dDuringMatmulGBs, m.h2dDuringMemoryGBs);
  }

  out += "## Launches, events and waits (us)\n\n| what | us |\n|---|---|\n";
  out += format("| smallest kernel, event to event | %.2f |\n", m.launchUs);
  out += format("| no kernel, event to event | %.2f |\n", m.viewUs);
  out +=
      format("| host enqueue of one runtime kernel (median of %d rounds; %d "
             "drained the GPU; 0: not kept) | %.2f |\n",
             (int)m.hostLaunchRoundsUs.size(), m.hostLaunchDrainedRounds,
             m.hostLaunchUs);
  out += format("| kernel back to back in a CUDA graph | %.2f |\n",
                m.graphKernelUs);
  out += format("| CUDA graph launch beyond its kernel | %.2f |\n",
                m.graphLaunchUs);
  out += format("| event record | %.2f |\n", m.eventRecordUs);
  out += format("| cross-stream wait, eager | %.2f |\n", m.waitUs);
  out += format("| cross-stream wait, CUDA graph | %.2f |\n\n", m.graphWaitUs);

  if (!m.collectives.empty()) {
    out += format(
        "## Collectives (NCCL, %d GPUs, one process)\n\n| kind | "
        "gathered or reduced per rank | us | bus GB/s |\n|---|---|---|---|\n",
        m.collectives.front().ranks);
    for (const CollectivePoint &p : m.collectives)
      out += format("| %s | %s | %.1f | %.1f |\n", p.kind.c_str(),
                    size(p.fullBytes).c_str(), p.us,
                    p.us > 0 ? busBytes(p) / p.us / 1e3 : 0.0);
    out += format("\nAll-gather of %s: %.2f ms alone, x%.3f beside D2H "
                  "copies, x%.3f beside both. Copies on every GPU during "
                  "all-gathers: D2H %.1f -> %.1f GB/s, H2D %.1f -> %.1f.\n\n",
                  size(m.contendedCollectiveBytes).c_str(), m.collectiveAloneMs,
                  ratio(m.collectiveBesideD2HMs, m.collectiveAloneMs),
                  ratio(m.collectiveBesideBothMs, m.collectiveAloneMs),
                  m.hostD2HAloneGBs, m.hostD2HDuringCollectiveGBs,
                  m.hostH2DAloneGBs, m.hostH2DDuringCollectiveGBs);
  } else if (!m.collectivesSkipped.empty()) {
    out += "Collectives not measured: " + m.collectivesSkipped + ".\n\n";
  } else if (m.gpus < 2) {
    out += "One GPU: copies of several GPUs at once and collectives not "
           "measured (--gpus N with N > 1 GPUs visible).\n\n";
  }

  if (!m.skipped.empty()) {
    out += "## Not measured (the profile keeps the base's fields)\n\n";
    for (const std::string &s : m.skipped)
      out += "- " + s + "\n";
    out += "\n";
  }
  if (!m.ungated.empty()) {
    out += "## Measured without the start gate (each lane from an event "
           "before its host enqueue, which is included)\n\n";
    for (const std::string &s : m.ungated)
      out += "- " + s + "\n";
    out += "\n";
  }

  out += "## Profile\n\n| field | value |\n|---|---|\n";
  for (const ProfileField &f : fields) {
    if (f.members.empty()) {
      out += "| " + f.key + " | " + f.json + " |\n";
      continue;
    }
    for (const auto &[key, value] : f.members)
      out += "| " + f.key + "." + key + " | " + value + " |\n";
  }
  return out;
}

std::string calibrate::writeSamples(const Measurements &m) {
  JsonWriter j;
  j.beginObject();
  j.field("device", m.device);
  j.field("sms", m.sms);
  j.field("device_memory_bytes", m.deviceMemoryBytes);
  j.field("host_memory_bytes", m.hostMemoryBytes);
  j.field("gpus", m.gpus);
  j.field("date", m.date);
  j.field("software", m.software);
  j.field("quick", m.quick);
  j.key("copies").beginArray();
  for (const CopyPoint &p : m.copies) {
    j.beginObject();
    j.field("bytes", p.bytes);
    j.field("count", p.count);
    j.field("d2h_us", p.d2hUs);
    j.field("h2d_us", p.h2dUs);
    j.field("d2h_both_us", p.d2hBothUs);
    j.field("h2d_both_us", p.h2dBothUs);
    j.endObject();
  }
  j.endArray();
  j.key("host").beginArray();
  for (const HostPoint &p : m.host) {
    j.beginObject();
    j.field("gpus", p.gpus);
    j.field("bytes", p.bytes);
    j.field("d2h_gb_per_s", p.d2hGBs);
    j.field("h2d_gb_per_s", p.h2dGBs);
    j.field("both_gb_per_s", p.bothGBs);
    j.field("d2h_min_gb_per_s", p.d2hMinGBs);
    j.field("h2d_min_gb_per_s", p.h2dMinGBs);
    j.field("both_min_gb_per_s", p.bothMinGBs);
    j.endObject();
  }
  j.endArray();
  j.field("hbm_bytes_per_s", m.hbmBytesPerSec);
  j.field("memory_kernel_bytes_per_s", m.memoryKernelBytesPerSec);
  j.key("peak_flops").beginObject();
  for (const auto &[dtype, flops] : m.peakFlops)
    j.field(dtype, flops);
  j.endObject();
  j.key("skipped_dtypes").beginObject();
  for (const auto &[dtype, why] : m.skippedDtypes)
    j.field(dtype, why);
  j.endObject();
  j.key("unaligned_fractions").beginArray();
  for (double x : m.unalignedFractions)
    j.value(x);
  j.endArray();
  j.field("launch_us", m.launchUs);
  j.field("view_us", m.viewUs);
  j.field("host_launch_us", m.hostLaunchUs);
  j.key("host_launch_rounds_us").beginArray();
  for (double x : m.hostLaunchRoundsUs)
    j.value(x);
  j.endArray();
  j.field("host_launch_drained_rounds", m.hostLaunchDrainedRounds);
  j.field("graph_kernel_us", m.graphKernelUs);
  j.field("graph_launch_us", m.graphLaunchUs);
  j.field("event_record_us", m.eventRecordUs);
  j.field("wait_us", m.waitUs);
  j.field("graph_wait_us", m.graphWaitUs);
  auto kernel = [&](const char *name, const KernelContention &k) {
    j.key(name).beginObject();
    j.field("alone_ms", k.aloneMs);
    j.field("beside_d2h_ms", k.besideD2HMs);
    j.field("beside_h2d_ms", k.besideH2DMs);
    j.field("beside_both_ms", k.besideBothMs);
    j.field("slowdown_beside_d2h", k.d2hSlowdown);
    j.field("slowdown_beside_h2d", k.h2dSlowdown);
    j.field("slowdown_beside_both", k.bothSlowdown);
    j.endObject();
  };
  kernel("matmul", m.matmul);
  kernel("memory_bound", m.memoryBound);
  kernel("mixed", m.mixed);
  j.field("mixed_memory_per_gemm", m.mixedMemoryPerGemm);
  j.field("mixed_gemm_share", m.mixedGemmShare);
  j.field("contention_bytes", m.contentionBytes);
  j.field("d2h_alone_gb_per_s", m.d2hAloneGBs);
  j.field("h2d_alone_gb_per_s", m.h2dAloneGBs);
  j.field("d2h_during_matmul_gb_per_s", m.d2hDuringMatmulGBs);
  j.field("h2d_during_matmul_gb_per_s", m.h2dDuringMatmulGBs);
  j.field("d2h_during_memory_bound_gb_per_s", m.d2hDuringMemoryGBs);
  j.field("h2d_during_memory_bound_gb_per_s", m.h2dDuringMemoryGBs);
  j.key("collectives").beginArray();
  for (const CollectivePoint &p : m.collectives) {
    j.beginObject();
    j.field("kind", p.kind);
    j.field("ranks", p.ranks);
    j.field("full_bytes", p.fullBytes);
    j.field("us", p.us);
    j.endObject();
  }
  j.endArray();
  j.field("collectives_skipped", m.collectivesSkipped);
  j.field("contended_collective_bytes", m.contendedCollectiveBytes);
  j.field("collective_alone_ms", m.collectiveAloneMs);
  j.field("collective_beside_d2h_ms", m.collectiveBesideD2HMs);
  j.field("collective_beside_both_ms", m.collectiveBesideBothMs);
  j.field("host_d2h_alone_gb_per_s", m.hostD2HAloneGBs);
  j.field("host_h2d_alone_gb_per_s", m.hostH2DAloneGBs);
  j.field("host_d2h_during_collective_gb_per_s", m.hostD2HDuringCollectiveGBs);
  j.field("host_h2d_during_collective_gb_per_s", m.hostH2DDuringCollectiveGBs);
  j.field("no_gate", m.noGate);
  for (const auto &[name, list] :
       {std::pair<const char *, const std::vector<std::string> *>{"skipped",
                                                                  &m.skipped},
        {"ungated", &m.ungated}}) {
    j.key(name).beginArray();
    for (const std::string &s : *list)
      j.value(s);
    j.endArray();
  }
  j.endObject();
  return j.str();
}

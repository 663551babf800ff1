//===- RunnerTiming.cpp - lethe-run's timing mode -------------------------===//
//
// Warm-up steps, N timed steps (eager, then as a CUDA graph), profiled
// steps (per-stream busy time, copy bandwidth, collectives) and memory, in
// one JSON report (docs/Runtime.md).
//
//===----------------------------------------------------------------------===//

#include "RunnerImpl.h"
#include "RuntimeImpl.h"
#include "Samples.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lethe::rt::runner {
namespace {

void writeSummary(JsonWriter &json, const std::string &name,
                  const std::vector<double> &ms) {
  writeSummary(json, name, summarize(ms), static_cast<int>(ms.size()));
}

/// Times `count` launches of `enqueue` back to back on the compute stream.
RunError timeSteps(LetheRt *rt, int count, std::vector<double> &ms,
                   const std::function<LetheRtStatus()> &enqueue) {
  cudaStream_t compute = rt->streams[LETHE_STREAM_COMPUTE];
  std::vector<cudaEvent_t> marks(count + 1, nullptr);
  const std::string at = "lethe-run (step timing)";
  for (cudaEvent_t &e : marks)
    if (checkCuda(rt, cudaEventCreate(&e), at, "cudaEventCreate"))
      return errorOf(rt, LETHE_RT_OK, "");
  RunError err;
  if (checkCuda(rt, cudaEventRecord(marks[0], compute), at, "cudaEventRecord"))
    err = errorOf(rt, LETHE_RT_OK, "");
  for (int i = 0; !err && i < count; ++i) {
    err = errorOf(rt, enqueue(), "the program's step");
    if (!err && checkCuda(rt, cudaEventRecord(marks[i + 1], compute), at,
                          "cudaEventRecord"))
      err = errorOf(rt, LETHE_RT_OK, "");
  }
  if (!err)
    err = errorOf(rt, letheRtSynchronize(rt), "letheRtSynchronize");
  for (int i = 0; !err && i < count; ++i) {
    float elapsed = 0;
    if (checkCuda(rt, cudaEventElapsedTime(&elapsed, marks[i], marks[i + 1]),
                  at, "cudaEventElapsedTime"))
      err = errorOf(rt, LETHE_RT_OK, "");
    ms.push_back(elapsed);
  }
  for (cudaEvent_t e : marks)
    if (e)
      cudaEventDestroy(e);
  return err;
}

struct StreamProfile {
  double busyMs = 0;
  uint64_t ops = 0, bytes = 0;
};

/// Of one profiled step: comm-stream time per collective kind (the first
/// word of the op label: all_gather, reduce_scatter, ...) and a hash of the
/// ops it enqueued (stream, label, bytes, in order), which must be the same
/// on every rank.
struct CollectiveProfile {
  std::map<std::string, double> ms;
  std::map<std::string, uint64_t> count;
  uint64_t opsHash = 0;
};

/// One eager step with every op timed; fills per-stream totals and writes
/// the Chrome trace.
RunError profiledStep(LetheRt *rt, const Options &o, const Program &prog,
                      StreamProfile (&streams)[LETHE_RT_NUM_STREAMS],
                      double &stepMs, CollectiveProfile &collectives) {
  const std::string at = "lethe-run (profiled step)";
  cudaStream_t compute = rt->streams[LETHE_STREAM_COMPUTE];
  cudaEvent_t begin = nullptr, end = nullptr;
  RunError err;
  rt->config.profile = 1;
  rt->profile.clear();
  rt->profilePoolUsed = 0;
  if (checkCuda(rt, cudaEventCreate(&begin), at, "cudaEventCreate") ||
      checkCuda(rt, cudaEventCreate(&end), at, "cudaEventCreate") ||
      checkCuda(rt, cudaEventRecord(begin, compute), at, "cudaEventRecord"))
    err = errorOf(rt, LETHE_RT_OK, "");
  if (!err)
    err = errorOf(rt, enqueueStep(rt, *prog.p), "the program's step");
  if (!err &&
      checkCuda(rt, cudaEventRecord(end, compute), at, "cudaEventRecord"))
    err = errorOf(rt, LETHE_RT_OK, "");
  if (!err)
    err = errorOf(rt, letheRtSynchronize(rt), "letheRtSynchronize");
  rt->config.profile = 0;
  std::string trace = "{\"traceEvents\": [\n";
  float total = 0;
  if (!err && checkCuda(rt, cudaEventElapsedTime(&total, begin, end), at,
                        "cudaEventElapsedTime"))
    err = errorOf(rt, LETHE_RT_OK, "");
  stepMs = total;
  uint64_t opsHash = 1469598103934665603ull;
  auto hashBytes = [&](const void *data, size_t size) {
    for (size_t k = 0; k < size; ++k)
      opsHash = (opsHash ^ ((const unsigned char *)data)[k]) * 1099511628211ull;
  };
  for (size_t i = 0; !err && i < rt->profile.size(); ++i) {
    const ProfileRecord &r = rt->profile[i];
    float startMs = 0, endMs = 0;
    if (checkCuda(rt, cudaEventElapsedTime(&startMs, begin, r.start), at,
                  "cudaEventElapsedTime") ||
        checkCuda(rt, cudaEventElapsedTime(&endMs, begin, r.end), at,
                  "cudaEventElapsedTime")) {
      err = errorOf(rt, LETHE_RT_OK, "");
      break;
    }
    hashBytes(&r.stream, sizeof(r.stream));
    hashBytes(r.op.data(), r.op.size() + 1);
    hashBytes(&r.bytes, sizeof(r.bytes));
    if (r.stream == LETHE_STREAM_COMM) {
      std::string kind = r.op.substr(0, r.op.find(' '));
      collectives.ms[kind] += endMs - startMs;
      ++collectives.count[kind];
    }
    StreamProfile &s = streams[r.stream];
    s.busyMs += endMs - startMs;
    ++s.ops;
    s.bytes += r.bytes;
    char line[160];
    std::snprintf(line, sizeof(line),
                  "%s{\"ph\": \"X\", \"pid\": 0, \"tid\": \"%s\", \"ts\": "
                  "%.3f, \"dur\": %.3f, \"name\": ",
                  i ? ",\n" : "", streamName(r.stream), startMs * 1000.0,
                  (endMs - startMs) * 1000.0);
    trace += line + JsonWriter::quote(r.op) + "}";
  }
  collectives.opsHash = opsHash;
  trace += "\n]}\n";
  if (!err && !o.tracePath.empty()) {
    std::ofstream out(o.tracePath);
    out << trace;
  }
  if (begin)
    cudaEventDestroy(begin);
  if (end)
    cudaEventDestroy(end);
  return err;
}

/// Captures one step as a CUDA graph and times its replays.
RunError graphSteps(LetheRt *rt, const Options &o, const Program &prog,
                    std::vector<double> &ms) {
  const std::string at = "lethe-run (CUDA graph)";
  cudaStream_t compute = rt->streams[LETHE_STREAM_COMPUTE];
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  rt->capturing = true;
  RunError err;
  if (checkCuda(
          rt, cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal),
          at, "cudaStreamBeginCapture"))
    err = errorOf(rt, LETHE_RT_OK, "");
  if (!err) {
    LetheRtStatus s = enqueueStep(rt, *prog.p);
    cudaError_t endErr = cudaStreamEndCapture(compute, &graph);
    err = errorOf(rt, s, "the program's step");
    if (!err && checkCuda(rt, endErr, at, "cudaStreamEndCapture"))
      err = errorOf(rt, LETHE_RT_OK, "");
  }
  rt->capturing = false;
  if (!err && checkCuda(rt, cudaGraphInstantiate(&exec, graph, 0), at,
                        "cudaGraphInstantiate"))
    err = errorOf(rt, LETHE_RT_OK, "");
  auto launch = [&]() -> LetheRtStatus {
    return checkCuda(rt, cudaGraphLaunch(exec, compute), at, "cudaGraphLaunch");
  };
  for (int i = 0; !err && i < std::max(o.warmup, 1); ++i)
    err = errorOf(rt, launch(), "cudaGraphLaunch");
  if (!err)
    err = timeSteps(rt, o.steps, ms, launch);
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  return err;
}

} // namespace

int runTiming(const Options &o, const Program &prog) {
  JsonWriter json;
  json.beginObject();
  writeRankRun(json, o, prog, "timing");
  LetheRt *rt = nullptr;
  RunError err = setUp(prog, o, LETHE_MODE_TIMING, &rt);
  if (err) {
    writeError(json, err);
    json.endObject();
    letheRtDestroy(rt);
    return finish(o, json, 1);
  }
  writeDevice(json, rt);
  json.field("steps", o.steps);
  json.field("warmup", o.warmup);
  json.field("replay_gemms", o.replayGemms);

  // Device-wide memory in use at each stage; the peak is their maximum
  // (static arenas: use only grows when libraries allocate lazily).
  uint64_t peakUsed = 0;
  std::vector<std::pair<std::string, uint64_t>> samples;
  auto sampleMemory = [&](const char *stage) {
    LetheRtMemoryInfo m;
    if (letheRtGetMemoryInfo(rt, &m) != LETHE_RT_OK)
      return;
    if (samples.empty())
      samples.emplace_back("after_create", m.usedAfterCreateBytes);
    samples.emplace_back(stage, m.usedNowBytes);
    peakUsed = std::max({peakUsed, m.usedNowBytes, m.usedAfterCreateBytes});
  };
  sampleMemory("after_init");
  auto eager = [&] { return enqueueStep(rt, *prog.p); };
  for (int i = 0; !err && i < o.warmup; ++i)
    err = errorOf(rt, eager(), "the program's step");
  if (!err)
    err = errorOf(rt, letheRtSynchronize(rt), "letheRtSynchronize");
  sampleMemory("after_warmup");
  std::vector<double> eagerMs, graphMs;
  if (!err)
    err = timeSteps(rt, o.steps, eagerMs, eager);
  sampleMemory("after_eager_steps");

  StreamProfile streams[LETHE_RT_NUM_STREAMS];
  double profiledMs = 0;
  LetheRtStats stats{};
  // Profiled steps: the first gives the per-stream totals and counts, all
  // give the collective times (medians over the steps).
  std::vector<CollectiveProfile> collectiveSteps;
  std::vector<double> profiledSteps, commBusy;
  for (int i = 0; !err && o.profile && i < o.profileSteps; ++i) {
    StreamProfile scratch[LETHE_RT_NUM_STREAMS];
    StreamProfile(&into)[LETHE_RT_NUM_STREAMS] = i == 0 ? streams : scratch;
    if (i == 0)
      letheRtResetStats(rt);
    double ms = 0;
    collectiveSteps.emplace_back();
    err = profiledStep(rt, o, prog, into, ms, collectiveSteps.back());
    if (i == 0) {
      letheRtGetStats(rt, &stats);
      profiledMs = ms;
    }
    profiledSteps.push_back(ms);
    commBusy.push_back(into[LETHE_STREAM_COMM].busyMs);
  }
  // Read before the graph run: a capture failure leaves the runtime's
  // status sticky.
  LetheRtMemoryInfo m{};
  if (!err)
    letheRtGetMemoryInfo(rt, &m);
  RunError graphErr;
  if (!err && o.graph) {
    graphErr = graphSteps(rt, o, prog, graphMs);
    sampleMemory("after_graph_steps");
  }

  json.key("step_ms").beginObject();
  writeSummary(json, "eager", eagerMs);
  if (!graphMs.empty())
    writeSummary(json, "graph", graphMs);
  if (graphErr)
    json.field("graph_error", graphErr.message);
  json.endObject();
  json.key("planned").beginObject();
  json.field("step_us", prog.p->plannedStepUs);
  json.field("peak_bytes", prog.p->plannedPeakBytes);
  json.endObject();

  // What letheRtCreate set up beyond its own allocations: cuBLASLt's
  // handle, the runtime's kernels, streams and events.
  int64_t setupOther =
      (int64_t)m.usedAfterCreateBytes - (int64_t)m.usedAtContextBytes -
      (int64_t)(m.deviceArenaBytes + m.gemmWorkspaceBytes + m.scratchBytes);
  uint64_t fixed = m.gemmWorkspaceBytes + m.scratchBytes + m.ncclBytes +
                   (uint64_t)std::max<int64_t>(setupOther, 0);
  uint64_t processPeak =
      peakUsed > m.usedAtContextBytes ? peakUsed - m.usedAtContextBytes : 0;
  json.key("memory").beginObject();
  json.field("device_total", m.deviceTotalBytes);
  json.field("used_at_context", m.usedAtContextBytes);
  json.field("peak_used", peakUsed);
  json.field("peak_since_context", processPeak);
  json.field("device_arena", m.deviceArenaBytes);
  json.field("host_arena", m.hostArenaBytes);
  json.field("gemm_workspace", m.gemmWorkspaceBytes);
  json.field("scratch", m.scratchBytes);
  json.field("nccl", m.ncclBytes);
  json.field("setup_other", setupOther);
  json.field("fixed_overhead", fixed);
  json.field("unaccounted",
             (int64_t)processPeak - (int64_t)(m.deviceArenaBytes + fixed));
  json.key("samples").beginObject();
  for (const auto &[stage, used] : samples)
    json.field(stage, used);
  json.endObject();
  json.endObject();

  if (o.profile && !err) {
    json.field("profiled_step_ms", profiledMs);
    json.key("streams").beginObject();
    for (int s = 0; s < LETHE_RT_NUM_STREAMS; ++s) {
      json.key(streamName(s)).beginObject();
      json.field("busy_ms", streams[s].busyMs);
      json.field("ops", streams[s].ops);
      if (s != LETHE_STREAM_COMPUTE) {
        json.field("bytes", streams[s].bytes);
        json.field("gb_per_s", streams[s].busyMs > 0
                                   ? streams[s].bytes / streams[s].busyMs / 1e6
                                   : 0.0);
      }
      json.endObject();
    }
    json.endObject();
    writeCounts(json, stats);
    // Per collective kind, medians over the profiled steps.
    json.field("profile_steps", (int)profiledSteps.size());
    writeSummary(json, "profiled_steps_ms", profiledSteps);
    writeSummary(json, "comm_busy_ms", commBusy);
    std::map<std::string, std::vector<double>> byKind;
    for (const CollectiveProfile &c : collectiveSteps)
      for (const auto &[kind, ms] : c.ms)
        byKind[kind].push_back(ms);
    json.key("collectives_ms").beginObject();
    for (const auto &[kind, samples] : byKind)
      writeSummary(json, kind, samples);
    json.endObject();
    json.key("collective_counts").beginObject();
    if (!collectiveSteps.empty())
      for (const auto &[kind, n] : collectiveSteps.front().count)
        json.field(kind, n);
    json.endObject();
    bool sameOps = true;
    for (const CollectiveProfile &c : collectiveSteps)
      sameOps = sameOps && c.opsHash == collectiveSteps.front().opsHash;
    json.field(
        "step_ops_hash",
        hex64(collectiveSteps.empty() ? 0 : collectiveSteps.front().opsHash));
    json.field("step_ops_hash_stable", sameOps);
    writeP2P(json, rt);
  }
  if (err)
    writeError(json, err);
  json.endObject();
  letheRtDestroy(rt);
  return finish(o, json, err ? 1 : 0);
}

} // namespace lethe::rt::runner

//===- Runner.cpp - lethe-run: load a compiled program, run it, report
//-----===//
//
// A compiled program is a shared object exporting letheProgram() (see
// lethe-c/Runtime.h). The runner makes a runtime of the program's arena
// sizes and runs it in one of three modes:
//
//   timing    warm-up steps, N timed steps (eager, then as a CUDA graph), one
//             profiled step (per-stream busy time, copy bandwidth), memory;
//   checksum  init + one step + the program's checksums, repeated to check
//             they are stable, optionally compared with a second program;
//   dry-run   every call validated and counted, no device.
//
// It prints one JSON report (docs/Runtime.md). Exit codes: 0 ok, 1 runtime
// error, 2 usage or loading error, 3 checksum mismatch (or, with
// --expect-mismatch, none), 4 checksums not stable across repeats.
//
//===----------------------------------------------------------------------===//

#include "Json.h"
#include "RuntimeImpl.h"
#include "Samples.h"
#include "lethe/Runtime/Hash.h"
#include "lethe/Runtime/Tools.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>

using namespace lethe::rt;

namespace {

struct Options {
  std::string program, compareTo, jsonPath, tracePath, ncclIdFile;
  LetheRtMode mode = LETHE_MODE_TIMING;
  int steps = 20, warmup = 3, repeat = 2, device = -1, world = -1, rank = 0;
  int profileSteps = 1;
  bool graph = true, profile = true, replayGemms = false;
  bool expectMismatch = false;
};

const char *kUsage =
    "usage: lethe-run PROGRAM.so [options]\n"
    "  --mode=timing|checksum|dry-run  (timing)\n"
    "  --steps=N --warmup=N            timed and warm-up steps (20, 3)\n"
    "  --no-graph                      skip the CUDA-graph timing\n"
    "  --no-profile                    skip the profiled step\n"
    "  --profile-steps=N               profiled steps (1); medians reported\n"
    "  --replay-gemms                  GEMMs as replay kernels of their time\n"
    "  --repeat=N                      checksum runs that must agree (2)\n"
    "  --compare=OTHER.so              checksum mode: compare with OTHER\n"
    "  --expect-mismatch               with --compare: success = mismatch\n"
    "  --device=N --world=N --rank=R --nccl-id-file=PATH\n"
    "  --json=PATH --trace=PATH        also write the report / a Chrome "
    "trace\n";

bool parseInt(const std::string &text, int *out) {
  char *end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end)
    return false;
  *out = (int)v;
  return true;
}

bool parseOptions(int argc, char **argv, Options &o, std::string &err) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string name = arg, value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    bool ok = true;
    if (name == "--mode") {
      if (value == "timing")
        o.mode = LETHE_MODE_TIMING;
      else if (value == "checksum")
        o.mode = LETHE_MODE_CHECKSUM;
      else if (value == "dry-run")
        o.mode = LETHE_MODE_DRY_RUN;
      else
        ok = false;
    } else if (name == "--steps")
      ok = parseInt(value, &o.steps) && o.steps >= 1;
    else if (name == "--warmup")
      ok = parseInt(value, &o.warmup) && o.warmup >= 0;
    else if (name == "--profile-steps")
      ok = parseInt(value, &o.profileSteps) && o.profileSteps >= 1;
    else if (name == "--repeat")
      ok = parseInt(value, &o.repeat) && o.repeat >= 1;
    else if (name == "--device")
      ok = parseInt(value, &o.device);
    else if (name == "--world")
      ok = parseInt(value, &o.world) && o.world >= 1;
    else if (name == "--rank")
      ok = parseInt(value, &o.rank) && o.rank >= 0;
    else if (name == "--nccl-id-file")
      o.ncclIdFile = value;
    else if (name == "--compare")
      o.compareTo = value;
    else if (name == "--json")
      o.jsonPath = value;
    else if (name == "--trace")
      o.tracePath = value;
    else if (arg == "--no-graph")
      o.graph = false;
    else if (arg == "--no-profile")
      o.profile = false;
    else if (arg == "--replay-gemms")
      o.replayGemms = true;
    else if (arg == "--expect-mismatch")
      o.expectMismatch = true;
    else if (arg == "--help" || arg == "-h") {
      err = "";
      return false;
    } else if (!arg.empty() && arg[0] != '-' && o.program.empty())
      o.program = arg;
    else
      ok = false;
    if (!ok) {
      err = "bad argument '" + arg + "'";
      return false;
    }
  }
  if (o.program.empty()) {
    err = "no program given";
    return false;
  }
  if (!o.compareTo.empty() && o.mode != LETHE_MODE_CHECKSUM) {
    err = "--compare needs --mode=checksum";
    return false;
  }
  return true;
}

struct Program {
  std::string path;
  const LetheRtProgram *p = nullptr;
};

bool loadProgram(const std::string &path, Program &prog, std::string &err) {
  std::string open = path.find('/') == std::string::npos ? "./" + path : path;
  void *handle = dlopen(open.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    err = std::string("cannot load ") + path + ": " + dlerror();
    return false;
  }
  auto entry = reinterpret_cast<LetheRtProgramEntry>(
      dlsym(handle, LETHE_RT_PROGRAM_SYMBOL));
  if (!entry) {
    err = path + " exports no " LETHE_RT_PROGRAM_SYMBOL "()";
    return false;
  }
  prog.path = path;
  prog.p = entry();
  if (!prog.p || !prog.p->step) {
    err = path + ": " LETHE_RT_PROGRAM_SYMBOL "() gave no step function";
    return false;
  }
  if (prog.p->abiVersion != LETHE_RT_ABI_VERSION) {
    err = path + " was compiled against runtime ABI " +
          std::to_string(prog.p->abiVersion) + ", this runner has " +
          std::to_string(LETHE_RT_ABI_VERSION);
    return false;
  }
  return true;
}

/// The first error of a run, with the runtime's message when it has one.
struct RunError {
  LetheRtStatus status = LETHE_RT_OK;
  std::string message;
  explicit operator bool() const { return status != LETHE_RT_OK; }
};

RunError errorOf(LetheRt *rt, LetheRtStatus returned, const char *what) {
  RunError e;
  LetheRtStatus s = letheRtGetStatus(rt);
  if (s != LETHE_RT_OK) {
    e.status = s;
    e.message = letheRtGetErrorMessage(rt);
  } else if (returned != LETHE_RT_OK) {
    e.status = returned;
    e.message = std::string(what) + " returned " + letheRtStatusName(returned);
  }
  return e;
}

/// Creates the runtime, joins the communicator and runs init.
RunError setUp(const Program &prog, const Options &o, LetheRtMode mode,
               LetheRt **rt) {
  const LetheRtProgram &p = *prog.p;
  LetheRtConfig config;
  letheRtConfigInit(&config);
  config.mode = mode;
  config.device = o.device;
  config.deviceArenaBytes = p.deviceArenaBytes;
  config.hostArenaBytes = p.hostArenaBytes;
  config.numEvents = p.numEvents;
  config.replayGemms = o.replayGemms;
  LetheRtStatus s = letheRtCreate(&config, rt);
  if (s != LETHE_RT_OK)
    return errorOf(*rt, s, "letheRtCreate");
  if (p.worldSize > 0) {
    int world = o.world > 0 ? o.world : p.worldSize;
    if (world != p.worldSize)
      return {LETHE_RT_INVALID_ARGUMENT,
              prog.path + " was compiled for " + std::to_string(p.worldSize) +
                  " ranks, --world is " + std::to_string(world)};
    s = letheRtCommInit(*rt, world, o.rank,
                        o.ncclIdFile.empty() ? nullptr : o.ncclIdFile.c_str());
    if (s != LETHE_RT_OK)
      return errorOf(*rt, s, "letheRtCommInit");
  }
  if (p.init && (s = p.init(*rt)) != LETHE_RT_OK)
    return errorOf(*rt, s, "the program's init");
  return errorOf(*rt, letheRtSynchronize(*rt), "letheRtSynchronize");
}

LetheRtStatus enqueueStep(LetheRt *rt, const LetheRtProgram &p) {
  LetheRtStatus s = letheRtStepBegin(rt);
  if (s == LETHE_RT_OK)
    s = p.step(rt);
  if (s == LETHE_RT_OK)
    s = letheRtStepEnd(rt);
  return s;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", (unsigned long long)v);
  return buf;
}

void writeError(JsonWriter &json, const RunError &e) {
  json.field("error", e.message);
  json.field("status", letheRtStatusName(e.status));
}

int finish(const Options &o, JsonWriter &json, int code) {
  std::cout << json.str();
  if (!o.jsonPath.empty()) {
    std::ofstream out(o.jsonPath);
    out << json.str();
  }
  return code;
}

/// FNV-1a of a file's bytes (0 if unreadable): shows that every rank
/// loaded the same program.
uint64_t fileHash(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 1469598103934665603ull;
  char buf[65536];
  bool any = false;
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    any = true;
    for (std::streamsize i = 0; i < in.gcount(); ++i)
      h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
  }
  return any ? h : 0;
}

void writeProgram(JsonWriter &json, const Program &prog) {
  json.field("program", prog.p->name ? prog.p->name : "");
  json.field("path", prog.path);
  json.field("program_file_hash", hex64(fileHash(prog.path)));
  json.field("program_world_size", prog.p->worldSize);
}

void writeDevice(JsonWriter &json, LetheRt *rt) {
  json.key("device").beginObject();
  json.field("name", rt->deviceName);
  json.field("ordinal", rt->device);
  json.field("sms", rt->numSMs);
  json.field("sm_clock_mhz_nominal", rt->smClockKHz / 1000.0);
  json.field("sm_clock_mhz_measured", rt->cyclesPerUs);
  json.field("replay_floor_us", rt->replayFloorUs);
  json.field("copy_yield_mechanism", letheRtCopyYieldMechanism(rt));
  json.endObject();
}

void writeCounts(JsonWriter &json, const LetheRtStats &s) {
  json.key("counts").beginObject();
  json.field("ops_compute", s.opsPerStream[LETHE_STREAM_COMPUTE]);
  json.field("ops_d2h", s.opsPerStream[LETHE_STREAM_D2H]);
  json.field("ops_h2d", s.opsPerStream[LETHE_STREAM_H2D]);
  json.field("ops_comm", s.opsPerStream[LETHE_STREAM_COMM]);
  json.field("gemms", s.gemms);
  json.field("replays", s.replays);
  json.field("collectives", s.collectives);
  json.field("records", s.records);
  json.field("waits", s.waits);
  json.field("releases", s.releases);
  json.field("bytes_d2h", s.bytesD2H);
  json.field("bytes_h2d", s.bytesH2D);
  json.field("bytes_collective", s.bytesCollective);
  json.field("gemm_gflop", s.gemmFlops / 1e9);
  json.field("kernel_us_planned", s.kernelUs);
  json.field("device_high_water", s.deviceHighWater);
  json.field("host_high_water", s.hostHighWater);
  json.field("yielding_copies", s.yieldingCopies);
  json.field("copy_chunks", s.copyChunks);
  json.field("collective_windows", s.collectiveWindows);
  json.endObject();
}

/// The step's sends and receives in issue order, so that the reports of
/// two pipeline stages can be checked to pair up.
void writeP2P(JsonWriter &json, LetheRt *rt) {
  uint32_t count = letheRtNumP2P(rt);
  if (count == 0)
    return;
  json.key("p2p").beginArray();
  for (uint32_t i = 0; i < count; ++i) {
    LetheRtP2P p;
    if (letheRtGetP2P(rt, i, &p) != LETHE_RT_OK)
      break;
    json.beginObject();
    json.field("op", p.op);
    json.field("kind", p.isSend ? "send" : "recv");
    json.field("peer", (int)p.peer);
    json.field("bytes", p.bytes);
    json.field("group", (int)p.group);
    json.endObject();
  }
  json.endArray();
}

//===----------------------------------------------------------------------===//
// Dry run
//===----------------------------------------------------------------------===//

int runDry(const Options &o, const Program &prog) {
  JsonWriter json;
  json.beginObject();
  writeProgram(json, prog);
  json.field("mode", "dry-run");
  json.field("world", o.world > 0 ? o.world : prog.p->worldSize);
  json.field("rank", o.rank);
  LetheRt *rt = nullptr;
  RunError e = setUp(prog, o, LETHE_MODE_DRY_RUN, &rt);
  letheRtResetStats(rt); // count the step, not init
  if (!e)
    e = errorOf(rt, enqueueStep(rt, *prog.p), "the program's step");
  if (!e && prog.p->checksum)
    e = errorOf(rt, prog.p->checksum(rt), "the program's checksum");
  LetheRtStats stats;
  letheRtGetStats(rt, &stats);
  json.field("ok", !e);
  if (e)
    writeError(json, e);
  json.field("device_arena_bytes", prog.p->deviceArenaBytes);
  json.field("host_arena_bytes", prog.p->hostArenaBytes);
  json.field("checksums", (uint64_t)letheRtNumChecksums(rt));
  writeCounts(json, stats);
  writeP2P(json, rt);
  json.endObject();
  letheRtDestroy(rt);
  return finish(o, json, e ? 1 : 0);
}

//===----------------------------------------------------------------------===//
// Checksum mode
//===----------------------------------------------------------------------===//

using Checksums = std::vector<std::pair<std::string, uint64_t>>;

RunError checksumRun(const Options &o, const Program &prog, Checksums &out) {
  LetheRt *rt = nullptr;
  RunError e = setUp(prog, o, LETHE_MODE_CHECKSUM, &rt);
  if (!e)
    e = errorOf(rt, enqueueStep(rt, *prog.p), "the program's step");
  if (!e && prog.p->checksum)
    e = errorOf(rt, prog.p->checksum(rt), "the program's checksum");
  out.clear();
  for (uint32_t i = 0; !e && i < letheRtNumChecksums(rt); ++i) {
    const char *name = nullptr;
    uint64_t value = 0;
    e = errorOf(rt, letheRtGetChecksum(rt, i, &name, &value),
                "letheRtGetChecksum");
    if (!e)
      out.emplace_back(name, value);
  }
  letheRtDestroy(rt);
  return e;
}

uint64_t combine(const Checksums &sums) {
  uint64_t c = seedStart((uint32_t)sums.size());
  for (const auto &[name, value] : sums) {
    uint64_t h = 1469598103934665603ull; // FNV-1a of the name
    for (unsigned char ch : name)
      h = (h ^ ch) * 1099511628211ull;
    c = foldDigest(c, mix64(h) ^ value);
  }
  return c;
}

/// Runs `repeat` times; returns the first run's checksums and whether all
/// runs agreed.
RunError repeatedChecksums(const Options &o, const Program &prog,
                           Checksums &first, bool &stable) {
  stable = true;
  for (int r = 0; r < o.repeat; ++r) {
    Checksums sums;
    if (RunError e = checksumRun(o, prog, sums))
      return e;
    if (r == 0)
      first = sums;
    else if (sums != first)
      stable = false;
  }
  return {};
}

void writeChecksums(JsonWriter &json, const Checksums &sums) {
  json.key("checksums").beginObject();
  for (const auto &[name, value] : sums)
    json.field(name, hex64(value));
  json.endObject();
  json.field("combined", hex64(combine(sums)));
}

int runChecksum(const Options &o, const Program &prog) {
  JsonWriter json;
  json.beginObject();
  writeProgram(json, prog);
  json.field("mode", "checksum");
  json.field("repeats", o.repeat);
  Checksums sums;
  bool stable = true;
  if (RunError e = repeatedChecksums(o, prog, sums, stable)) {
    writeError(json, e);
    json.endObject();
    return finish(o, json, 1);
  }
  json.field("stable", stable);
  writeChecksums(json, sums);
  int code = 0;
  if (!o.compareTo.empty()) {
    Program other;
    std::string err;
    if (!loadProgram(o.compareTo, other, err)) {
      json.field("error", err);
      json.endObject();
      return finish(o, json, 2);
    }
    Checksums otherSums;
    bool otherStable = true;
    json.key("compare").beginObject();
    writeProgram(json, other);
    if (RunError e = repeatedChecksums(o, other, otherSums, otherStable)) {
      writeError(json, e);
      json.endObject();
      json.endObject();
      return finish(o, json, 1);
    }
    json.field("stable", otherStable);
    writeChecksums(json, otherSums);
    std::map<std::string, uint64_t> theirs(otherSums.begin(), otherSums.end());
    json.key("mismatched").beginArray();
    bool equal = sums.size() == otherSums.size();
    for (const auto &[name, value] : sums) {
      auto it = theirs.find(name);
      if (it == theirs.end() || it->second != value) {
        json.value(name);
        equal = false;
      }
    }
    json.endArray();
    json.endObject();
    json.field("equal", equal);
    json.field("expect_mismatch", o.expectMismatch);
    if (equal == o.expectMismatch)
      code = 3;
    if (!o.expectMismatch && (!stable || !otherStable) && code == 0)
      code = 4;
  } else if (!stable) {
    code = 4;
  }
  json.endObject();
  return finish(o, json, code);
}

//===----------------------------------------------------------------------===//
// Timing mode
//===----------------------------------------------------------------------===//

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

int runTiming(const Options &o, const Program &prog) {
  JsonWriter json;
  json.beginObject();
  writeProgram(json, prog);
  json.field("mode", "timing");
  json.field("world", o.world > 0 ? o.world : prog.p->worldSize);
  json.field("rank", o.rank);
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

} // namespace

int lethe::rt::runnerMain(int argc, char **argv) {
  Options o;
  std::string err;
  if (!parseOptions(argc, argv, o, err)) {
    if (!err.empty())
      std::cerr << "lethe-run: " << err << "\n";
    std::cerr << kUsage;
    return err.empty() ? 0 : 2;
  }
  Program prog;
  if (!loadProgram(o.program, prog, err)) {
    std::cerr << "lethe-run: " << err << "\n";
    return 2;
  }
  switch (o.mode) {
  case LETHE_MODE_DRY_RUN:
    return runDry(o, prog);
  case LETHE_MODE_CHECKSUM:
    return runChecksum(o, prog);
  default:
    return runTiming(o, prog);
  }
}

//===- Runner.cpp - lethe-run: load a compiled program, run it, report ---===//
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
// --expect-mismatch, none), 4 checksums not stable across repeats. Timing
// mode is in RunnerTiming.cpp.
//
//===----------------------------------------------------------------------===//

#include "Json.h"
#include "RunnerImpl.h"
#include "RuntimeImpl.h"
#include "Samples.h"
#include "lethe/Runtime/Hash.h"
#include "lethe/Runtime/Tools.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>

using namespace lethe::rt;
using namespace lethe::rt::runner;

namespace {

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
    "  --hw-queues=N|driver            hardware work queues, i.e.\n"
    "                                  CUDA_DEVICE_MAX_CONNECTIONS (1 for a\n"
    "                                  one-rank program, else the driver's;\n"
    "                                  the environment's value wins)\n"
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
    else if (name == "--hw-queues") {
      if (value == "driver")
        o.hwQueues = -1;
      else
        ok = parseInt(value, &o.hwQueues) && o.hwQueues >= 1 &&
             o.hwQueues <= 32; // the driver's own limit
    } else if (name == "--nccl-id-file")
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

} // namespace

namespace lethe::rt::runner {

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

void writeProgram(JsonWriter &json, const Program &prog) {
  json.field("program", prog.p->name ? prog.p->name : "");
  json.field("path", prog.path);
  json.field("program_file_hash", hex64(fileHash(prog.path)));
  json.field("program_world_size", prog.p->worldSize);
}

void writeRankRun(JsonWriter &json, const Options &o, const Program &prog,
                  const char *mode) {
  writeProgram(json, prog);
  json.field("mode", mode);
  json.field("world", o.world > 0 ? o.world : prog.p->worldSize);
  json.field("rank", o.rank);
  json.field("hw_queues", o.hwQueuesUsed);
  json.field("hw_queues_from", o.hwQueuesFrom);
}

void writeDevice(JsonWriter &json, LetheRt *rt) {
  json.key("device").beginObject();
  json.field("name", rt->deviceName);
  json.field("ordinal", rt->device);
  json.field("sms", rt->numSMs);
  json.field("sm_clock_mhz_nominal", rt->smClockKHz / 1000.0);
  json.field("sm_clock_mhz_measured", rt->cyclesPerUs);
  json.field("replay_floor_us", rt->replayFloorUs);
  json.field("graph_replay_floor_us", rt->graphReplayFloorUs);
  json.field("replay_floor_host_bound_rounds", rt->replayFloorHostBoundRounds);
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

} // namespace lethe::rt::runner

namespace {

//===----------------------------------------------------------------------===//
// Dry run
//===----------------------------------------------------------------------===//

int runDry(const Options &o, const Program &prog) {
  JsonWriter json;
  json.beginObject();
  writeRankRun(json, o, prog, "dry-run");
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

} // namespace

/// How many hardware work queues the process's CUDA context gets
/// (CUDA_DEVICE_MAX_CONNECTIONS, read once when the context is created, so
/// it is set here, before the first CUDA call). A one-rank program gets 1:
/// on an H100 (2026-11-26, bench/results/fidelity.md) planned programs
/// replayed as CUDA graphs ran 4-9% slower with the driver's 8 queues than
/// with one (GPT-2-medium at 70%: 115.2 vs 107.7 ms; Swin-T: 39.0 vs 36.4),
/// their eager steps and unplanned programs the same within 1%: with one
/// queue the GPU takes the copies and kernels in the order the plan issued
/// them. Multi-rank programs keep the driver's: the copy-yield waits
/// (CopyYield.cpp) sit in a queue until the comm stream writes the flag,
/// and one shared queue could hold that write behind them.
static void chooseHardwareQueues(Options &o, const Program &prog) {
  if (const char *env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) {
    o.hwQueuesUsed = env;
    o.hwQueuesFrom = "environment";
    return;
  }
  int world = o.world > 0 ? o.world : std::max(1, prog.p->worldSize);
  int queues = o.hwQueues != 0 ? o.hwQueues : (world == 1 ? 1 : -1);
  o.hwQueuesFrom = o.hwQueues != 0 ? "--hw-queues" : "default";
  if (queues < 0) {
    o.hwQueuesUsed = "driver";
    return;
  }
  o.hwQueuesUsed = std::to_string(queues);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", o.hwQueuesUsed.c_str(),
         /*overwrite=*/1);
}

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
  chooseHardwareQueues(o, prog);
  switch (o.mode) {
  case LETHE_MODE_DRY_RUN:
    return runDry(o, prog);
  case LETHE_MODE_CHECKSUM:
    return runChecksum(o, prog);
  default:
    return runTiming(o, prog);
  }
}

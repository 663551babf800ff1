//===- Calibrate.cpp - lethe-calibrate: measure the GPU, write a profile --===//
//
// The tool's entry point (tools/lethe-calibrate is a thin main over it):
// options, the order of the measurements, the lane timer they share, and
// writing the profile. See docs/CostModel.md ("Calibrating a device").
//
//===----------------------------------------------------------------------===//

#include "CalibrateImpl.h"
#include "Kernels.h"
#include "Samples.h"
#include "lethe/Runtime/Tools.h"

#include <cublasLt.h>
#if LETHE_RT_HAVE_NCCL
#include <nccl.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <set>

using namespace lethe::rt;
using namespace lethe::rt::calibrate;

//===----------------------------------------------------------------------===//
// The lane timer
//===----------------------------------------------------------------------===//

namespace {
/// A gated round enqueues at most kMaxOpsPerStream operations per stream
/// (well under a millisecond of host time); a gate still closed after this
/// long means the host blocked, and the round is measured without it.
constexpr uint64_t kGateTimeoutNs = 5'000'000'000ull;

double median(std::vector<double> v) { return summarize(std::move(v)).median; }

std::set<int> devicesOf(const std::vector<Lane> &lanes) {
  std::set<int> devices;
  for (const Lane &lane : lanes)
    for (const Endpoint &ep : lane.endpoints)
      devices.insert(ep.device);
  return devices;
}
} // namespace

LaneTimer::~LaneTimer() {
  for (auto &[device, e] : starts) {
    cudaSetDevice(device);
    cudaEventDestroy(e);
  }
  for (size_t i = 0; i < pool.size(); ++i) {
    cudaSetDevice(poolDevice[i]);
    cudaEventDestroy(pool[i]);
  }
  if (words)
    cudaFreeHost(words);
}

bool LaneTimer::init() {
  void *p = nullptr;
  if (!errors.cuda(
          cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc(start gate)"))
    return false;
  words = static_cast<uint32_t *>(p);
  words[0] = words[1] = 0;
  return true;
}

cudaEvent_t LaneTimer::event(int device, size_t index) {
  // Events of one device in pool order; index counts that device's events.
  size_t seen = 0;
  for (size_t i = 0; i < pool.size(); ++i)
    if (poolDevice[i] == device && seen++ == index)
      return pool[i];
  cudaEvent_t e = nullptr;
  errors.cuda(cudaSetDevice(device), "cudaSetDevice");
  errors.cuda(cudaEventCreate(&e), "cudaEventCreate");
  pool.push_back(e);
  poolDevice.push_back(device);
  return e;
}

void LaneTimer::note(const std::string &why) {
  std::string line = (phase.empty() ? "measurement" : phase) + ": " + why;
  if (std::find(m.ungated.begin(), m.ungated.end(), line) == m.ungated.end())
    m.ungated.push_back(line);
}

void LaneTimer::ungatedRound(const std::vector<Lane> &lanes,
                             std::vector<double> &ms) {
  // Each lane from an event recorded before its enqueue on its first
  // stream; its other streams wait for that event. CUDA times only events
  // of one device, so a lane over several GPUs also records a begin event
  // on each other GPU's first stream, after that stream's wait.
  std::map<int, size_t> used;
  std::vector<std::vector<cudaEvent_t>> begins(lanes.size()),
      ends(lanes.size());
  for (size_t i = 0; errors.ok() && i < lanes.size(); ++i) {
    const Lane &lane = lanes[i];
    const Endpoint &first = lane.endpoints.front();
    std::vector<int> devices;
    for (const Endpoint &ep : lane.endpoints)
      devices.push_back(ep.device);
    std::vector<size_t> origin = timingOrigins(devices);
    begins[i].assign(lane.endpoints.size(), nullptr);
    begins[i][0] = event(first.device, used[first.device]++);
    errors.cuda(cudaSetDevice(first.device), "cudaSetDevice");
    errors.cuda(cudaEventRecord(begins[i][0], first.stream), "cudaEventRecord");
    for (size_t j = 1; j < lane.endpoints.size(); ++j) {
      const Endpoint &ep = lane.endpoints[j];
      if (ep.stream != first.stream) {
        errors.cuda(cudaSetDevice(ep.device), "cudaSetDevice");
        errors.cuda(cudaStreamWaitEvent(ep.stream, begins[i][0], 0),
                    "cudaStreamWaitEvent");
      }
      if (origin[j] == j) {
        begins[i][j] = event(ep.device, used[ep.device]++);
        errors.cuda(cudaSetDevice(ep.device), "cudaSetDevice");
        errors.cuda(cudaEventRecord(begins[i][j], ep.stream),
                    "cudaEventRecord");
      } else {
        begins[i][j] = begins[i][origin[j]];
      }
    }
    errors.cuda(cudaSetDevice(first.device), "cudaSetDevice");
    lane.enqueue();
    for (const Endpoint &ep : lane.endpoints) {
      cudaEvent_t e = event(ep.device, used[ep.device]++);
      errors.cuda(cudaSetDevice(ep.device), "cudaSetDevice");
      errors.cuda(cudaEventRecord(e, ep.stream), "cudaEventRecord");
      ends[i].push_back(e);
    }
  }
  for (int device : devicesOf(lanes)) {
    cudaSetDevice(device);
    errors.cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  ms.assign(lanes.size(), 0);
  for (size_t i = 0; errors.ok() && i < lanes.size(); ++i)
    for (size_t j = 0; j < ends[i].size(); ++j) {
      float t = 0;
      errors.cuda(cudaSetDevice(lanes[i].endpoints[j].device), "cudaSetDevice");
      errors.cuda(cudaEventElapsedTime(&t, begins[i][j], ends[i][j]),
                  "cudaEventElapsedTime");
      ms[i] = std::max(ms[i], (double)t);
    }
}

bool LaneTimer::gatedRound(const std::vector<Lane> &lanes,
                           const std::map<int, cudaStream_t> &gateStream,
                           std::vector<double> &ms) {
  // Every event this round records exists before the gate closes
  // (cudaEventCreate may wait for the device).
  std::map<int, size_t> need;
  for (const Lane &lane : lanes)
    for (const Endpoint &ep : lane.endpoints)
      ++need[ep.device];
  for (auto &[device, n] : need)
    event(device, n - 1);
  if (!errors.ok())
    return true;

  __atomic_store_n(&words[0], 0u, __ATOMIC_SEQ_CST);
  __atomic_store_n(&words[1], 0u, __ATOMIC_SEQ_CST);
  for (auto &[device, stream] : gateStream) {
    errors.cuda(cudaSetDevice(device), "cudaSetDevice");
    errors.cuda(launchGate(words, words + 1, kGateTimeoutNs, stream),
                "start gate launch");
    errors.cuda(cudaEventRecord(starts[device], stream), "cudaEventRecord");
  }
  std::map<int, size_t> used;
  std::vector<std::vector<cudaEvent_t>> ends(lanes.size());
  for (size_t i = 0; errors.ok() && i < lanes.size(); ++i) {
    const Lane &lane = lanes[i];
    for (const Endpoint &ep : lane.endpoints)
      if (ep.stream != gateStream.at(ep.device)) {
        errors.cuda(cudaSetDevice(ep.device), "cudaSetDevice");
        errors.cuda(cudaStreamWaitEvent(ep.stream, starts[ep.device], 0),
                    "cudaStreamWaitEvent");
      }
    errors.cuda(cudaSetDevice(lane.endpoints.front().device), "cudaSetDevice");
    lane.enqueue();
    for (const Endpoint &ep : lane.endpoints) {
      cudaEvent_t e = event(ep.device, used[ep.device]++);
      errors.cuda(cudaSetDevice(ep.device), "cudaSetDevice");
      errors.cuda(cudaEventRecord(e, ep.stream), "cudaEventRecord");
      ends[i].push_back(e);
    }
  }
  // Opens the gates even after an error, so nothing waits for them.
  __atomic_store_n(&words[0], 1u, __ATOMIC_SEQ_CST);
  for (auto &[device, stream] : gateStream) {
    cudaSetDevice(device);
    errors.cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  if (__atomic_load_n(&words[1], __ATOMIC_SEQ_CST))
    return false;
  ms.assign(lanes.size(), 0);
  for (size_t i = 0; errors.ok() && i < lanes.size(); ++i)
    for (size_t j = 0; j < ends[i].size(); ++j) {
      float t = 0;
      int device = lanes[i].endpoints[j].device;
      errors.cuda(cudaSetDevice(device), "cudaSetDevice");
      errors.cuda(cudaEventElapsedTime(&t, starts[device], ends[i][j]),
                  "cudaEventElapsedTime");
      ms[i] = std::max(ms[i], (double)t);
    }
  return true;
}

LaneTimer::Setup LaneTimer::prepare(const std::vector<Lane> &lanes) {
  Setup setup;
  // The gate of each device holds the first stream a lane starts on there.
  std::vector<std::pair<uint64_t, int>> ops;
  for (const Lane &lane : lanes)
    for (const Endpoint &ep : lane.endpoints) {
      setup.gateStream.emplace(ep.device, ep.stream);
      ops.push_back({(uint64_t)(uintptr_t)ep.stream, lane.ops});
    }
  setup.gated = !noGate && !gateTimedOut;
  if (setup.gated && busiestStreamOps(ops) > kMaxOpsPerStream) {
    note("a round enqueues " + std::to_string(busiestStreamOps(ops)) +
         " operations on one stream (over " + std::to_string(kMaxOpsPerStream) +
         "); measured without the gate");
    setup.gated = false;
  }
  if (noGate)
    note("--no-gate");
  else if (gateTimedOut)
    note("a start gate timed out earlier; measured without the gate");
  for (auto &[device, stream] : setup.gateStream)
    if (!starts.count(device)) {
      cudaEvent_t e = nullptr;
      errors.cuda(cudaSetDevice(device), "cudaSetDevice");
      errors.cuda(cudaEventCreate(&e), "cudaEventCreate");
      starts[device] = e;
    }
  // The gate kernel runs once, open, on each device before it ever holds
  // one: its first launch loads it.
  if (setup.gated)
    for (auto &[device, stream] : setup.gateStream)
      if (!gateLoaded[device] && errors.ok()) {
        __atomic_store_n(&words[0], 1u, __ATOMIC_SEQ_CST);
        errors.cuda(cudaSetDevice(device), "cudaSetDevice");
        errors.cuda(launchGate(words, words + 1, kGateTimeoutNs, stream),
                    "start gate launch");
        errors.cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        gateLoaded[device] = true;
      }
  return setup;
}

std::vector<double> LaneTimer::run(const std::vector<Lane> &lanes, int reps) {
  return runInterleaved({lanes}, reps)[0];
}

std::vector<std::vector<double>>
LaneTimer::runInterleaved(const std::vector<std::vector<Lane>> &sets,
                          int reps) {
  std::vector<std::vector<std::vector<double>>> samples =
      runInterleavedSamples(sets, reps);
  std::vector<std::vector<double>> result(sets.size());
  for (size_t k = 0; k < sets.size(); ++k)
    for (auto &s : samples[k])
      result[k].push_back(median(s));
  return result;
}

std::vector<std::vector<std::vector<double>>>
LaneTimer::runInterleavedSamples(const std::vector<std::vector<Lane>> &sets,
                                 int reps) {
  std::vector<Setup> setups;
  for (const std::vector<Lane> &lanes : sets)
    setups.push_back(prepare(lanes));
  // samples[set][lane]
  std::vector<std::vector<std::vector<double>>> samples(sets.size());
  for (size_t k = 0; k < sets.size(); ++k)
    samples[k].resize(sets[k].size());

  std::vector<double> ms;
  // Round 0, the warm-up, never holds at a gate: what the lanes call first
  // (lazily loaded kernels, cuBLASLt, NCCL connections, graph uploads) may
  // wait for the device to drain.
  for (int round = 0; errors.ok() && round <= reps; ++round)
    for (size_t k : interleavedOrder(sets.size(), round)) {
      if (!errors.ok())
        break;
      const std::vector<Lane> &lanes = sets[k];
      Setup &setup = setups[k];
      if (round == 0 || !setup.gated) {
        ungatedRound(lanes, ms);
      } else if (!gatedRound(lanes, setup.gateStream, ms)) {
        note("a start gate stayed closed " +
             std::to_string(kGateTimeoutNs / 1'000'000'000ull) +
             " s (the host blocked while enqueueing); this and what follows "
             "measured without the gate");
        // Once is enough: another 5 s a measurement would break the time
        // budget. Every set drops its gated samples, so the sets compared
        // are measured alike.
        gateTimedOut = true;
        for (size_t o = 0; o < sets.size(); ++o)
          if (setups[o].gated) {
            setups[o].gated = false;
            for (auto &s : samples[o])
              s.clear();
          }
        ungatedRound(lanes, ms); // the round the gate lost
      }
      if (round > 0 && errors.ok())
        for (size_t i = 0; i < lanes.size(); ++i)
          samples[k][i].push_back(ms[i]);
    }
  return samples;
}

std::string calibrate::softwareVersions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  std::string s = "CUDA runtime " + version(runtime) + ", driver API " +
                  version(driver) + ", cuBLASLt " +
                  std::to_string(cublasLtGetVersion());
#if LETHE_RT_HAVE_NCCL
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    s += ", NCCL " + std::to_string(nccl / 10000) + "." +
         std::to_string(nccl / 100 % 100) + "." + std::to_string(nccl % 100);
#endif
  return s;
}

//===----------------------------------------------------------------------===//
// The tool
//===----------------------------------------------------------------------===//

namespace {

const char *kUsage =
    "usage: lethe-calibrate [--out FILE] [--samples FILE] [--base FILE]\n"
    "                       [--name NAME] [--gpus N] [--quick] [--no-gate]\n"
    "Measures the GPUs it runs on and writes a device profile (the JSON of\n"
    "devices/*.json; docs/CostModel.md). Prints a summary; takes about a\n"
    "minute on one GPU (--quick: fewer sizes and samples).\n"
    "  --out FILE      write the profile (what --device FILE takes)\n"
    "  --samples FILE  write the raw measurements as JSON\n"
    "  --base FILE     a profile whose fields this does not measure\n"
    "                  (kernel efficiencies, dtypes it cannot run, the\n"
    "                  pinned-host budget) are carried over, with its notes\n"
    "  --name NAME     the profile's name (default: the base's, else one\n"
    "                  made from the device name)\n"
    "  --gpus N        measure the first N visible GPUs together (default\n"
    "                  all; 1: one GPU only, the others untouched).\n"
    "                  CUDA_VISIBLE_DEVICES picks them\n"
    "  --quick         fewer copy sizes and samples\n"
    "  --no-gate       never hold the GPUs at a start gate: time each lane\n"
    "                  from before its host enqueue (slightly pessimistic)\n";

int usageError(const std::string &message) {
  std::cerr << "lethe-calibrate: " << message << "\n" << kUsage;
  return 2;
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

/// Writes `text` to `path` whole or not at all (a temporary, renamed).
bool writeFile(const std::string &path, const std::string &text,
               std::string &error) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      error = path + ": cannot write";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = path + ": cannot write";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

} // namespace

int lethe::rt::calibrateMain(int argc, char **argv) {
  auto begin = std::chrono::steady_clock::now();
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool inlineValue = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    auto next = [&](std::string &into) {
      if (inlineValue) {
        into = value;
      } else if (i + 1 < argc) {
        into = argv[++i];
      } else {
        return false;
      }
      return !into.empty();
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--quick" && !inlineValue) {
      options.quick = true;
    } else if (arg == "--no-gate" && !inlineValue) {
      options.noGate = true;
    } else if (arg == "--out" || arg == "--samples" || arg == "--base" ||
               arg == "--name") {
      std::string *into = arg == "--out"       ? &options.out
                          : arg == "--samples" ? &options.samples
                          : arg == "--base"    ? &options.base
                                               : &options.name;
      if (!next(*into))
        return usageError(arg + " needs a value");
    } else if (arg == "--gpus") {
      std::string n;
      char *end = nullptr;
      long gpus = next(n) ? std::strtol(n.c_str(), &end, 10) : 0;
      if (n.empty() || *end || gpus < 1)
        return usageError("--gpus needs a positive number, got '" + n + "'");
      options.gpus = (int)gpus;
    } else {
      return usageError("unknown argument '" + std::string(argv[i]) + "'");
    }
  }

  // Read the base first: a bad base fails before a minute of measuring.
  BaseProfile base;
  std::string error;
  if (!options.base.empty() && !loadBaseProfile(options.base, base, error)) {
    std::cerr << "lethe-calibrate: " << error << "\n";
    return 1;
  }
  // Copies are measured whole; a forced chunk size would change them all.
  if (std::getenv("LETHE_COPY_YIELD")) {
    std::cerr << "lethe-calibrate: ignoring LETHE_COPY_YIELD (copies are "
                 "measured whole)\n";
    unsetenv("LETHE_COPY_YIELD");
  }

  // --gpus N: the process sees only the first N GPUs, so CUDA creates no
  // context and maps no pinned memory on the others.
  if (options.gpus) {
    std::vector<std::string> ids;
    if (const char *env = std::getenv("CUDA_VISIBLE_DEVICES"); env && *env) {
      std::string list = env;
      for (size_t at = 0; at <= list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        ids.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      for (int d = 0; d < options.gpus; ++d)
        ids.push_back(std::to_string(d));
    }
    if ((int)ids.size() > options.gpus)
      ids.resize(options.gpus);
    std::string visible;
    for (const std::string &id : ids)
      visible += (visible.empty() ? "" : ",") + id;
    setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
  }

  Measurements m;
  m.quick = options.quick;
  m.noGate = options.noGate;
  m.date = today();
  Errors errors;
  int visible = 0;
  cudaError_t err = cudaGetDeviceCount(&visible);
  if (err != cudaSuccess || visible == 0) {
    std::cerr << "lethe-calibrate: no CUDA device: "
              << (err != cudaSuccess ? cudaGetErrorString(err) : "none visible")
              << "\n";
    return 1;
  }
  if (options.gpus > visible) {
    std::cerr << "lethe-calibrate: --gpus " << options.gpus << " asked, but "
              << visible << " GPU" << (visible > 1 ? "s are" : " is")
              << " visible\n";
    return 1;
  }
  m.gpus = options.gpus ? options.gpus : visible;
  m.software = softwareVersions();
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  m.hostMemoryBytes = pages > 0 && pageSize > 0 ? (double)pages * pageSize : 0;

  // One GPU through the runtime (its copies, GEMMs and replay kernels are
  // what compiled programs run); freed before the host-wide measurements.
  {
    uint64_t copy = (options.quick ? 256ull : 1024ull) << 20;
    uint64_t memoryHalf = (options.quick ? 256ull : 512ull) << 20;
    LetheRtConfig config;
    letheRtConfigInit(&config);
    config.device = 0;
    config.deviceArenaBytes = 2 * copy + (768ull << 20) + 2 * memoryHalf;
    config.hostArenaBytes = 2 * copy;
    LetheRt *rt = nullptr;
    if (letheRtCreate(&config, &rt) != LETHE_RT_OK) {
      std::cerr << "lethe-calibrate: " << letheRtGetErrorMessage(rt) << "\n";
      letheRtDestroy(rt);
      return 1;
    }
    std::cerr << "lethe-calibrate: " << rt->deviceName << ", " << m.gpus
              << " GPU" << (m.gpus > 1 ? "s" : "") << "; measuring...\n";
    measureOneGpu(options, rt, m, errors);
    letheRtDestroy(rt);
  }
  if (errors.ok() && m.gpus > 1)
    measureHost(options, m.gpus, m, errors);
  if (!errors.ok()) {
    std::cerr << "lethe-calibrate: " << errors.first << "\n";
    return 1;
  }

  std::vector<ProfileField> fields =
      deriveProfile(m, options.base.empty() ? nullptr : &base, options.name);
  std::cout << summarize(m, fields);
  if (!options.samples.empty() &&
      !writeFile(options.samples, writeSamples(m), error)) {
    std::cerr << "lethe-calibrate: " << error << "\n";
    return 1;
  }
  if (!options.out.empty()) {
    if (!writeFile(options.out, writeProfile(fields), error)) {
      std::cerr << "lethe-calibrate: " << error << "\n";
      return 1;
    }
    std::cout << "\nwrote " << options.out << " (load it with --device "
              << options.out << ")\n";
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  std::cout << "elapsed: " << (int)(seconds * 10) / 10.0 << " s\n";
  return 0;
}

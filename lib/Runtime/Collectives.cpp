//===- Collectives.cpp - NCCL communicator and collectives
//-----------------===//
//
// One process per GPU. Rank 0 makes the ncclUniqueId and publishes it as
// hex, in a file (written to a temporary name, then renamed, so readers
// never see half of it) or through $LETHE_NCCL_ID; the other ranks read it
// and check in, so that rank 0 knows every rank started before it joins.
// Every NCCL call runs under the watchdog (Watchdog.cpp).
// Collectives run on the comm stream. In checksum mode they move and sum
// raw integers (exact in any order), so their outputs are a deterministic
// function of every rank's inputs whatever bits the tensors hold.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

#if LETHE_RT_HAVE_NCCL
#include <nccl.h>
#endif

using namespace lethe::rt;

namespace lethe::rt {

#if LETHE_RT_HAVE_NCCL
struct CommState {
  ncclComm_t comm = nullptr;
  int worldSize = 1;
  int rank = 0;
  /// Set once ncclCommInitRank returned `comm`; cleared by the abort. The
  /// watchdog thread reads it while the main thread is blocked.
  std::atomic<bool> ready{false};
  /// ncclCommAbort freed `comm`: it must not be destroyed again.
  std::atomic<bool> aborted{false};
};

static LetheRtStatus checkNccl(LetheRt *rt, ncclResult_t result,
                               const std::string &at, const char *call) {
  if (result == ncclSuccess)
    return LETHE_RT_OK;
  std::string detail = ncclGetErrorString(result);
  if (rt->comm && rt->comm->comm) {
    const char *last = ncclGetLastError(rt->comm->comm);
    if (last && *last)
      detail += std::string(": ") + last;
  }
  return fail(rt, LETHE_RT_NCCL_ERROR, at + ": " + call + " failed: " + detail);
}

void destroyCommState(LetheRt *rt) {
  if (!rt->comm)
    return;
  // After a failure a peer may be gone, and ncclCommDestroy's flush would
  // wait for it: abort instead.
  if (rt->comm->comm && !rt->comm->aborted) {
    if (rt->status == LETHE_RT_OK)
      ncclCommDestroy(rt->comm->comm);
    else
      ncclCommAbort(rt->comm->comm);
  }
  delete rt->comm;
  rt->comm = nullptr;
}

bool commReady(const LetheRt *rt) { return rt->comm && rt->comm->ready; }

std::string commAsyncError(const LetheRt *rt) {
  if (!commReady(rt))
    return "";
  ncclResult_t async = ncclSuccess;
  ncclResult_t result = ncclCommGetAsyncError(rt->comm->comm, &async);
  if (result != ncclSuccess)
    async = result;
  if (async == ncclSuccess || async == ncclInProgress)
    return "";
  std::string detail = ncclGetErrorString(async);
  if (const char *last = ncclGetLastError(rt->comm->comm); last && *last)
    detail += std::string(": ") + last;
  return detail;
}

void abortComm(LetheRt *rt) {
  if (!rt->comm || !rt->comm->ready.exchange(false))
    return;
  rt->comm->aborted = true;
  ncclCommAbort(rt->comm->comm);
}
#else
struct CommState {};
void destroyCommState(LetheRt *rt) {
  delete rt->comm;
  rt->comm = nullptr;
}
bool commReady(const LetheRt *) { return false; }
std::string commAsyncError(const LetheRt *) { return ""; }
void abortComm(LetheRt *) {}
#endif

} // namespace lethe::rt

#if LETHE_RT_HAVE_NCCL
static std::string toHex(const ncclUniqueId &id) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : id.internal) {
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return hex;
}

static bool fromHex(const std::string &hex, ncclUniqueId *id) {
  if (hex.size() < 2 * sizeof(id->internal))
    return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    unsigned value = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &value) != 1)
      return false;
    id->internal[i] = (char)value;
  }
  return true;
}

/// Writes `text` to `path` through a temporary name, so that a reader never
/// sees half of it.
static bool publish(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.good())
      return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

/// Where rank `rank` checks in once it has read the id.
static std::string checkInPath(const char *file, int rank) {
  return std::string(file) + ".joined." + std::to_string(rank);
}

/// Polls `done` every 10 ms for up to rt->timeoutS; whether it held.
template <typename Done> static bool pollFor(LetheRt *rt, Done done) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds((int64_t)(rt->timeoutS * 1000));
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// Rank 0 makes the id, publishes it and waits until every other rank has
/// checked in; the others read it and check in. ncclCommInitRank waits for
/// all ranks without a bound, so a rank that never starts must be caught
/// here, where each side can still say which rank is missing.
static LetheRtStatus rendezvous(LetheRt *rt, const std::string &at,
                                int worldSize, int rank, const char *file,
                                ncclUniqueId *id) {
  if (worldSize == 1 && !file && !std::getenv("LETHE_NCCL_ID"))
    return checkNccl(rt, ncclGetUniqueId(id), at, "ncclGetUniqueId");
  if (!file) {
    const char *env = std::getenv("LETHE_NCCL_ID");
    if (!env)
      return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                  at + ": no rendezvous file given and $LETHE_NCCL_ID unset");
    if (!fromHex(env, id))
      return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                  at + ": $LETHE_NCCL_ID is not " +
                      std::to_string(2 * sizeof(id->internal)) + " hex digits");
    return LETHE_RT_OK;
  }
  if (rank == 0) {
    // Check-ins left by an earlier run with this file do not count.
    for (int r = 1; r < worldSize; ++r)
      std::remove(checkInPath(file, r).c_str());
    if (checkNccl(rt, ncclGetUniqueId(id), at, "ncclGetUniqueId"))
      return rt->status;
    if (!publish(file, toHex(*id) + "\n"))
      return fail(rt, LETHE_RT_IO_ERROR,
                  at + ": cannot write the rendezvous file " + file);
    std::vector<int> missing;
    bool joined = pollFor(rt, [&] {
      missing.clear();
      for (int r = 1; r < worldSize; ++r)
        if (std::ifstream(checkInPath(file, r)).fail())
          missing.push_back(r);
      return missing.empty();
    });
    if (!joined) {
      std::string ranks;
      for (int r : missing)
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      return fail(rt, LETHE_RT_TIMEOUT,
                  at + ": rank " + ranks + " did not join within " +
                      timeoutText(rt) + " (no check-in " +
                      checkInPath(file, missing.front()) +
                      "): it never started or died before the rendezvous");
    }
    for (int r = 1; r < worldSize; ++r)
      std::remove(checkInPath(file, r).c_str());
    return LETHE_RT_OK;
  }
  bool read = pollFor(rt, [&] {
    std::ifstream in(file);
    std::string hex;
    return in && (in >> hex) && fromHex(hex, id);
  });
  if (!read)
    return fail(rt, LETHE_RT_TIMEOUT,
                at + ": rank 0 did not publish the rendezvous file " + file +
                    " within " + timeoutText(rt) +
                    ": it never started or died before the rendezvous");
  if (!publish(checkInPath(file, rank), std::to_string(getpid()) + "\n"))
    return fail(rt, LETHE_RT_IO_ERROR,
                at + ": cannot write the check-in " + checkInPath(file, rank));
  return LETHE_RT_OK;
}

static ncclDataType_t ncclTypeOf(LetheRtDType dtype) {
  switch (dtype) {
  case LETHE_DTYPE_F32:
    return ncclFloat32;
  case LETHE_DTYPE_F16:
    return ncclFloat16;
  case LETHE_DTYPE_BF16:
    return ncclBfloat16;
  default:
    return ncclUint8;
  }
}
#endif

extern "C" LetheRtStatus letheRtCommInit(LetheRt *rt, int worldSize, int rank,
                                         const char *uniqueIdFile) {
  if (!rt)
    return LETHE_RT_INVALID_ARGUMENT;
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  std::string at = "letheRtCommInit(rank " + std::to_string(rank) + " of " +
                   std::to_string(worldSize) + ")";
  if (worldSize < 1 || rank < 0 || rank >= worldSize)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": rank must be in [0, worldSize)");
  if (rt->comm)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": a communicator already exists");
#if LETHE_RT_HAVE_NCCL
  rt->comm = new CommState();
  rt->comm->worldSize = worldSize;
  rt->comm->rank = rank;
  if (rt->dryRun)
    return LETHE_RT_OK;
  ncclUniqueId id;
  if (rendezvous(rt, at, worldSize, rank, uniqueIdFile, &id))
    return rt->status;
  size_t freeBefore = 0, freeAfter = 0, total = 0;
  if (checkCuda(rt, cudaMemGetInfo(&freeBefore, &total), at, "cudaMemGetInfo"))
    return rt->status;
  {
    // Unbounded inside NCCL if a rank dies between its check-in and here:
    // the watchdog then ends the process (there is no communicator yet to
    // abort).
    BlockingCall call(rt, at, "ncclCommInitRank");
    ncclResult_t result =
        ncclCommInitRank(&rt->comm->comm, worldSize, id, rank);
    if (call.finish() || checkNccl(rt, result, at, "ncclCommInitRank"))
      return rt->status;
  }
  rt->comm->ready = true;
  if (checkCuda(rt, cudaMemGetInfo(&freeAfter, &total), at, "cudaMemGetInfo"))
    return rt->status;
  rt->ncclBytes = freeBefore > freeAfter ? freeBefore - freeAfter : 0;
  return LETHE_RT_OK;
#else
  (void)uniqueIdFile;
  return fail(rt, LETHE_RT_UNSUPPORTED,
              at + ": this runtime was built without NCCL");
#endif
}

enum class Collective { AllGather, ReduceScatter, AllReduce };

static LetheRtStatus collective(LetheRt *rt, Collective kind, const char *op,
                                LetheRtBuf send, LetheRtBuf recv,
                                LetheRtDType dtype) {
  if (!rt)
    return LETHE_RT_INVALID_ARGUMENT;
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  const char *api = kind == Collective::AllGather       ? "letheRtAllGather"
                    : kind == Collective::ReduceScatter ? "letheRtReduceScatter"
                                                        : "letheRtAllReduce";
  std::string at = where(api, op);
  if (!rt->comm)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": no communicator (call letheRtCommInit first)");
  if (rt->p2pGroupOpen)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": inside a point-to-point group (call letheRtGroupEnd "
                     "first)");
  if (!isFloatDType(dtype) && dtype != LETHE_DTYPE_RAW)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": unknown dtype " + std::to_string((int)dtype));
  if (!checkBuf(rt, at, "send", send, false, 16) ||
      !checkBuf(rt, at, "recv", recv, false, 16))
    return rt->status;
#if LETHE_RT_HAVE_NCCL
  uint64_t world = (uint64_t)rt->comm->worldSize;
  uint64_t expected = kind == Collective::AllGather       ? send.bytes * world
                      : kind == Collective::ReduceScatter ? send.bytes / world
                                                          : send.bytes;
  if (recv.bytes != expected ||
      (kind == Collective::ReduceScatter && send.bytes % world != 0))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": send holds " + std::to_string(send.bytes) +
                    " bytes and recv " + std::to_string(recv.bytes) +
                    "; over " + std::to_string(world) + " ranks recv needs " +
                    std::to_string(expected));
  uint64_t elt = dtypeSize(dtype);
  uint64_t recvElts = recv.bytes / elt;
  if (recv.bytes % elt != 0)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": " + std::to_string(recv.bytes) +
                    " bytes is not a whole number of elements");
  ++rt->stats.collectives;
  ++rt->stats.opsPerStream[LETHE_STREAM_COMM];
  rt->stats.bytesCollective += std::max(send.bytes, recv.bytes);
  if (rt->dryRun) {
    if (beginCollectiveWindow(rt, at))
      return rt->status;
    return endCollectiveWindow(rt, at);
  }

  ncclDataType_t type = ncclTypeOf(dtype);
  // Checksum mode: exact integer arithmetic, so any bit pattern and any
  // reduction order give the same result.
  if (rt->config.mode == LETHE_MODE_CHECKSUM || dtype == LETHE_DTYPE_RAW) {
    bool words = recv.bytes % 8 == 0 && send.bytes % 8 == 0;
    type = words && kind != Collective::AllGather ? ncclUint64 : ncclUint8;
    recvElts = recv.bytes / (type == ncclUint64 ? 8 : 1);
  }
  ProfileScope profile(rt, LETHE_STREAM_COMM, op, recv.bytes);
  void *sendPtr = rt->deviceArena + send.offset;
  void *recvPtr = rt->deviceArena + recv.offset;
  cudaStream_t stream = rt->streams[LETHE_STREAM_COMM];
  ncclComm_t comm = rt->comm->comm;
  // Yielding copies pause while the window is open (CopyYield.cpp).
  if (beginCollectiveWindow(rt, at))
    return rt->status;
  // Enqueueing blocks when NCCL's work queue is full of work a dead peer
  // never completes.
  const char *call = kind == Collective::AllGather       ? "ncclAllGather"
                     : kind == Collective::ReduceScatter ? "ncclReduceScatter"
                                                         : "ncclAllReduce";
  ncclResult_t result = ncclSuccess;
  {
    BlockingCall blocking(rt, at, call);
    switch (kind) {
    case Collective::AllGather:
      result =
          ncclAllGather(sendPtr, recvPtr, recvElts / world, type, comm, stream);
      break;
    case Collective::ReduceScatter:
      result = ncclReduceScatter(sendPtr, recvPtr, recvElts, type, ncclSum,
                                 comm, stream);
      break;
    case Collective::AllReduce:
      result =
          ncclAllReduce(sendPtr, recvPtr, recvElts, type, ncclSum, comm, stream);
      break;
    }
    if (blocking.finish() || checkNccl(rt, result, at, call))
      return rt->status;
  }
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  return endCollectiveWindow(rt, at);
#else
  return fail(rt, LETHE_RT_UNSUPPORTED,
              at + ": this runtime was built without NCCL");
#endif
}

extern "C" LetheRtStatus letheRtAllGather(LetheRt *rt, const char *op,
                                          LetheRtBuf send, LetheRtBuf recv,
                                          LetheRtDType dtype) {
  return collective(rt, Collective::AllGather, op, send, recv, dtype);
}

extern "C" LetheRtStatus letheRtReduceScatter(LetheRt *rt, const char *op,
                                              LetheRtBuf send, LetheRtBuf recv,
                                              LetheRtDType dtype) {
  return collective(rt, Collective::ReduceScatter, op, send, recv, dtype);
}

extern "C" LetheRtStatus letheRtAllReduce(LetheRt *rt, const char *op,
                                          LetheRtBuf send, LetheRtBuf recv,
                                          LetheRtDType dtype) {
  return collective(rt, Collective::AllReduce, op, send, recv, dtype);
}

//===----------------------------------------------------------------------===//
// Point to point (pipeline stages)
//===----------------------------------------------------------------------===//

static LetheRtStatus pointToPoint(LetheRt *rt, bool isSend, const char *op,
                                  LetheRtBuf buf, LetheRtDType dtype,
                                  int peer) {
  if (!rt)
    return LETHE_RT_INVALID_ARGUMENT;
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  std::string at = where(isSend ? "letheRtSend" : "letheRtRecv", op);
  if (!rt->comm)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": no communicator (call letheRtCommInit first)");
  if (!isFloatDType(dtype) && dtype != LETHE_DTYPE_RAW)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": unknown dtype " + std::to_string((int)dtype));
  if (!checkBuf(rt, at, isSend ? "send buffer" : "receive buffer", buf, false,
                16))
    return rt->status;
#if LETHE_RT_HAVE_NCCL
  int world = rt->comm->worldSize, rank = rt->comm->rank;
  if (peer < 0 || peer >= world || peer == rank)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": peer " + std::to_string(peer) + " is not another rank "
                     "of the communicator (rank " + std::to_string(rank) +
                     " of " + std::to_string(world) + ")");
  ++rt->stats.collectives;
  ++rt->stats.opsPerStream[LETHE_STREAM_COMM];
  rt->stats.bytesCollective += buf.bytes;
  rt->p2pLog.push_back({op ? op : "", isSend, peer, buf.bytes,
                        rt->p2pGroupOpen ? rt->p2pGroups - 1 : -1});
  if (rt->p2pGroupOpen) {
    rt->p2pGroupLabel += (rt->p2pGroupLabel.empty() ? "" : " + ") +
                         std::string(op ? op : "");
    rt->p2pGroupBytes += buf.bytes;
  }
  // Point-to-point transfers open no copy-yield window (CopyYield.cpp): a
  // posted receive waits for its peer, whose send may wait on compute that
  // waits on a prefetch; pausing this rank's copies for the receive can
  // close a cycle across the ranks (a 1F1B pair hung that way on two H200s,
  // bench/results/gpu-pp.md). Collectives are safe: every rank reaches
  // them in the same order.
  if (rt->dryRun || buf.bytes == 0)
    return LETHE_RT_OK;
  // Bytes, whatever the dtype: nothing is computed, so the receiver gets
  // exactly the sender's bits (checksums agree across stages).
  void *ptr = rt->deviceArena + buf.offset;
  cudaStream_t stream = rt->streams[LETHE_STREAM_COMM];
  ncclComm_t comm = rt->comm->comm;
  // Inside a group the transfer is launched by ncclGroupEnd, which
  // letheRtGroupEnd profiles as a whole.
  std::optional<ProfileScope> profile;
  if (!rt->p2pGroupOpen)
    profile.emplace(rt, LETHE_STREAM_COMM, op, buf.bytes);
  const char *call = isSend ? "ncclSend" : "ncclRecv";
  {
    BlockingCall blocking(rt, at, call);
    ncclResult_t result =
        isSend ? ncclSend(ptr, buf.bytes, ncclUint8, peer, comm, stream)
               : ncclRecv(ptr, buf.bytes, ncclUint8, peer, comm, stream);
    if (!blocking.finish())
      checkNccl(rt, result, at, call);
  }
  profile.reset();
  return rt->status;
#else
  (void)peer;
  return fail(rt, LETHE_RT_UNSUPPORTED,
              at + ": this runtime was built without NCCL");
#endif
}

extern "C" LetheRtStatus letheRtSend(LetheRt *rt, const char *op,
                                     LetheRtBuf buf, LetheRtDType dtype,
                                     int peer) {
  return pointToPoint(rt, /*isSend=*/true, op, buf, dtype, peer);
}

extern "C" LetheRtStatus letheRtRecv(LetheRt *rt, const char *op,
                                     LetheRtBuf buf, LetheRtDType dtype,
                                     int peer) {
  return pointToPoint(rt, /*isSend=*/false, op, buf, dtype, peer);
}

extern "C" LetheRtStatus letheRtGroupStart(LetheRt *rt) {
  if (!rt)
    return LETHE_RT_INVALID_ARGUMENT;
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  const std::string at = "letheRtGroupStart";
  if (!rt->comm)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": no communicator (call letheRtCommInit first)");
  if (rt->p2pGroupOpen)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": a group is already open (groups do not nest)");
  rt->p2pGroupOpen = true;
  ++rt->p2pGroups;
  rt->p2pGroupLabel.clear();
  rt->p2pGroupBytes = 0;
#if LETHE_RT_HAVE_NCCL
  if (rt->dryRun)
    return rt->status;
  return checkNccl(rt, ncclGroupStart(), at, "ncclGroupStart");
#else
  return fail(rt, LETHE_RT_UNSUPPORTED,
              at + ": this runtime was built without NCCL");
#endif
}

extern "C" LetheRtStatus letheRtGroupEnd(LetheRt *rt) {
  if (!rt)
    return LETHE_RT_INVALID_ARGUMENT;
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  const std::string at = "letheRtGroupEnd";
  if (!rt->p2pGroupOpen)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": no group is open (call letheRtGroupStart first)");
  rt->p2pGroupOpen = false;
#if LETHE_RT_HAVE_NCCL
  if (rt->dryRun)
    return rt->status;
  std::string label = "group: " + rt->p2pGroupLabel;
  ProfileScope profile(rt, LETHE_STREAM_COMM, label.c_str(),
                       rt->p2pGroupBytes);
  BlockingCall blocking(rt, at, "ncclGroupEnd");
  ncclResult_t result = ncclGroupEnd();
  if (blocking.finish())
    return rt->status;
  return checkNccl(rt, result, at, "ncclGroupEnd");
#else
  return fail(rt, LETHE_RT_UNSUPPORTED,
              at + ": this runtime was built without NCCL");
#endif
}

extern "C" uint32_t letheRtNumP2P(const LetheRt *rt) {
  return rt ? (uint32_t)rt->p2pLog.size() : 0;
}

extern "C" LetheRtStatus letheRtGetP2P(const LetheRt *rt, uint32_t index,
                                       LetheRtP2P *out) {
  if (!rt || !out || index >= rt->p2pLog.size())
    return LETHE_RT_INVALID_ARGUMENT;
  const P2PRecord &r = rt->p2pLog[index];
  *out = {r.op.c_str(), r.isSend ? 1 : 0, r.peer, r.bytes, r.group};
  return LETHE_RT_OK;
}

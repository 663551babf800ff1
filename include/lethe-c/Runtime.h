/*===- lethe-c/Runtime.h - Lethe's CUDA runtime, C API -------------*- C
-*-===*\
|*                                                                            *|
|* The runtime that compiled Lethe programs call: streams, an event pool, one *|
|* device arena and one pinned host arena addressed by compiler-given         *|
|* offsets, async host<->device copies, NCCL collectives, and a kernel        *|
|* registry (cuBLASLt GEMMs, replay kernels for every other op).              *|
|*                                                                            *|
|* Error model: every call returns a status. The first failure is sticky:     *|
|* later calls return it again without enqueueing anything, so generated      *|
|* code may call straight through and check letheRtGetStatus() once. The      *|
|* message (letheRtGetErrorMessage) names the API call, the op and the        *|
|* failing CUDA/cuBLAS/NCCL call. Nothing in the library aborts.              *|
|*                                                                            *|
|* docs/Runtime.md describes the program format and the runner.               *|
\*===----------------------------------------------------------------------===*/

#ifndef LETHE_C_RUNTIME_H
#define LETHE_C_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when LetheRtProgram or a call's signature changes. */
#define LETHE_RT_ABI_VERSION 1

typedef struct LetheRt LetheRt;

typedef enum LetheRtStatus {
  LETHE_RT_OK = 0,
  /* A bad offset, size, event, stream or shape; nothing was enqueued. */
  LETHE_RT_INVALID_ARGUMENT = 1,
  /* No CUDA device or driver. */
  LETHE_RT_NO_DEVICE = 2,
  LETHE_RT_CUDA_ERROR = 3,
  LETHE_RT_CUBLAS_ERROR = 4,
  LETHE_RT_NCCL_ERROR = 5,
  /* A feature this build lacks (NCCL) or a mode that cannot do it. */
  LETHE_RT_UNSUPPORTED = 6,
  LETHE_RT_OUT_OF_MEMORY = 7,
  /* The NCCL rendezvous file or a check-in beside it could not be written
   * (waiting for them too long is LETHE_RT_TIMEOUT). */
  LETHE_RT_IO_ERROR = 8,
  /* A rank did not come to the rendezvous, or a blocking call (a
   * synchronize, an NCCL call) did not finish, within $LETHE_RT_TIMEOUT_S
   * (300) seconds, or NCCL reported a failed peer; the communicator, if
   * any, was aborted. The runtime can only be destroyed. */
  LETHE_RT_TIMEOUT = 9,
} LetheRtStatus;

/* Streams. Kernels (GEMM, replay, fill, checksum) run on the compute stream,
 * device->host copies on d2h, host->device copies on h2d, collectives on
 * comm. Events order them. */
typedef enum LetheRtStream {
  LETHE_STREAM_COMPUTE = 0,
  LETHE_STREAM_D2H = 1,
  LETHE_STREAM_H2D = 2,
  LETHE_STREAM_COMM = 3,
} LetheRtStream;
#define LETHE_RT_NUM_STREAMS 4

typedef enum LetheRtDType {
  LETHE_DTYPE_F32 = 0,
  LETHE_DTYPE_F16 = 1,
  LETHE_DTYPE_BF16 = 2,
  /* Bytes whose values do not matter (masks, indices): filled with noise. */
  LETHE_DTYPE_RAW = 3,
} LetheRtDType;

typedef enum LetheRtMode {
  /* Real GEMMs, replay kernels that take each op's time. */
  LETHE_MODE_TIMING = 0,
  /* Every kernel writes a hash of its inputs' contents into every output
   * word (and still takes the op's time, so races stay races); released
   * buffers are poisoned; letheRtChecksum digests chosen tensors. */
  LETHE_MODE_CHECKSUM = 1,
  /* No device: every call is validated and counted, nothing runs. Lets CI
   * check a compiled program's offsets, sizes and event order. */
  LETHE_MODE_DRY_RUN = 2,
} LetheRtMode;

/* Kernels of the registry. */
typedef enum LetheRtKernel {
  LETHE_KERNEL_GEMM = 0,   /* cuBLASLt, real shapes and dtypes */
  LETHE_KERNEL_REPLAY = 1, /* reads inputs, writes outputs, takes the time */
} LetheRtKernel;

/* A tensor's slot: [offset, offset + bytes) of the device arena. */
typedef struct LetheRtBuf {
  uint64_t offset;
  uint64_t bytes;
} LetheRtBuf;

typedef struct LetheRtConfig {
  /* CUDA device ordinal; -1 picks $LOCAL_RANK, else 0. */
  int device;
  LetheRtMode mode;
  /* One cudaMalloc of this size; kernel operands must be 16-byte aligned
   * inside it. */
  uint64_t deviceArenaBytes;
  /* One cudaHostAlloc (pinned) of this size. */
  uint64_t hostArenaBytes;
  /* Events 0 .. numEvents-1 for letheRtRecord / letheRtWait. */
  uint32_t numEvents;
  /* cuBLASLt workspace (part of the stated fixed overhead). */
  uint64_t gemmWorkspaceBytes;
  /* Replace GEMMs by replay kernels of their given time. */
  int replayGemms;
  /* Time every enqueued op with events (per-stream busy time). */
  int profile;
} LetheRtConfig;

/* Fills in the defaults: device -1, timing mode, 32 MiB GEMM workspace. */
void letheRtConfigInit(LetheRtConfig *config);

/* Creates a runtime. *rt is set even on failure (then it only carries the
 * error message) and must be destroyed with letheRtDestroy. */
LetheRtStatus letheRtCreate(const LetheRtConfig *config, LetheRt **rt);
void letheRtDestroy(LetheRt *rt);

/* The first error (sticky) and its message; LETHE_RT_OK and "" if none. */
LetheRtStatus letheRtGetStatus(const LetheRt *rt);
const char *letheRtGetErrorMessage(const LetheRt *rt);
/* Clears a sticky LETHE_RT_INVALID_ARGUMENT (the device state is intact);
 * returns the status that remains. */
LetheRtStatus letheRtClearInvalidArgument(LetheRt *rt);
const char *letheRtStatusName(LetheRtStatus status);

/* Which registry kernel runs an op, by its op name ("aten.mm.default",
 * "aten.bmm", "aten.addmm", ...): GEMM for matmul-like ops, else replay. */
LetheRtKernel letheRtKernelForOp(const char *opName);

/*--- A step ---------------------------------------------------------------*/

/* Begins a step: the side streams wait for the compute stream, and the
 * per-step event bookkeeping is reset (waiting on an event not recorded in
 * this step is an error). */
LetheRtStatus letheRtStepBegin(LetheRt *rt);
/* Ends a step: the compute stream waits for every other stream. */
LetheRtStatus letheRtStepEnd(LetheRt *rt);
/* Blocks until all streams are idle. */
LetheRtStatus letheRtSynchronize(LetheRt *rt);

/*--- Ordering -------------------------------------------------------------*/

LetheRtStatus letheRtRecord(LetheRt *rt, LetheRtStream stream, uint32_t event);
LetheRtStatus letheRtWait(LetheRt *rt, LetheRtStream stream, uint32_t event);

/*--- Copies (no staging: straight between the two arenas) -----------------*/

/* On the d2h stream. */
LetheRtStatus letheRtCopyD2H(LetheRt *rt, uint64_t deviceOffset,
                             uint64_t hostOffset, uint64_t bytes);
/* On the h2d stream. */
LetheRtStatus letheRtCopyH2D(LetheRt *rt, uint64_t hostOffset,
                             uint64_t deviceOffset, uint64_t bytes);

/*--- Copies that yield to collectives -------------------------------------*/

/* Where host copies and collectives share a path (collectives through host
 * memory over PCIe), each slows the other. With yielding on, the comm stream
 * raises a device flag around every collective (a "collective window"), and
 * every later letheRtCopyD2H / letheRtCopyH2D is issued in chunks of at most
 * `chunkBytes`, its stream waiting before each chunk until no window is
 * open. Copies never block collectives, so this cannot deadlock; a
 * collective overlaps at most the one chunk per direction that was running
 * when it began. chunkBytes == 0 turns yielding off (copies go whole).
 * Enqueues nothing, so a step may call it first, also while captured into a
 * CUDA graph. $LETHE_COPY_YIELD overrides every call: "off" (or 0) keeps
 * copies whole, a number forces that chunk size (A/B runs of one program).
 * docs/Runtime.md: the mechanism and its bound. */
LetheRtStatus letheRtSetCopyYield(LetheRt *rt, uint64_t chunkBytes);

/* Opens / closes a collective window on the comm stream by hand, around work
 * the runtime does not issue itself (an NCCL group, a custom kernel). The
 * collectives above open their own; windows nest. Nothing on the comm
 * stream inside a window may wait for a host copy: the copy would wait for
 * the window, and the window for it. */
LetheRtStatus letheRtCollectiveWindowBegin(LetheRt *rt);
LetheRtStatus letheRtCollectiveWindowEnd(LetheRt *rt);

/* How this runtime makes copies wait: "stream memory operations"
 * (cuStreamWaitValue32 / cuStreamWriteValue32, captured into CUDA graphs as
 * memory-operation nodes), "spin kernel" (a one-thread kernel polls the
 * flag: where the driver lacks stream memory operations), "stream memory
 * operations; spin kernel in CUDA graphs" (where capturing them fails), or
 * "none (dry run)". */
const char *letheRtCopyYieldMechanism(const LetheRt *rt);

/*--- Kernels (compute stream) ---------------------------------------------*/

/* A replay kernel: reads every input byte, writes every output byte and
 * takes timeUs (a spin calibrated against the measured SM clock; ops whose
 * memory traffic alone takes longer take that long). `op` names the op in
 * errors and profiles. */
LetheRtStatus letheRtReplay(LetheRt *rt, const char *op, double timeUs,
                            const LetheRtBuf *inputs, uint32_t numInputs,
                            const LetheRtBuf *outputs, uint32_t numOutputs);

/* C[batch][m][n] = op(A)[batch][m][k] * op(B)[batch][k][n] (+ bias[n]),
 * row-major as PyTorch stores them. transA: A is stored [batch][k][m];
 * transB: B is stored [batch][n][k]. bias.bytes == 0: no bias. Accumulates
 * in f32; A, B, C and bias share `dtype`. */
typedef struct LetheRtGemm {
  LetheRtDType dtype;
  int32_t transA;
  int32_t transB;
  int64_t batch;
  int64_t m;
  int64_t n;
  int64_t k;
  LetheRtBuf a;
  LetheRtBuf b;
  LetheRtBuf bias;
  LetheRtBuf c;
} LetheRtGemm;

/* timeUs is the op's planned time: used when GEMMs are replayed and in
 * checksum mode. */
LetheRtStatus letheRtGemm(LetheRt *rt, const char *op, double timeUs,
                          const LetheRtGemm *gemm);

/* Marks the end of a tensor's life on `stream` (after its last use there).
 * Checksum mode poisons the slot, so a later read of it, or a copy still
 * reading it on another stream, shows up as a mismatch; otherwise a no-op. */
LetheRtStatus letheRtRelease(LetheRt *rt, LetheRtStream stream, LetheRtBuf buf);

/* Fills a slot with deterministic values of `dtype` in [-1, 1) drawn from
 * `seed` and the element index (never zeros). Compute stream. */
LetheRtStatus letheRtFill(LetheRt *rt, LetheRtBuf buf, LetheRtDType dtype,
                          uint64_t seed);

/* Digests a slot's contents (independent of its offset) under `name`, on
 * the compute stream. Calling it again with a name replaces the value. */
LetheRtStatus letheRtChecksum(LetheRt *rt, const char *name, LetheRtBuf buf);
/* After letheRtChecksum calls: synchronizes, then reads the digests in the
 * order their names were first used. */
uint32_t letheRtNumChecksums(const LetheRt *rt);
LetheRtStatus letheRtGetChecksum(LetheRt *rt, uint32_t index, const char **name,
                                 uint64_t *value);

/*--- Collectives (comm stream, NCCL) ---------------------------------------*/

/* One process per GPU. Rank 0 creates the ncclUniqueId and writes it (hex)
 * to `uniqueIdFile`; the others wait for it, then check in beside it
 * (`uniqueIdFile`.joined.R), and rank 0 waits for every check-in before it
 * joins, so a rank that never starts is an error on both sides, never a
 * hang. Every wait is bounded by $LETHE_RT_TIMEOUT_S (300). A NULL file
 * reads $LETHE_NCCL_ID instead (worldSize 1 needs neither). Use a fresh
 * file per run. */
LetheRtStatus letheRtCommInit(LetheRt *rt, int worldSize, int rank,
                              const char *uniqueIdFile);
/* recv.bytes == send.bytes * worldSize. */
LetheRtStatus letheRtAllGather(LetheRt *rt, const char *op, LetheRtBuf send,
                               LetheRtBuf recv, LetheRtDType dtype);
/* send.bytes == recv.bytes * worldSize; sums. */
LetheRtStatus letheRtReduceScatter(LetheRt *rt, const char *op, LetheRtBuf send,
                                   LetheRtBuf recv, LetheRtDType dtype);
/* send.bytes == recv.bytes; sums; send == recv is in place. */
LetheRtStatus letheRtAllReduce(LetheRt *rt, const char *op, LetheRtBuf send,
                               LetheRtBuf recv, LetheRtDType dtype);

/* Point to point (pipeline stages): `buf` goes to / comes from rank `peer`
 * (not this rank), in the order the pair issues them (ncclSend/ncclRecv).
 * The bytes move unchanged in every mode, so a received buffer digests to
 * the sender's checksum. Between letheRtGroupStart and letheRtGroupEnd
 * sends and receives form one NCCL group: NCCL launches them together at
 * letheRtGroupEnd, so exchanges that wait on each other (stage s sends
 * forward while s+1 sends backward) cannot deadlock. Inside a group the
 * comm stream's work has not been launched yet: recording an event on comm
 * and other collectives are refused there; waits on comm are allowed (they
 * precede the group). A step cannot end, nor the runtime synchronize, with
 * a group open. */
LetheRtStatus letheRtSend(LetheRt *rt, const char *op, LetheRtBuf buf,
                          LetheRtDType dtype, int peer);
LetheRtStatus letheRtRecv(LetheRt *rt, const char *op, LetheRtBuf buf,
                          LetheRtDType dtype, int peer);
LetheRtStatus letheRtGroupStart(LetheRt *rt);
LetheRtStatus letheRtGroupEnd(LetheRt *rt);

/* The point-to-point calls since the last letheRtResetStats, in issue
 * order: for checking offline that two stages' programs pair up (every
 * mode, the dry run included). group: the ordinal of the NCCL group the
 * call belongs to (counted from 0 since the reset), -1 outside a group. */
typedef struct LetheRtP2P {
  const char *op;
  int32_t isSend;
  int32_t peer;
  uint64_t bytes;
  int32_t group;
} LetheRtP2P;
uint32_t letheRtNumP2P(const LetheRt *rt);
LetheRtStatus letheRtGetP2P(const LetheRt *rt, uint32_t index,
                            LetheRtP2P *out);

/*--- Access and accounting ------------------------------------------------*/

/* Pointers into the arenas (NULL in dry-run mode or when out of range):
 * for tests and for handing tensors to other libraries. */
void *letheRtDevicePointer(LetheRt *rt, uint64_t deviceOffset);
void *letheRtHostPointer(LetheRt *rt, uint64_t hostOffset);

/* What was enqueued since creation (or the last reset); kept in every mode,
 * so a dry run reports it too. */
typedef struct LetheRtStats {
  uint64_t opsPerStream[LETHE_RT_NUM_STREAMS];
  uint64_t bytesD2H;
  uint64_t bytesH2D;
  uint64_t bytesCollective;
  uint64_t gemms;
  uint64_t replays;
  uint64_t collectives;
  uint64_t records;
  uint64_t waits;
  uint64_t releases;
  double gemmFlops;
  /* Sum of the timeUs given to kernels. */
  double kernelUs;
  /* The largest offset + bytes any call touched in each arena. */
  uint64_t deviceHighWater;
  uint64_t hostHighWater;
  /* Copies issued while yielding, their chunks (each after a wait for the
   * window flag), and the collective windows opened. */
  uint64_t yieldingCopies;
  uint64_t copyChunks;
  uint64_t collectiveWindows;
} LetheRtStats;
void letheRtGetStats(const LetheRt *rt, LetheRtStats *stats);
void letheRtResetStats(LetheRt *rt);

/* Device memory: device-wide figures from cudaMemGetInfo (other processes
 * included) and what this runtime allocated. */
typedef struct LetheRtMemoryInfo {
  uint64_t deviceTotalBytes;
  /* Device-wide use right after the CUDA context was created. */
  uint64_t usedAtContextBytes;
  uint64_t usedNowBytes;
  uint64_t deviceArenaBytes;
  uint64_t hostArenaBytes;
  uint64_t gemmWorkspaceBytes;
  uint64_t scratchBytes;
  /* Measured around ncclCommInitRank. */
  uint64_t ncclBytes;
  /* Device-wide use when letheRtCreate returned: the above less NCCL, plus
   * what the libraries set up (cuBLASLt's handle, the runtime's kernels). */
  uint64_t usedAfterCreateBytes;
} LetheRtMemoryInfo;
LetheRtStatus letheRtGetMemoryInfo(LetheRt *rt, LetheRtMemoryInfo *info);

/*--- A compiled program ---------------------------------------------------*/

/* What a compiled program exports, from a shared object, as
 *   extern "C" const LetheRtProgram *letheProgram(void);
 * init fills parameters and inputs once; step enqueues one training step
 * (the runner brackets it with letheRtStepBegin/End); checksum enqueues
 * letheRtChecksum calls for the tensors that must match between plans. */
typedef struct LetheRtProgram {
  uint32_t abiVersion; /* LETHE_RT_ABI_VERSION */
  const char *name;
  uint64_t deviceArenaBytes;
  uint64_t hostArenaBytes;
  uint32_t numEvents;
  /* Ranks the program's collectives span; 0: it has none. */
  int32_t worldSize;
  /* The compiler's predictions (0: unknown), echoed in the report. */
  double plannedStepUs;
  uint64_t plannedPeakBytes;
  LetheRtStatus (*init)(LetheRt *rt);
  LetheRtStatus (*step)(LetheRt *rt);
  LetheRtStatus (*checksum)(LetheRt *rt);
} LetheRtProgram;

#define LETHE_RT_PROGRAM_SYMBOL "letheProgram"
typedef const LetheRtProgram *(*LetheRtProgramEntry)(void);

#ifdef __cplusplus
}

/* C++ conveniences for generated programs: one line per op, e.g.
 *   letheRtGemm(rt, "aten.mm %h0", 105.0,
 *               {LETHE_DTYPE_BF16, 0, 0, 1, 8192, 2048, 2048, X0, W0, {}, H0});
 *   letheRtReplay(rt, "aten.gelu %x1", 35.2, {H0}, {X1});            */
#include <initializer_list>

inline LetheRtStatus letheRtGemm(LetheRt *rt, const char *op, double timeUs,
                                 const LetheRtGemm &gemm) {
  return letheRtGemm(rt, op, timeUs, &gemm);
}

inline LetheRtStatus letheRtReplay(LetheRt *rt, const char *op, double timeUs,
                                   std::initializer_list<LetheRtBuf> inputs,
                                   std::initializer_list<LetheRtBuf> outputs) {
  return letheRtReplay(rt, op, timeUs, inputs.begin(), (uint32_t)inputs.size(),
                       outputs.begin(), (uint32_t)outputs.size());
}
#endif

#endif /* LETHE_C_RUNTIME_H */

//===- Gemm.cpp - The registry's GEMM kernel (cuBLASLt)
//--------------------===//
//
// Matmul-like ops run through cuBLASLt with their real shapes and dtypes,
// accumulating in f32, with the bias epilogue for addmm-like ops. Row-major
// operands (PyTorch's layout) are handed to column-major cuBLASLt as the
// transposed product: C^T = op(B)^T op(A)^T. One plan (descriptors plus the
// heuristic's first algorithm) is cached per shape; the workspace is one
// allocation made up front and stated as fixed overhead.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include <cublasLt.h>

#include <array>
#include <map>

using namespace lethe::rt;

namespace lethe::rt {

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr; // B's buffer, first operand
  cublasLtMatrixLayout_t y = nullptr; // A's buffer, second operand
  cublasLtMatrixLayout_t c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct GemmState {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  uint64_t workspaceBytes = 0;
  using Key = std::array<int64_t, 8>;
  std::map<Key, GemmPlan> plans;
};

static LetheRtStatus checkCublas(LetheRt *rt, cublasStatus_t status,
                                 const std::string &at, const char *call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return LETHE_RT_OK;
  return fail(rt, LETHE_RT_CUBLAS_ERROR,
              at + ": " + call + " failed: " + cublasLtGetStatusString(status));
}

LetheRtStatus initGemmState(LetheRt *rt) {
  const std::string at = "letheRtCreate";
  rt->gemm = new GemmState();
  if (checkCublas(rt, cublasLtCreate(&rt->gemm->handle), at, "cublasLtCreate"))
    return rt->status;
  rt->gemm->workspaceBytes = rt->config.gemmWorkspaceBytes;
  if (rt->gemm->workspaceBytes &&
      checkCuda(rt, cudaMalloc(&rt->gemm->workspace, rt->gemm->workspaceBytes),
                at, "cudaMalloc(GEMM workspace)"))
    return rt->status;
  return LETHE_RT_OK;
}

void destroyGemmState(LetheRt *rt) {
  GemmState *g = rt->gemm;
  if (!g)
    return;
  for (auto &[key, plan] : g->plans) {
    cublasLtMatrixLayoutDestroy(plan.x);
    cublasLtMatrixLayoutDestroy(plan.y);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
  }
  cudaFree(g->workspace);
  if (g->handle)
    cublasLtDestroy(g->handle);
  delete g;
  rt->gemm = nullptr;
}

} // namespace lethe::rt

static cudaDataType_t cudaTypeOf(LetheRtDType dtype) {
  switch (dtype) {
  case LETHE_DTYPE_F16:
    return CUDA_R_16F;
  case LETHE_DTYPE_BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

static const char *dtypeName(LetheRtDType dtype) {
  switch (dtype) {
  case LETHE_DTYPE_F32:
    return "f32";
  case LETHE_DTYPE_F16:
    return "f16";
  case LETHE_DTYPE_BF16:
    return "bf16";
  default:
    return "raw";
  }
}

/// Layout of a stored column-major rows x cols matrix, batched.
static cublasStatus_t makeLayout(cublasLtMatrixLayout_t *layout,
                                 cudaDataType_t type, int64_t rows,
                                 int64_t cols, int64_t batch) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(layout, type, rows, cols, rows);
  if (s != CUBLAS_STATUS_SUCCESS || batch == 1)
    return s;
  int32_t count = (int32_t)batch;
  int64_t stride = rows * cols;
  s = cublasLtMatrixLayoutSetAttribute(
      *layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
  if (s != CUBLAS_STATUS_SUCCESS)
    return s;
  return cublasLtMatrixLayoutSetAttribute(
      *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
      sizeof(stride));
}

static GemmPlan *getPlan(LetheRt *rt, const std::string &at,
                         const LetheRtGemm &g) {
  bool hasBias = g.bias.bytes != 0;
  GemmState::Key key = {g.dtype, g.transA, g.transB, g.batch,
                        g.m,     g.n,      g.k,      hasBias};
  auto it = rt->gemm->plans.find(key);
  if (it != rt->gemm->plans.end())
    return &it->second;

  GemmPlan plan;
  cudaDataType_t type = cudaTypeOf(g.dtype);
  cublasOperation_t opX = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opY = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto cleanup = [&] {
    cublasLtMatrixLayoutDestroy(plan.x);
    cublasLtMatrixLayoutDestroy(plan.y);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
    return nullptr;
  };
  if (checkCublas(
          rt,
          cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          at, "cublasLtMatmulDescCreate") ||
      checkCublas(rt,
                  cublasLtMatmulDescSetAttribute(plan.desc,
                                                 CUBLASLT_MATMUL_DESC_TRANSA,
                                                 &opX, sizeof(opX)),
                  at, "cublasLtMatmulDescSetAttribute(TRANSA)") ||
      checkCublas(rt,
                  cublasLtMatmulDescSetAttribute(plan.desc,
                                                 CUBLASLT_MATMUL_DESC_TRANSB,
                                                 &opY, sizeof(opY)),
                  at, "cublasLtMatmulDescSetAttribute(TRANSB)"))
    return cleanup();
  if (hasBias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    if (checkCublas(rt,
                    cublasLtMatmulDescSetAttribute(
                        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                        sizeof(epilogue)),
                    at, "cublasLtMatmulDescSetAttribute(EPILOGUE)"))
      return cleanup();
  }
  // X = B^T as n x k, Y = A^T as k x m, C^T as n x m (column-major).
  if (checkCublas(rt,
                  makeLayout(&plan.x, type, g.transB ? g.k : g.n,
                             g.transB ? g.n : g.k, g.batch),
                  at, "cublasLtMatrixLayoutCreate(B)") ||
      checkCublas(rt,
                  makeLayout(&plan.y, type, g.transA ? g.m : g.k,
                             g.transA ? g.k : g.m, g.batch),
                  at, "cublasLtMatrixLayoutCreate(A)") ||
      checkCublas(rt, makeLayout(&plan.c, type, g.n, g.m, g.batch), at,
                  "cublasLtMatrixLayoutCreate(C)"))
    return cleanup();

  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  uint64_t wsBytes = rt->gemm->workspaceBytes;
  cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes,
        sizeof(wsBytes));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(rt->gemm->handle, plan.desc, plan.x,
                                       plan.y, plan.c, plan.c, pref, 1, &result,
                                       &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (checkCublas(rt, s, at, "cublasLtMatmulAlgoGetHeuristic"))
    return cleanup();
  if (returned == 0) {
    fail(rt, LETHE_RT_CUBLAS_ERROR,
         at + ": cuBLASLt has no algorithm for a " + dtypeName(g.dtype) +
             " GEMM batch " + std::to_string(g.batch) + ", m " +
             std::to_string(g.m) + ", n " + std::to_string(g.n) + ", k " +
             std::to_string(g.k));
    return cleanup();
  }
  plan.algo = result.algo;
  return &rt->gemm->plans.emplace(key, plan).first->second;
}

extern "C" LetheRtStatus letheRtGemm(LetheRt *rt, const char *op, double timeUs,
                                     const LetheRtGemm *gemm) {
  if (!rt)
    return LETHE_RT_INVALID_ARGUMENT;
  if (rt->status != LETHE_RT_OK)
    return rt->status;
  std::string at = where("letheRtGemm", op);
  if (!gemm)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT, at + ": gemm is null");
  const LetheRtGemm &g = *gemm;
  if (!(timeUs >= 0 && timeUs < 1e15))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": time " + std::to_string(timeUs) +
                    " us is not a finite, non-negative number");
  if (!isFloatDType(g.dtype))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": dtype " + std::to_string((int)g.dtype) +
                    " is not f32, f16 or bf16");
  if ((g.transA != 0 && g.transA != 1) || (g.transB != 0 && g.transB != 1))
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": transA and transB must be 0 or 1");
  const int64_t limit = (int64_t)1 << 31;
  if (g.batch < 1 || g.m < 1 || g.n < 1 || g.k < 1 || g.batch >= limit ||
      g.m >= limit || g.n >= limit || g.k >= limit)
    return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                at + ": batch " + std::to_string(g.batch) + ", m " +
                    std::to_string(g.m) + ", n " + std::to_string(g.n) +
                    ", k " + std::to_string(g.k) +
                    ": each must be in [1, 2^31)");
  using u128 = unsigned __int128;
  uint64_t elt = dtypeSize(g.dtype);
  struct Operand {
    const char *name;
    LetheRtBuf buf;
    u128 needed;
    const char *shape;
  } operands[] = {
      {"a", g.a, (u128)g.batch * g.m * g.k * elt, g.transA ? "k x m" : "m x k"},
      {"b", g.b, (u128)g.batch * g.k * g.n * elt, g.transB ? "n x k" : "k x n"},
      {"bias", g.bias, (u128)g.n * elt, "n"},
      {"c", g.c, (u128)g.batch * g.m * g.n * elt, "m x n"},
  };
  for (const Operand &o : operands) {
    bool isBias = std::string(o.name) == "bias";
    if (isBias && o.buf.bytes == 0)
      continue;
    if (!checkBuf(rt, at, o.name, o.buf, false, 16))
      return rt->status;
    if ((u128)o.buf.bytes < o.needed)
      return fail(rt, LETHE_RT_INVALID_ARGUMENT,
                  at + ": " + o.name + " holds " + std::to_string(o.buf.bytes) +
                      " bytes, but " +
                      (isBias ? std::string("")
                              : "batch " + std::to_string(g.batch) + " of ") +
                      o.shape + " " + dtypeName(g.dtype) + " needs " +
                      std::to_string((uint64_t)o.needed));
  }
  ++rt->stats.gemms;
  ++rt->stats.opsPerStream[LETHE_STREAM_COMPUTE];
  rt->stats.gemmFlops += 2.0 * g.batch * g.m * g.n * g.k;
  rt->stats.kernelUs += timeUs;
  if (rt->dryRun)
    return LETHE_RT_OK;

  ProfileScope profile(rt, LETHE_STREAM_COMPUTE, op, 0);
  if (rt->config.replayGemms || rt->config.mode == LETHE_MODE_CHECKSUM) {
    // Exactly the bytes the GEMM reads and writes.
    LetheRtBuf inputs[3] = {{g.a.offset, (uint64_t)operands[0].needed},
                            {g.b.offset, (uint64_t)operands[1].needed},
                            {g.bias.offset, (uint64_t)operands[2].needed}};
    LetheRtBuf output = {g.c.offset, (uint64_t)operands[3].needed};
    return launchReplayOrHash(rt, at, timeUs, inputs, g.bias.bytes ? 3u : 2u,
                              &output, 1);
  }
  GemmPlan *plan = getPlan(rt, at, g);
  if (!plan)
    return rt->status;
  unsigned char *base = rt->deviceArena;
  if (g.bias.bytes) {
    const void *bias = base + g.bias.offset;
    if (checkCublas(rt,
                    cublasLtMatmulDescSetAttribute(
                        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                        sizeof(bias)),
                    at, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"))
      return rt->status;
  }
  float alpha = 1.0f, beta = 0.0f;
  return checkCublas(
      rt,
      cublasLtMatmul(rt->gemm->handle, plan->desc, &alpha, base + g.b.offset,
                     plan->x, base + g.a.offset, plan->y, &beta,
                     base + g.c.offset, plan->c, base + g.c.offset, plan->c,
                     &plan->algo, rt->gemm->workspace, rt->gemm->workspaceBytes,
                     rt->streams[LETHE_STREAM_COMPUTE]),
      at, "cublasLtMatmul");
}

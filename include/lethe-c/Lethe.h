/*===- lethe-c/Lethe.h - C API of Lethe ---------------------------*- C -*-===*\
|*                                                                            *|
|* A stable C interface to Lethe for other languages (the Python bindings use *|
|* only this): load a training-step graph, get its report and plans as JSON,  *|
|* write timelines. Every call that can fail returns a LetheStatus; on fail-  *|
|* ure it carries the error message (the diagnostics Lethe emitted, with the *|
|* node or location at fault). Nothing aborts on bad input.                   *|
|*                                                                            *|
|* Strings returned through LetheString are owned by the caller and released  *|
|* with letheStringDestroy. A LetheGraph is not thread-safe; distinct graphs  *|
|* may be used from distinct threads.                                         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef LETHE_C_LETHE_H
#define LETHE_C_LETHE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LETHE_CAPI_EXPORTED __declspec(dllexport)
#else
#define LETHE_CAPI_EXPORTED __attribute__((visibility("default")))
#endif

/// A string Lethe allocated; `data` is NUL-terminated.
typedef struct {
  char *data;
  size_t length;
} LetheString;

/// Success, or an error message (`message.data` is NULL on success).
typedef struct {
  LetheString message;
} LetheStatus;

/// A loaded training step in Lethe's canonical form, with its own context.
typedef struct LetheGraphImpl *LetheGraph;

/// Whether `status` is a success.
LETHE_CAPI_EXPORTED int letheStatusIsSuccess(LetheStatus status);
/// Releases a status's message (a no-op on success).
LETHE_CAPI_EXPORTED void letheStatusDestroy(LetheStatus status);
LETHE_CAPI_EXPORTED void letheStringDestroy(LetheString string);

/// The library's version, e.g. "0.1.0" (static storage).
LETHE_CAPI_EXPORTED const char *letheVersion(void);

/// Loads a graph file: JSON (graphs/SCHEMA.md) or MLIR (canonical form,
/// generic-form exports, upstream tensor dialects), told apart by the
/// content, not the name; a regular file of at most 1 GiB (a device or a
/// FIFO is refused). `device` names the
/// device profile that costs nodes without a measured time ("h200", "h100",
/// ... or a profile file); NULL means the `lethe-plan` pass's default
/// device (lethePlanOptionDefaults).
LETHE_CAPI_EXPORTED LetheStatus letheGraphLoadFile(const char *path,
                                                   const char *device,
                                                   LetheGraph *graph);

/// Loads a graph from memory. `format` is "json" or "mlir"; `name` is used
/// in error locations (may be NULL).
LETHE_CAPI_EXPORTED LetheStatus letheGraphLoadString(
    const char *data, size_t length, const char *format, const char *name,
    const char *device, LetheGraph *graph);

LETHE_CAPI_EXPORTED void letheGraphDestroy(LetheGraph graph);

/// The graph in Lethe's canonical MLIR form.
LETHE_CAPI_EXPORTED LetheStatus letheGraphPrint(LetheGraph graph,
                                                LetheString *mlir);

/// The `lethe report --json` document of the unplanned step: peak memory,
/// the op at the peak, the largest live tensors there (at most `top`),
/// predicted step time.
LETHE_CAPI_EXPORTED LetheStatus letheGraphReport(LetheGraph graph,
                                                 unsigned top,
                                                 LetheString *json);

/// Writes the unplanned step's timeline as a Chrome-trace / Perfetto JSON
/// file (as `lethe report --trace`). The file is written atomically.
LETHE_CAPI_EXPORTED LetheStatus letheGraphWriteTrace(LetheGraph graph,
                                                     const char *path);

/// A plan of a graph under a budget. It refers to its graph: destroy it
/// before the graph.
typedef struct LethePlanImpl *LethePlan;

/// Some of the planner's options, as text (the first version of this API;
/// letheGraphPlanWithOptions takes every option). NULL strings and zero
/// numbers mean the `lethe-plan` pass's defaults (lethePlanOptionDefaults:
/// they are declared there alone), as do the options this struct lacks
/// (`alignment`). Its layout is fixed: programs built against it keep
/// working.
typedef struct {
  /// Bytes ("1073741824"), a size ("40GiB", "800 MB") or a percentage of
  /// the unplanned peak ("50%"); NULL: no limit.
  const char *budget;
  /// none, full, every-n, selective-op, offload-all, auto.
  const char *policy;
  /// every-n: checkpoint every n-th layer.
  int every_n;
  /// selective-op: comma-separated op kinds whose outputs are kept.
  const char *keep_ops;
  /// selective-op: offload the kept outputs instead of retaining them.
  int offload_kept;
  /// Never offload a storage smaller than this.
  const char *min_offload_bytes;
  /// Pinned host bytes for offloads (NULL: the device profile's).
  const char *host_budget;
  /// auto, fast or exact.
  const char *solver;
  /// Allow recomputing RNG ops (only if their RNG state is replayed).
  int replay_rng;
  /// Also compute a lower bound on any plan's overhead at the budget: the
  /// plan's JSON then has `lower_bound_overhead` and `gap`.
  int bound;
} LethePlanOptions;

/// The `lethe-plan` pass's options with their defaults, as
/// letheGraphPlanWithOptions takes them ("alignment=256 bound=false
/// budget= device=h200 ..."; an empty list option is left out): the one
/// declaration of the defaults (Passes.td), for bindings that show them.
LETHE_CAPI_EXPORTED LetheStatus lethePlanOptionDefaults(LetheString *options);

/// Plans `graph` with `options` (NULL: the defaults) on the graph's device.
/// A budget the policy cannot meet is not an error: the plan says it is
/// infeasible and gives the least feasible budget. Bad options are errors.
LETHE_CAPI_EXPORTED LetheStatus letheGraphPlan(LetheGraph graph,
                                               const LethePlanOptions *options,
                                               LethePlan *plan);

/// Plans `graph` as letheGraphPlan does, with every option of the
/// `lethe-plan` pass given as `lethe-opt --lethe-plan='...'` takes them:
/// "budget=50% policy=every-n n=3 alignment=1" (space separated; a value
/// with spaces in braces: "budget={800 MB}"; NULL or "": the defaults).
/// Options not named keep the pass's defaults (docs/Generated/
/// LethePasses.md), so the same graph and options plan as `lethe-opt`,
/// `lethe plan` and `lethe compile` do. `device` is the graph's: naming
/// another is an error.
LETHE_CAPI_EXPORTED LetheStatus letheGraphPlanWithOptions(LetheGraph graph,
                                                          const char *options,
                                                          LethePlan *plan);

LETHE_CAPI_EXPORTED void lethePlanDestroy(LethePlan plan);

/// Whether the plan meets its budget.
LETHE_CAPI_EXPORTED int lethePlanIsFeasible(LethePlan plan);

/// The `lethe plan --json` document of the plan: predicted peak and step
/// time against the unplanned step, counts, and one entry per activation
/// with its decision and reason.
LETHE_CAPI_EXPORTED LetheStatus lethePlanJson(LethePlan plan,
                                              LetheString *json);

/// Writes the planned step's simulated timeline (compute, D2H, H2D and comm
/// tracks, device memory counter) as a Chrome-trace file, atomically.
LETHE_CAPI_EXPORTED LetheStatus lethePlanWriteTrace(LethePlan plan,
                                                    const char *path);

/// Compiles `graph` with the whole pipeline (docs/Pipeline.md) under
/// `options` (as letheGraphPlan takes them; NULL: the defaults): plan,
/// materialize, schedule, allocate arenas and verify, planning again if
/// packing leaves the arena over the budget. `program` (may be NULL)
/// receives the allocated program as MLIR, the input of the lowering to the
/// runtime; `json` (may be NULL) the `lethe simulate --json` document of the
/// simulated program (step_us, peak_bytes, arena_bytes, max_live_bytes,
/// exposed_copy_us, busy_us, ...) with `values`, one entry per activation
/// and its decision. The graph itself is left unchanged. A budget the
/// policy cannot meet is an error stating the least budget it can meet.
LETHE_CAPI_EXPORTED LetheStatus letheGraphCompile(
    LetheGraph graph, const LethePlanOptions *options, LetheString *program,
    LetheString *json);

/// letheGraphCompile with the options as letheGraphPlanWithOptions takes
/// them.
LETHE_CAPI_EXPORTED LetheStatus
letheGraphCompileWithOptions(LetheGraph graph, const char *options,
                             LetheString *program, LetheString *json);

#ifdef __cplusplus
}
#endif

#endif /* LETHE_C_LETHE_H */

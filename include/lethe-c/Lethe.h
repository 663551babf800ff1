/*===- lethe-c/Lethe.h - C API of Lethe ---------------------------*- C -*-===*\
|*                                                                            *|
|* A stable C interface to Lethe for other languages (the Python bindings use *|
|* only this): load a training-step graph, get its report as JSON, write its  *|
|* timeline. Every call that can fail returns a LetheStatus; on failure it    *|
|* carries the error message (the diagnostics Lethe emitted, with the node or *|
|* location at fault). Nothing aborts on bad input.                           *|
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

/// Loads a graph file: `.json` (graphs/SCHEMA.md) or `.mlir` (canonical
/// form, generic-form exports, upstream tensor dialects). `device` names the
/// device profile that costs nodes without a measured time ("h200", "h100",
/// ... or a profile file); NULL means "h200".
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

#ifdef __cplusplus
}
#endif

#endif /* LETHE_C_LETHE_H */

//===- Passes.td - Lethe conversion passes -----------------*- tablegen -*-===//

#ifndef LETHE_CONVERSION_PASSES_TD
#define LETHE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToRuntime : Pass<"lethe-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower an allocated program to EmitC calls of the CUDA "
                "runtime's C API";
  let description = [{
    Turns the allocated program (docs/Pipeline.md §6: every op on its
    stream, every buffer at an arena offset) into EmitC: straight-line C++
    that calls `lethe-c/Runtime.h`, one call per op, copy, record, wait and
    release, and exports `letheProgram()` (docs/Runtime.md, "The program
    format"). `lethe-translate --lethe-to-cpp` runs this pass and prints the
    C++.

    - `lethe.node`: `letheRtGemm` when it is a matmul-like ATen op (`mm`,
      `addmm`, `bmm`, `linear`, `matmul`) whose operands are plain or
      transposed row-major tensors — transposes through `aten.t`,
      `aten.transpose` and `aten.permute` views become the GEMM's trans
      flags on the base buffer — else `letheRtReplay` with the op's
      `time_us`, reading the storages of its tensor operands and writing its
      fresh (and in-place) results. A view is a replay of no buffers (its
      measured time) unless `replay-views=false`. A matmul-like node that
      is replayed is counted (`num-gemm-fallbacks`) and gets a missed remark
      with the reason (`--remarks-filter=lethe-lower-to-runtime`).
    - `lethe.barrier`: `letheRtRecord` of the next event on its stream.
      Events are numbered per timepoint in issue order; a `lethe.join` is
      the set of its inputs' events.
    - `lethe.offload` / `lethe.prefetch`: waits for the awaited events on
      the d2h / h2d stream, `letheRtCopyD2H` / `letheRtCopyH2D` between the
      two arena slots, and a record of the copy's own event.
    - `lethe.await`: `letheRtWait` on its stream for every event.
    - `lethe.release`: the waits of its `await`, then `letheRtRelease` of a
      device slot (a host slot needs no call).
    - `lethe.collective`: `letheRtAllGather`, `letheRtReduceScatter`,
      `letheRtAllReduce` on the comm stream.
    - `lethe.recompute`: its body, inlined.

    Resident inputs (the function's arguments: parameters, data, tangents,
    buffers) are placed after the planned device arena; `init` fills them
    with deterministic values, `checksum` digests the step's outputs and its
    `buffer` arguments (state updated in place).
  }];
  let options = [
    Option<"programName", "name", "std::string", /*default=*/"\"\"",
           "the program's name (default: the module's lethe.model, else "
           "the function's name)">,
    Option<"replayViews", "replay-views", "bool", /*default=*/"true",
           "replay views (ops whose results all alias an operand) for their "
           "time; false: a comment only">,
  ];
  let statistics = [
    Statistic<"numGemms", "num-gemms", "Nodes lowered to letheRtGemm">,
    Statistic<"numReplays", "num-replays", "Nodes lowered to letheRtReplay">,
    Statistic<"numGemmFallbacks", "num-gemm-fallbacks",
              "Matmul-like nodes replayed because their layout is not a "
              "plain GEMM">,
    Statistic<"numCopies", "num-copies", "Host copies (both directions)">,
    Statistic<"numEvents", "num-events", "Events (one per timepoint)">,
  ];
  let dependentDialects = ["mlir::emitc::EmitCDialect"];
}

#endif // LETHE_CONVERSION_PASSES_TD

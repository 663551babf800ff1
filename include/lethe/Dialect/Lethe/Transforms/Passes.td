//===- Passes.td - Lethe dialect passes --------------------*- tablegen -*-===//

#ifndef LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_TD
#define LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AnnotateCosts : Pass<"lethe-annotate-costs"> {
  let summary = "Give every node and collective a time: measured, else modelled";
  let description = [{
    Sets `time_us` on every `lethe.node` and `lethe.collective` that lacks
    one (on all of them with `overwrite=true`), from the cost model over a
    device profile, and records where each time comes from in the
    discardable attribute `lethe.cost_source`:

    - `measured`: the op already had a time (kept);
    - `analytic`: a matmul, convolution or attention op (ATen, StableHLO,
      linalg or TOSA spelling, forward or backward): FLOPs over the device's
      peak rate for the dtype, bounded below by bytes over HBM bandwidth,
      plus the launch overhead;
    - `bandwidth`: any other op: bytes moved over HBM bandwidth plus the
      launch overhead; a view (every result aliases an operand) costs the
      profile's view time; a collective moves its ring bytes over the peer
      link.

    An op kind with no formula that is not a known memory-bound kind either
    gets the bandwidth model; such kinds are counted (`num-unknown-kinds`)
    and each gets one missed remark on its first node
    (`--remarks-filter=lethe-annotate-costs`). `device` is a built-in
    profile (`h200`, `h100`, `a100`, `h200-nvlink`, `h200-pcie`) or the
    path of a JSON profile; an unknown name or a bad file is an error
    listing the built-in names.
    docs/CostModel.md has the formulas and the profile format.

    ```mlir
    // lethe-opt --lethe-annotate-costs='device=h200'
    %0 = lethe.node "aten.mm.default" fwd (%a, %b)
        {lethe.cost_source = #lethe<cost_source analytic>,
         time_us = 9.2 : f64} : ...
    ```
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h200\"",
           "built-in device profile name, or the path of a JSON profile">,
    Option<"overwrite", "overwrite", "bool", /*default=*/"false",
           "replace the times ops already carry (measured ones too) with "
           "the model's">,
  ];
  let statistics = [
    Statistic<"numMeasured", "num-measured",
              "Ops whose time was already set and kept">,
    Statistic<"numAnalytic", "num-analytic",
              "Ops timed by FLOPs over the device's rate">,
    Statistic<"numBandwidth", "num-bandwidth",
              "Ops timed by bytes over bandwidth (views and collectives "
              "included)">,
    Statistic<"numUnknownKinds", "num-unknown-kinds",
              "Op kinds with no cost formula, modelled as memory-bound">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

def AssignBuffers : Pass<"lethe-assign-buffers", "mlir::ModuleOp"> {
  let summary = "Give every buffer a static offset in one device arena and "
                "one pinned host arena";
  let description = [{
    Computes every buffer's lifetime from the program's issue order (from
    its defining op to its `lethe.release`, or to the end for the step's
    outputs; views, awaits and recompute results share their storage's
    buffer) and packs the intervals into one device arena and one pinned
    host arena: two buffers whose lifetimes intersect never overlap.

    Packing runs several greedy orders (largest first, longest-lived first,
    allocation order; each placing a buffer in the best-fitting gap among
    the buffers it overlaps in time) and keeps the smallest arena. Every
    offset and size is rounded up to `alignment`.

    Writes `lethe.offsets = array<i64: ...>` on every op with an allocating
    result (one entry per result, -1 for results that allocate nothing) and
    the module attributes `lethe.device_arena_bytes`,
    `lethe.host_arena_bytes`, `lethe.max_live_bytes`,
    `lethe.host_max_live_bytes` (the lower bounds: most bytes live at once)
    and `lethe.arena_alignment`. With several functions the arenas are
    shared: each size is the largest over the functions; the statistics
    (`-mlir-pass-statistics`) are these sizes. An analysis remark on each
    function (`--remarks-filter=lethe-assign-buffers`) states its arena
    against its max-live bound.

    ```mlir
    %0 = lethe.node "aten.mm.default" fwd (%a, %b) {lethe.offsets = array<i64: 0>} : ...
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "alignment of every offset and buffer size, bytes (a power of "
           "two)">,
  ];
  let statistics = [
    Statistic<"numDeviceBuffers", "num-device-buffers",
              "Device buffers placed">,
    Statistic<"numHostBuffers", "num-host-buffers",
              "Pinned host buffers placed">,
    Statistic<"deviceArenaBytes", "device-arena-bytes",
              "Device arena size, bytes">,
    Statistic<"maxLiveBytes", "max-live-bytes",
              "Most device bytes live at once (the arena's lower bound)">,
    Statistic<"hostArenaBytes", "host-arena-bytes",
              "Pinned host arena size, bytes">,
    Statistic<"hostMaxLiveBytes", "host-max-live-bytes",
              "Most pinned host bytes live at once">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

def Materialize : Pass<"lethe-materialize", "mlir::ModuleOp"> {
  let summary = "Rewrite the plan's decisions into an explicit program";
  let description = [{
    Reads the decisions lethe-plan recorded on the producing ops
    (`lethe.decisions`, `lethe.placement`; docs/Pipeline.md §3) under the
    planner's own options (`replay_rng` of the function's `#lethe.plan`) as
    the schedule the planner simulated (readScheduledPlan, PlanAttributes.h:
    nothing is re-planned) and writes it out as ops (§4):

    - graph nodes in the schedule's order, each reading the latest version
      of its operands;
    - before a restore point, one `lethe.recompute` region re-running the
      chain of every value recomputed there (a shared sub-chain once), and
      the views re-created on prefetched values; it yields what later ops
      read, and releases inside it what they do not;
    - offload: a compute barrier, `lethe.offload` awaiting it, and the
      device buffer's `lethe.release` awaiting the copy where the plan
      releases it; prefetch: `lethe.prefetch` awaiting the host copy and a
      compute barrier where the plan issues it, `lethe.await` forwarding the
      device value before its first reader, and the host buffer's release;
    - every other storage released after its last reader (awaiting the
      readers on other streams), except the step's outputs;
    - a collective awaits a compute barrier; its readers a comm barrier
      issued after it; the step ends awaiting every stream.

    A function without decisions is materialized as planned by `policy
    none` (every activation retained): only releases are added. Decisions
    without a placement are placed with the device profile (`device`).
    Every function gets an analysis remark (category `lethe-materialize`,
    shown with `--remarks-filter=lethe-materialize`) counting what was
    materialized; the same counts are the pass's statistics.
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h200\"",
           "device profile used to place decisions that lack a placement">,
  ];
  let statistics = [
    Statistic<"numRecomputeRegions", "num-recompute-regions",
              "Recompute regions (lethe.recompute) created">,
    Statistic<"numRerunNodes", "num-rerun-nodes", "Nodes re-run in them">,
    Statistic<"numDecisions", "num-decisions",
              "Decisions read from the plan (lethe.decisions entries)">,
    Statistic<"numOffloads", "num-offloads", "Offloads created">,
    Statistic<"numPrefetches", "num-prefetches", "Prefetches created">,
    Statistic<"offloadedBytes", "offloaded-bytes",
              "Bytes the offloads copy to the host">,
    Statistic<"numReleases", "num-releases", "Releases created">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

def ScheduleProgram : Pass<"lethe-schedule", "mlir::ModuleOp"> {
  let summary = "Put every op on a stream and make every cross-stream "
                "dependence an explicit barrier and await";
  let description = [{
    Turns an explicit program (docs/Pipeline.md §4) into a scheduled one
    (§5), keeping its issue order, which lethe-materialize took from the
    plan's placement (prefetches issued as late as the H2D queue allows
    while still hidden, releases when the D2H copy is predicted done):

    - every op gets `lethe.stream`: copies on d2h / h2d, collectives on
      comm, everything else on compute (an explicit `lethe.stream` is kept);
    - every dependence across streams is made explicit: an op that reads a
      value written on another stream, a release of (or in-place write to)
      a storage another stream still uses, and an op that allocates on a
      non-compute stream after a release (so that lethe-assign-buffers may
      hand it the released memory) wait for a timepoint covering the other
      stream's op: that op's own timepoint when it is a copy, else a
      `lethe.barrier` of its stream inserted just before the waiting op.
      Copies and releases take the timepoint as their `await` operand
      (joined with the one they had); other ops get a `lethe.await` on their
      stream just before them;
    - contention, for programs with both host copies and collectives:
      `overlap` (`contention=off`): they run side by side; `separate`
      (`contention=on`): copies are kept out of collective windows, a copy
      awaiting every collective issued before it and a collective every
      copy issued before it; `yield` (`contention=yield`): they overlap in
      the IR and the runtime issues copies in chunks of `copy-chunk-bytes`
      that wait while a collective runs (the function gets
      `lethe.copy_chunk_bytes`, which lethe-lower-to-runtime turns into
      letheRtSetCopyYield; auto halves the chunk, down to 256 KiB, until the
      simulated collectives beside in-flight chunks stay within the
      tolerance). `contention=auto` overlaps when the device
      profile says they do not slow each other down
      (`collectiveSlowdownWithCopies` and the both-directions factor at
      most `contention-threshold`, `copySlowdownWithCollectives` at least
      its inverse); otherwise it simulates the three and picks the fastest
      step among those whose collective time stays within
      `collective-tolerance` of the collectives' time without copies, with
      a passed remark giving the numbers (`--remarks-filter=lethe-schedule`;
      a program without op times keeps the old rule, separate, with a
      missed remark). The function gets `lethe.contention`.

    Dependences already covered by the program's own barriers and awaits
    get nothing new, so running the pass twice changes nothing.

    With `place-prefetches=true` the pass first re-places every prefetch
    (the pipeline leaves it off: lethe-materialize already issues them where
    the plan does): at the latest point in issue order at which, by the
    predicted compute timeline (`time_us` of the compute ops) and the
    device's H2D bandwidth, the copy still ends before its first reader,
    copies queueing FIFO on the H2D stream, so that it is hidden yet holds
    its device buffer as briefly as it can; never before the release of the
    buffer it restores, and no earlier than the module's
    `lethe.budget_bytes` allows.
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h200\"",
           "built-in device profile name, or the path of a JSON profile">,
    Option<"contention", "contention", "std::string", /*default=*/"\"auto\"",
           "how copies share time with collectives: auto (from the device "
           "profile and a simulation), on (separate), off (overlap), yield">,
    Option<"contentionThreshold", "contention-threshold", "double",
           /*default=*/"1.05",
           "slowdown factor above which copies and collectives contend">,
    Option<"placePrefetches", "place-prefetches", "bool", /*default=*/"false",
           "re-place prefetches: latest hidden point, within the budget">,
    Option<"copyChunkBytes", "copy-chunk-bytes", "int64_t",
           /*default=*/"8 << 20",
           "chunk size of copies that yield to collectives (at least 64 "
           "KiB); contention=auto halves it (down to 256 KiB) until the "
           "simulated collectives stay within the tolerance">,
    Option<"collectiveTolerance", "collective-tolerance", "double",
           /*default=*/"0.05",
           "contention=auto: how much slower than without copies the "
           "collectives may run">,
    Option<"writeStreams", "write-streams", "bool", /*default=*/"true",
           "write every op's stream as `lethe.stream`, also where it is the "
           "op's own (false: only on the barriers and awaits inserted; a "
           "program only measured, never lowered)">,
  ];
  let statistics = [
    Statistic<"numBarriers", "num-barriers", "Barriers inserted">,
    Statistic<"numAwaits", "num-awaits",
              "Awaits inserted or timepoints added to an op's await">,
    Statistic<"numContentionWaits", "num-contention-waits",
              "Waits that keep copies and collectives apart">,
    Statistic<"numPrefetchesMoved", "num-prefetches-moved",
              "Prefetches re-placed">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

def VerifyProgram : Pass<"lethe-verify", "mlir::ModuleOp"> {
  let summary = "Check the explicit-program contract: memory, lifetimes, "
                "stream ordering";
  let description = [{
    Checks every function of the module against the contract of
    docs/Pipeline.md and fails with an error at the offending op, naming
    the value, unless:

    - memory: the device arena (`lethe.device_arena_bytes`) and every
      buffer's end are within the budget (`budget` option, else the module's
      `lethe.budget_bytes`); every allocating result has an offset, inside
      its arena, aligned; no two buffers whose lifetimes intersect overlap.
      With `allocated=false` (a materialized or scheduled program, before
      lethe-assign-buffers) the offsets are not required and the bytes live
      at any point must be within the budget instead;
    - lifetimes: no value is used after its storage's release (through any
      view or forward), no storage is released twice, every storage the
      step allocates is released unless the step returns it;
    - stream order: an op reads a value written on another stream only
      after awaiting a timepoint that covers the write (a `lethe.await` on
      its stream, or a copy's `await`), so an offload awaits a barrier of its
      source's stream issued after the producer; a release (on the compute
      stream) awaits every use on other streams, such as the D2H copy of an
      offloaded value; an in-place write awaits earlier reads on other
      streams; and an op writing arena bytes on another stream (a prefetch)
      awaits a compute barrier issued after the release of the buffer that
      held them before.

    Happens-before is computed with one vector clock per stream: barriers
    and copy timepoints carry the clock of their stream, `lethe.join` merges
    them and an await raises the clock of the stream it is on.
  }];
  let options = [
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "device budget (bytes, or with a unit: 512MiB, 2GB); default: the "
           "module's lethe.budget_bytes, if any">,
    Option<"allocated", "allocated", "bool", /*default=*/"true",
           "require the arena offsets of lethe-assign-buffers">,
  ];
  let statistics = [
    Statistic<"numBuffers", "num-buffers", "Buffers checked">,
    Statistic<"numCrossStreamReads", "num-cross-stream-reads",
              "Reads of values written on another stream">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

def InsertFsdpCollectives : Pass<"lethe-insert-fsdp-collectives",
                                 "mlir::func::FuncOp"> {
  let summary = "Turn a single-rank training step into its FSDP (ZeRO-3) form";
  let description = [{
    Rewrites a canonical training step (docs/Pipeline.md, phase 1) into the
    step one of `world` ranks runs under fully sharded data parallelism:

    - every parameter argument (`lethe.kind = "param"`) becomes its rank's
      shard: dimension 0 divided by `world`, rounded up (`ceil(d0 / world)`
      rows; the last ranks' rows past `d0` are zero padding). Scalars stay
      whole (replicated). The argument keeps its name and gains
      `lethe.full_type`, the unsharded type. Padded parameters are counted
      (`num-padded-params`) and each gets an analysis remark
      (`--remarks-filter=lethe-insert-fsdp-collectives`);
    - parameters are grouped into FSDP units by name: the prefix up to the
      first numeric component (`transformer.h.3.attn.c_attn.weight` ->
      `transformer.h.3`), else the module path (`transformer.wte`);
    - per unit and phase (forward, backward), the unit's parameters that the
      phase reads are all-gathered before the phase first reads one of them:
      `prefetch` units ahead (FSDP's prefetch, default 1: right before the
      first use of the unit the phase reads before it; 0: right before the
      unit's own first use); the phase's ops read the gathered values,
      which are separate per phase so that their lifetimes end at the
      phase's last use. With `bucket=unit`, one all-gather per unit (and
      element type) moves a flat buffer packed by
      `fsdp.pack_shards` and unpacked by `fsdp.unpack_gathered`,
      as FSDP2 does; with `bucket=param`, each parameter is gathered alone.
      Views of a parameter made in the forward and read in the backward are
      re-made in the backward from the backward's gathered value;
    - gradients (the step's results; `lethe.grad_of` names the parameter,
      else they are matched to parameters in order by type) are
      reduce-scattered per unit right after the last of them is produced;
      the step returns gradient shards.

    Every rank runs the same program: the rewrite depends only on the graph
    and the options. With `bandwidth` > 0, collectives get `time_us` from
    the ring formula `latency + (world-1)/world * bytes / bandwidth` (twice
    that for all-reduce); otherwise `lethe-annotate-costs` times them.
    The function records `lethe.ranks_per_host` (`ranks-per-host`, default
    all `world` ranks): the ranks of one host copying at once share its
    bandwidth in the simulator (the device profile's host_* figures).
    docs/Parallel.md has the rules and an example.
  }];
  let options = [
    Option<"world", "world", "int64_t", /*default=*/"2",
           "number of ranks the parameters are sharded over">,
    Option<"bucket", "bucket", "std::string", /*default=*/"\"unit\"",
           "collective granularity: 'unit' (one per FSDP unit and element "
           "type) or 'param' (one per parameter)">,
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"1",
           "issue each unit's all-gather this many units ahead of its "
           "first use in the phase (0: just before it)">,
    Option<"bandwidth", "bandwidth", "double", /*default=*/"0.0",
           "ring bus bandwidth in GB/s used to set the collectives' "
           "time_us; 0 leaves them untimed">,
    Option<"latencyUs", "latency-us", "double", /*default=*/"0.0",
           "fixed time added to every timed collective, microseconds">,
    Option<"ranksPerHost", "ranks-per-host", "int64_t", /*default=*/"0",
           "ranks that share one host's copy bandwidth (recorded for the "
           "planner and simulator as lethe.ranks_per_host; 0: all "
           "`world` ranks on one host)">,
  ];
  let statistics = [
    Statistic<"numShardedParams", "num-sharded-params",
              "Parameters sharded over the ranks">,
    Statistic<"numPaddedParams", "num-padded-params",
              "Sharded parameters whose dimension 0 the ranks do not "
              "divide (zero-padded)">,
    Statistic<"numUnits", "num-units", "FSDP units (parameter groups)">,
    Statistic<"numAllGathers", "num-all-gathers", "All-gathers inserted">,
    Statistic<"numReduceScatters", "num-reduce-scatters",
              "Reduce-scatters inserted">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

def ImportOps : Pass<"lethe-import-ops", "mlir::ModuleOp"> {
  let summary = "Normalise every imported compute op into the lethe graph form";
  let description = [{
    Rewrites, inside each `func.func`, every op that is not already a
    `lethe` or `func` op into a `lethe.node` (or a `lethe.collective`): the
    unregistered generic-form ops of PyTorch (`aten.*`, torch-mlir's
    `torch.aten.*` with `!torch.vtensor` types) and JAX (`stablehlo.*`)
    exports, and upstream `linalg`, `tensor`, `tosa` and `arith` ops. The
    result is the canonical form `TrainingGraph::fromFunction` reads (see
    docs/Import.md).

    - `kind` is the source op's name (torch-mlir's `torch.` prefix dropped,
      an `overload` attribute appended).
    - Types become static builtin tensors (`!torch.vtensor<[2,3],f32>` ->
      `tensor<2x3xf32>`); dynamic shapes, unranked tensors and unknown
      element types are errors at the op.
    - Results alias an operand for views (ATen view ops, `is_view`,
      `tensor.expand_shape` / `collapse_shape` / `extract_slice` / `cast`),
      in-place ATen ops and the `outs` of destination-passing ops (linalg).
    - Scalar constants (`torch.constant.*`, scalar `arith.constant`,
      `tosa.const_shape`) and `torch.prim.ListConstruct` are folded into
      the user's positional `args` (`{in = k}` marks tensor input k).
      Tensor constants stay, as nodes that allocate their bytes.
    - `time_us`, `phase` and `scope` attributes of the source op are kept;
      its other attributes go to `lethe.attrs`. Regions (reduction bodies)
      are dropped; control flow is an error.
    - Without a `phase`, an op is backward iff it transitively depends on a
      gradient seed (an argument with `lethe.kind = "tangent"` or named
      `tangents_*`) or its JAX name stack contains `transpose(`.
    - `func.call`s of functions in the module are inlined first (JAX puts
      model code in private functions); functions left without uses are
      erased.
  }];
  let statistics = [
    Statistic<"numNodes", "num-nodes", "Ops rewritten into lethe.node">,
    Statistic<"numCollectives", "num-collectives",
              "Ops rewritten into lethe.collective">,
    Statistic<"numFolded", "num-folded-constants",
              "Scalar constants and lists folded into args">,
    Statistic<"numInlined", "num-inlined-calls", "Calls inlined">,
    Statistic<"numBackward", "num-backward",
              "Ops without a phase attribute inferred to be backward">,
  ];
  let dependentDialects = ["lethe::LetheDialect", "mlir::func::FuncDialect"];
}

def ExpandPipelineSchedule : Pass<"lethe-expand-pipeline-schedule",
                                  "mlir::func::FuncOp"> {
  let summary = "Write out one pipeline stage's program over all micro-batches";
  let description = [{
    Turns a training step for one micro-batch into the program of pipeline
    stage `stage` of `stages`, running `microbatches` micro-batches in the
    order of `schedule`:

    - the step is split into `stages * vpp` chunks (virtual stages) by
      layer: ops whose scope has a numeric component (`transformer.h.3.*`)
      belong to that layer; consecutive layers are grouped so that the
      largest chunk's op time (forward + backward) is least; the embedding
      goes with the first chunk, the head and loss with the last. Chunk `c`
      runs on stage `c % stages`;
    - `1f1b`: warm-up forwards (stages - stage - 1), then one forward and
      one backward alternately, then the remaining backwards;
      `interleaved`: Megatron-LM's schedule over `vpp` chunks per stage
      (microbatches must be a multiple of stages);
    - every op of the stage is cloned per micro-batch (attributes `lethe.mb`
      and `lethe.chunk`), so each micro-batch's values are distinct; each
      copy of a node after the first gets a `lethe.node_id` of its own (the
      plan names nodes by it);
      parameters and buffers are shared, data inputs and the gradient seed
      become one argument per micro-batch;
    - values crossing stages are sent and received with `lethe.collective
      send` / `recv` (the comm stream) between compute units, Megatron's
      grouping; forward ops that depend on no layer and draw no random
      numbers (masks, position ids) are re-run on each stage that reads
      them instead;
    - the step's backward results (gradients) are summed over micro-batches
      in place (`aten.add_.Tensor`); forward results (the loss) are
      returned per micro-batch. A stage returns only the results it
      computes.

    Before emitting, the pass derives every stage's transfers and checks
    that each pair of stages agrees on their order and that the groups
    complete without deadlock. The function records
    `lethe.pipeline = #lethe.pipeline<schedule = ..., stages = ..., stage =
    ..., microbatches = ..., vpp = ...>` and
    `lethe.ranks_per_host` (`ranks-per-host`, default all `stages`): the
    stages of one host share its copy bandwidth in the simulator (the device
    profile's host_* figures). The split and the stage's order are a
    passed remark (`--remarks-filter=lethe-expand-pipeline-schedule`).
    docs/Parallel.md has the details.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "number of pipeline stages">,
    Option<"stage", "stage", "int64_t", /*default=*/"0",
           "the stage whose program to write, in [0, stages)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"4",
           "micro-batches per step">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "'1f1b' or 'interleaved'">,
    Option<"vpp", "vpp", "int64_t", /*default=*/"1",
           "chunks (virtual stages) per stage; > 1 needs "
           "schedule=interleaved">,
    Option<"ranksPerHost", "ranks-per-host", "int64_t", /*default=*/"0",
           "stages that share one host's copy bandwidth (recorded for the "
           "planner and simulator as lethe.ranks_per_host; 0: all "
           "`stages` on one host)">,
  ];
  let statistics = [
    Statistic<"numClonedOps", "num-cloned-ops",
              "Ops written out (all micro-batches)">,
    Statistic<"numSends", "num-sends", "Sends inserted">,
    Statistic<"numRecvs", "num-recvs", "Receives inserted">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

def PlanActivations : Pass<"lethe-plan", "mlir::ModuleOp"> {
  let summary = "Decide retain / recompute / offload for every activation "
                "under a device-memory budget";
  let description = [{
    Plans every function of the module (Lethe's canonical graph form, times
    on the nodes): builds its TrainingGraph, runs the policy, and records
    the decision of every activation (a storage produced by a forward node
    and read by a later part) on the op that produces it. The memory model
    (device memory at every instant, not saved bytes), the time model and
    every policy are stated in docs/Planner.md.

    Policies (`policy=`): `none`, `full` (recompute everything inside each
    layer, keep layer boundaries), `every-n` (`full` on every `n`-th layer),
    `selective-op` (keep outputs of `keep-ops`, default matmul-like and
    attention; with `offload-kept` they go to host), `offload-all`, and
    `auto` (joint recompute + offload, least predicted step time with the
    peak within the budget at every instant).

    `budget` is bytes (`2147483648`), a size with a unit (`2GiB`, `800MB`)
    or a percentage of the unplanned peak (`60%`); empty means no limit. A
    budget the policy cannot meet is an error that states the least budget
    it can meet; `least` plans at that budget (the planner's least peak
    here; `lethe plan`, `lethe compile` and the pipeline take the least
    packed arena instead, which their programs meet).

    `alignment` rounds every storage the step allocates up to a multiple of
    it before planning, as `lethe-assign-buffers` lays buffers out in the
    arena, so that the planned peak is the allocated program's max-live and
    a plan that fills the budget to the byte still fits once allocated. The
    default is the arena's (256), as on every other route (`lethe plan`, the
    C API, Python, `lethe-pipeline`: all plan through `planStep` with this
    pass's options, PlanStep.h); 1 plans tensor bytes as they are. A
    percentage budget is of the aligned unplanned peak.

    Results, on each op producing activations (one entry per result; `unit`
    for results that are not activations):

    - `lethe.decisions`: `#lethe<decision retain|recompute|offload>`;
    - `lethe.placement`: for recomputed and offloaded results, a
      `#lethe.placement` naming nodes by their `lethe.node_id` (never by
      position): `restore_before` (the value is back on the device before
      this node), for offload `release_after` and `prefetch_after`, and
      `nodes` (the nodes re-run: the recompute chain, or the views
      re-created after a prefetch).

    On each function, `lethe.plan`: a `#lethe.plan` with `policy`,
    `budget_bytes`, `feasible`, `peak_bytes`, `baseline_peak_bytes`,
    `step_us`, `baseline_step_us`, `overhead` (the predicted numbers of the
    simulator); on the module, `lethe.budget_bytes` (read by
    `lethe-verify`).

    Every decision comes with an optimization remark (category `lethe-plan`,
    subcategory the decision) saying why: bytes freed, time it costs, the
    alternative it beat. Show them with `--remarks-filter=lethe-plan`; add
    `--remark-format=emitRemark` to see them as diagnostics (and to check
    them with `-verify-diagnostics`).

    ```mlir
    // lethe-opt --lethe-plan='budget=60% policy=auto device=h200'
    %1 = lethe.node "aten.gelu.default" fwd (%0) {
        lethe.decisions = [#lethe<decision recompute>],
        lethe.placement = [#lethe.placement<restore_before = 7, nodes = [1]>],
        ...} : ...
    ```
  }];
  let options = [
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "device bytes the step may allocate at any instant: bytes, a size "
           "with a unit (KiB, MiB, GiB, KB, MB, GB), a percentage of the "
           "unplanned peak (60%) or `least` (the least the policy can "
           "meet); empty: no limit (the `lethe` commands need one)">,
    Option<"policy", "policy", "std::string", /*default=*/"\"auto\"",
           "none, full, every-n, selective-op, offload-all or auto">,
    Option<"device", "device", "std::string", /*default=*/"\"h200\"",
           "built-in device profile name, or the path of a JSON profile">,
    Option<"everyN", "n", "int", /*default=*/"2",
           "every-n: checkpoint layers 0, n, 2n, ...">,
    ListOption<"keepOps", "keep-ops", "std::string",
               "selective-op: op kinds whose outputs are kept (substring of "
               "the op name); default matmul-like ops and attention">,
    Option<"offloadKept", "offload-kept", "bool", /*default=*/"false",
           "selective-op: send the kept outputs to host instead">,
    Option<"minOffloadBytes", "min-offload-bytes", "std::string",
           /*default=*/"\"1MiB\"",
           "never offload a storage smaller than this">,
    Option<"hostBudget", "host-budget", "std::string", /*default=*/"\"\"",
           "pinned host bytes offloaded storages may occupy; empty: the "
           "device profile's host memory">,
    Option<"solver", "solver", "std::string", /*default=*/"\"auto\"",
           "auto policy: fast, exact, or auto (exact when the graph is "
           "small)">,
    Option<"replayRng", "replay-rng", "bool", /*default=*/"false",
           "allow recomputing RNG ops (dropout): only sound when the runtime "
           "replays their RNG state">,
    Option<"bound", "bound", "bool", /*default=*/"false",
           "also compute a lower bound on the step-time overhead of any plan "
           "at the budget (docs/Bound.md), reported as a remark and in the "
           "lower-bound-overhead-ppm statistic">,
    Option<"threads", "threads", "unsigned", /*default=*/"1",
           "threads the auto solver may use (1: one; 0: the cores idle when "
           "it starts, at most 4); the plans are the same whatever the "
           "number">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "plan every allocated storage at its size rounded up to this "
           "(a power of two): the arena alignment of lethe-assign-buffers">,
    Option<"planFile", "plan-file", "std::string", /*default=*/"\"\"",
           "evaluate the plan in this JSON file instead of planning (policy "
           "given): {\"decisions\": [{\"node_id\": N or \"node\": NAME, "
           "\"output\": K, \"decision\": retain, recompute or offload}]}, "
           "as `lethe plan --json` writes them (the driver's --plan-file)">,
  ];
  let statistics = [
    Statistic<"numActivations", "num-activations", "Activations decided">,
    Statistic<"numRetained", "num-retained", "Activations retained">,
    Statistic<"numRecomputed", "num-recomputed", "Activations recomputed">,
    Statistic<"numOffloaded", "num-offloaded", "Activations offloaded">,
    Statistic<"recomputedBytes", "recomputed-bytes",
              "Bytes of the recomputed activations (aligned, as planned)">,
    Statistic<"offloadedBytes", "offloaded-bytes",
              "Bytes of the offloaded activations (aligned, as planned)">,
    Statistic<"peakBytes", "peak-bytes",
              "Predicted peak device bytes of the planned step">,
    Statistic<"baselinePeakBytes", "baseline-peak-bytes",
              "Peak device bytes of the unplanned step">,
    Statistic<"stepUs", "step-us",
              "Predicted step time of the planned step, microseconds">,
    Statistic<"baselineStepUs", "baseline-step-us",
              "Predicted step time of the unplanned step, microseconds">,
    Statistic<"lowerBoundOverheadPpm", "lower-bound-overhead-ppm",
              "With bound: no plan's overhead is lower, parts per million">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

#endif // LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_TD

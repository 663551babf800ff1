//===- LetheDialect.td - Lethe dialect definition ----------*- tablegen -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEDIALECT_TD
#define LETHE_DIALECT_LETHE_IR_LETHEDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Lethe_Dialect : Dialect {
  let name = "lethe";
  let cppNamespace = "::lethe";
  let summary = "Training-step activation memory: retain, recompute, offload.";
  let description = [{
    The `lethe` dialect carries one training step (forward, backward and
    optimizer ops in program order) and the decisions Lethe makes about its
    activations: which to retain on the device, which to recompute before
    their first backward use, and which to offload to host memory and
    prefetch back.

    Imported compute ops are carried by `lethe.node`, which keeps the source
    op's name (`aten.mm.default`, `stablehlo.dot_general`, ...), its phase
    and its measured or modelled time. Asynchrony is modelled as in IREE's
    `stream` dialect: copies produce a `!lethe.timepoint`, consumers
    `lethe.await` it, and `lethe.join` merges timepoints. Host-resident
    values have type `!lethe.host<tensor<...>>`, so a device op can never
    read host memory by accident: the verifier rejects it.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;

  // Every `lethe.*` attribute Lethe sets on an op, function argument or
  // result (docs/Dialect.md lists where each goes). The generated
  // `LetheDialect::<Name>AttrHelper` is the one spelling of each name; the
  // dialect verifies each where it is set and rejects any other `lethe.*`.
  let discardableAttrs = (ins
    // On the module: what the importer read; the device budget the plan
    // was made for; the arena sizes, max-live lower bounds and alignment of
    // every offset and size, which lethe-assign-buffers wrote.
    "::mlir::StringAttr":$model,
    "::mlir::StringAttr":$device,
    "::lethe::TotalsAttr":$totals,
    "::mlir::IntegerAttr":$budget_bytes,
    "::mlir::IntegerAttr":$device_arena_bytes,
    "::mlir::IntegerAttr":$host_arena_bytes,
    "::mlir::IntegerAttr":$max_live_bytes,
    "::mlir::IntegerAttr":$host_max_live_bytes,
    "::mlir::IntegerAttr":$arena_alignment,
    "::mlir::FloatAttr":$predicted_step_us,
    // On the step function: the plan summary; how host copies share time
    // with collectives ("overlap", "separate", "yield") and, with yield, the
    // yielding copies' chunk size (lethe-schedule); how many ranks share a
    // host's copy bandwidth, the pipeline stage and the FSDP world (the
    // parallel passes).
    "::lethe::PlanAttr":$plan,
    "::lethe::CopyContentionAttr":$contention,
    "::mlir::IntegerAttr":$copy_chunk_bytes,
    "::mlir::IntegerAttr":$ranks_per_host,
    "::lethe::PipelineAttr":$pipeline,
    "::mlir::IntegerAttr":$fsdp_world,
    // On the step's arguments and results.
    "::mlir::StringAttr":$kind,
    "::mlir::StringAttr":$name,
    "::mlir::TypeAttr":$full_type,
    "::mlir::StringAttr":$grad_of,
    // A unit on an argument, the saved result indices on a node.
    "::mlir::Attribute":$saved,
    // On nodes (and, for `mb`, on arguments): the exported node, its
    // source attributes, its cost, the plan's decisions, the pipeline
    // microbatch and chunk.
    "::mlir::IntegerAttr":$node_id,
    "::mlir::DictionaryAttr":$attrs,
    "::lethe::CostSourceAttr":$cost_source,
    "::mlir::ArrayAttr":$decisions,
    "::mlir::ArrayAttr":$placement,
    "::mlir::IntegerAttr":$mb,
    "::mlir::IntegerAttr":$chunk,
    // On the scheduled and allocated program's ops: the stream; one arena
    // offset per result (-1: allocates nothing); on a send or recv, the NCCL
    // group issued together (what it reads stays live until the group's
    // last op).
    "::lethe::StreamAttr":$stream,
    "::mlir::DenseI64ArrayAttr":$offsets,
    "::mlir::IntegerAttr":$p2p_group
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
  }];
}

class Lethe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Lethe_Dialect, mnemonic, traits>;

#endif // LETHE_DIALECT_LETHE_IR_LETHEDIALECT_TD

//===- LetheAttrs.td - Lethe attributes --------------------*- tablegen -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEATTRS_TD
#define LETHE_DIALECT_LETHE_IR_LETHEATTRS_TD

include "lethe/Dialect/Lethe/IR/LetheDialect.td"
include "mlir/IR/EnumAttr.td"

def Lethe_Decision : I32EnumAttr<"Decision",
    "what happens to an activation between its forward and backward uses", [
      I32EnumAttrCase<"Retain", 0, "retain">,
      I32EnumAttrCase<"Recompute", 1, "recompute">,
      I32EnumAttrCase<"Offload", 2, "offload">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_DecisionAttr : EnumAttr<Lethe_Dialect, Lethe_Decision, "decision">;

def Lethe_Phase : I32EnumAttr<"Phase", "part of the training step", [
      I32EnumAttrCase<"Fwd", 0, "fwd">,
      I32EnumAttrCase<"Bwd", 1, "bwd">,
      I32EnumAttrCase<"Opt", 2, "opt">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_PhaseAttr : EnumAttr<Lethe_Dialect, Lethe_Phase, "phase">;

def Lethe_Stream : I32EnumAttr<"Stream", "execution stream of an op", [
      I32EnumAttrCase<"Compute", 0, "compute">,
      I32EnumAttrCase<"D2H", 1, "d2h">,
      I32EnumAttrCase<"H2D", 2, "h2d">,
      I32EnumAttrCase<"Comm", 3, "comm">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_StreamAttr : EnumAttr<Lethe_Dialect, Lethe_Stream, "stream">;

def Lethe_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "collective communication operation", [
      I32EnumAttrCase<"AllGather", 0, "all_gather">,
      I32EnumAttrCase<"ReduceScatter", 1, "reduce_scatter">,
      I32EnumAttrCase<"AllReduce", 2, "all_reduce">,
      I32EnumAttrCase<"AllToAll", 3, "all_to_all">,
      I32EnumAttrCase<"Send", 4, "send">,
      I32EnumAttrCase<"Recv", 5, "recv">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_CollectiveKindAttr
    : EnumAttr<Lethe_Dialect, Lethe_CollectiveKind, "collective">;

def Lethe_CostSource : I32EnumAttr<"CostSource", "where a node's time comes from", [
      // A time on the op (measured on a device, or set by an earlier run).
      I32EnumAttrCase<"Measured", 0, "measured">,
      // FLOPs over the device's rate, bounded below by bytes over bandwidth.
      I32EnumAttrCase<"Analytic", 1, "analytic">,
      // Bytes moved over HBM (or peer) bandwidth, or the view time.
      I32EnumAttrCase<"Bandwidth", 2, "bandwidth">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_CostSourceAttr
    : EnumAttr<Lethe_Dialect, Lethe_CostSource, "cost_source">;

def Lethe_Policy : I32EnumAttr<"Policy", "how the planner decided", [
      // Retain everything.
      I32EnumAttrCase<"None", 0, "none">,
      // Recompute everything inside each layer, keep layer inputs.
      I32EnumAttrCase<"Full", 1, "full">,
      // Checkpoint every n-th layer (torchtune).
      I32EnumAttrCase<"EveryN", 2, "every-n">,
      // Keep outputs of listed op kinds, recompute the rest.
      I32EnumAttrCase<"SelectiveOp", 3, "selective-op">,
      // Offload every eligible activation (TransformerEngine).
      I32EnumAttrCase<"OffloadAll", 4, "offload-all">,
      // Joint recompute + offload minimising step time.
      I32EnumAttrCase<"Auto", 5, "auto">,
      // Decisions given from elsewhere (`--plan-file FILE`), evaluated.
      I32EnumAttrCase<"Given", 6, "given">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
  // `every-n` is no keyword: quoted where it must be.
  let parameterPrinter =
      "$_printer.printKeywordOrString(stringifyPolicy($_self))";
}
def Lethe_PolicyAttr : EnumAttr<Lethe_Dialect, Lethe_Policy, "policy">;

def Lethe_CopyContention : I32EnumAttr<"CopyContention",
    "how host copies share time with collectives in a scheduled program", [
      // Side by side, slowing each other by the profile's factors.
      I32EnumAttrCase<"Overlap", 0, "overlap">,
      // Copies pause while a collective runs (the runtime's yielding copies).
      I32EnumAttrCase<"Yield", 1, "yield">,
      // Copies wait until the collectives they would overlap are done.
      I32EnumAttrCase<"Separate", 2, "separate">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_CopyContentionAttr
    : EnumAttr<Lethe_Dialect, Lethe_CopyContention, "contention">;

def Lethe_PipelineScheduleKind : I32EnumAttr<"PipelineScheduleKind",
    "the order of a pipeline stage's micro-batches", [
      // One forward, one backward (PipeDream-Flush, Megatron-LM's default).
      I32EnumAttrCase<"OneFOneB", 0, "1f1b">,
      // Megatron-LM's interleaved schedule over `vpp` chunks per stage.
      I32EnumAttrCase<"Interleaved", 1, "interleaved">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
  // `1f1b` is no keyword: quoted where it must be.
  let parameterPrinter =
      "$_printer.printKeywordOrString(stringifyPipelineScheduleKind($_self))";
}

//===----------------------------------------------------------------------===//
// The plan
//===----------------------------------------------------------------------===//

class Lethe_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Lethe_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// A double, printed as MLIR prints an f64 (`1.250000e+02`) without the type.
def Lethe_F64Parameter : APFloatParameter<"a float"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if (::mlir::failed($_parser.parseFloat(value)))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = [{ $_printer.printFloat($_self) }];
}

def Lethe_OptionalF64Parameter
    : OptionalParameter<"std::optional<::llvm::APFloat>", "a float, or none"> {
  let comparator = "$_lhs.has_value() == $_rhs.has_value() && "
                   "(!$_lhs || $_lhs->bitwiseIsEqual(*$_rhs))";
  let parser = [{ [&]() -> ::mlir::FailureOr<std::optional<::llvm::APFloat>> {
    double value;
    if (::mlir::failed($_parser.parseFloat(value)))
      return ::mlir::failure();
    return std::optional<::llvm::APFloat>(::llvm::APFloat(value));
  }() }];
  let printer = [{ $_printer.printFloat(*$_self) }];
}

// `defaultValue` empty: always printed; else omitted when equal to it.
class Lethe_BoolParam<string default> : AttrParameter<"bool", "true or false"> {
  let defaultValue = default;
  let parser = [{ [&]() -> ::mlir::FailureOr<bool> {
    if (::mlir::succeeded($_parser.parseOptionalKeyword("true")))
      return true;
    if (::mlir::failed($_parser.parseKeyword("false")))
      return ::mlir::failure();
    return false;
  }() }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

def Lethe_BoolParameter : Lethe_BoolParam<"">;
// A flag that is false unless printed (`replay_rng = true`).
def Lethe_DefaultFalseParameter : Lethe_BoolParam<"false">;

// Node ids (`lethe.node_id`), in brackets (`[]` when none).
def Lethe_NodeListParameter : ArrayRefParameter<"int64_t", "node ids"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::SmallVector<int64_t>> {
    ::llvm::SmallVector<int64_t> nodes;
    if (::mlir::failed($_parser.parseCommaSeparatedList(
            ::mlir::AsmParser::Delimiter::Square,
            [&] { return $_parser.parseInteger(nodes.emplace_back()); })))
      return ::mlir::failure();
    return nodes;
  }() }];
  let printer = [{
    $_printer << '[';
    ::llvm::interleaveComma($_self, $_printer);
    $_printer << ']';
  }];
}

def Lethe_PlacementAttr : Lethe_Attr<"Placement", "placement"> {
  let summary = "where a recomputed or offloaded activation is restored";
  let description = [{
    One entry of a node's `lethe.placement`, for a result lethe-plan
    recomputes or offloads. Nodes are named by their `lethe.node_id` (the
    exported node's id, or the one lethe-plan gave a node without one),
    never by their position, so a plan stays true of the function with its
    nodes listed in another order: the restore comes before node
    `restore_before` (the value's first backward use); an offload is copied
    out after node `release_after` and its prefetch issued after node
    `prefetch_after`; `nodes` are the nodes a recompute re-runs, in program
    order. lethe-materialize rejects an id no node of the function has.

    ```mlir
    #lethe.placement<restore_before = 12, nodes = [3, 4]>
    #lethe.placement<restore_before = 12, release_after = 4,
                     prefetch_after = 9, nodes = []>
    ```
  }];
  let parameters = (ins
    "int64_t":$restore_before,
    OptionalParameter<"std::optional<int64_t>">:$release_after,
    OptionalParameter<"std::optional<int64_t>">:$prefetch_after,
    Lethe_NodeListParameter:$nodes
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Lethe_PlanAttr : Lethe_Attr<"Plan", "plan"> {
  let summary = "the plan lethe-plan made for a function";
  let description = [{
    The summary lethe-plan leaves on the function it planned: the policy,
    the budget (bytes; INT64_MAX: none), the planned activation peak and
    step time against the unplanned step's, the relative step-time overhead
    and, with `bound=true`, a lower bound on any plan's overhead at this
    budget (rounded down, so it stays a bound). `replay_rng = true` (printed
    only when set) says the plan may re-run RNG ops: lethe-materialize reads
    the plan under the same rule, so it refuses a placement re-running a
    dropout that a plan made without replay names.

    ```mlir
    #lethe.plan<policy = auto, budget_bytes = 1048576, feasible = true,
                peak_bytes = 1040384, baseline_peak_bytes = 2097152,
                step_us = 1.250000e+02, baseline_step_us = 1.200000e+02,
                overhead = 4.166700e-02>
    ```
  }];
  let parameters = (ins
    EnumParameter<Lethe_Policy>:$policy,
    "int64_t":$budget_bytes,
    Lethe_BoolParameter:$feasible,
    "int64_t":$peak_bytes,
    "int64_t":$baseline_peak_bytes,
    Lethe_F64Parameter:$step_us,
    Lethe_F64Parameter:$baseline_step_us,
    Lethe_F64Parameter:$overhead,
    Lethe_OptionalF64Parameter:$lower_bound_overhead,
    Lethe_DefaultFalseParameter:$replay_rng
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "Policy":$policy, "int64_t":$budget_bytes,
                     "bool":$feasible, "int64_t":$peak_bytes,
                     "int64_t":$baseline_peak_bytes, "double":$step_us,
                     "double":$baseline_step_us, "double":$overhead,
                     "std::optional<double>":$lower_bound_overhead,
                     CArg<"bool", "false">:$replay_rng), [{
      std::optional<::llvm::APFloat> bound;
      if (lower_bound_overhead)
        bound = ::llvm::APFloat(*lower_bound_overhead);
      return $_get($_ctxt, policy, budget_bytes, feasible, peak_bytes,
                   baseline_peak_bytes, ::llvm::APFloat(step_us),
                   ::llvm::APFloat(baseline_step_us),
                   ::llvm::APFloat(overhead), bound, replay_rng);
    }]>
  ];
}

def Lethe_PipelineAttr : Lethe_Attr<"Pipeline", "pipeline"> {
  let summary = "the pipeline stage a step was expanded into";
  let description = [{
    What lethe-expand-pipeline-schedule leaves on the function it expanded:
    the schedule, the number of stages and this function's stage, the
    micro-batches and the virtual stages (chunks) per stage.

    ```mlir
    #lethe.pipeline<schedule = "1f1b", stages = 2, stage = 0,
                    microbatches = 4, vpp = 1>
    ```
  }];
  let parameters = (ins
    EnumParameter<Lethe_PipelineScheduleKind>:$schedule,
    "int64_t":$stages,
    "int64_t":$stage,
    "int64_t":$microbatches,
    "int64_t":$vpp
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Lethe_TotalsAttr : Lethe_Attr<"Totals", "totals"> {
  let summary = "the step's totals as the exporter measured them";
  let description = [{
    The JSON graph's `totals` on the module, by name: each an integer (i64)
    or a float (f64). Names are the exporter's (`fwd_ms_sum_ops`,
    `act_peak_bytes_eager`, ...); `lethe report` prints them beside its own
    figures.

    ```mlir
    #lethe.totals<{fwd_ms = 1.500000e+00 : f64, n_nodes = 9 : i64}>
    ```
  }];
  let parameters = (ins "::mlir::DictionaryAttr":$numbers);
  let assemblyFormat = "`<` $numbers `>`";
  let genVerifyDecl = 1;
}

#endif // LETHE_DIALECT_LETHE_IR_LETHEATTRS_TD

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
    gets the bandwidth model and one remark (on its first node) naming the
    kind. `device` is a built-in profile (`h200`, `h100`, `a100`,
    `h200-nvlink`, `h200-pcie`) or the path of a JSON profile; an unknown
    name or a bad file is an error listing the built-in names.
    docs/CostModel.md has the formulas and the profile format.

    ```mlir
    // lethe-opt --lethe-annotate-costs='device=h200'
    %0 = lethe.node "aten.mm.default" fwd (%a, %b)
        {lethe.cost_source = "analytic", time_us = 9.2 : f64} : ...
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
      `lethe.full_type`, the unsharded type;
    - parameters are grouped into FSDP units by name: the prefix up to the
      first numeric component (`transformer.h.3.attn.c_attn.weight` ->
      `transformer.h.3`), else the module path (`transformer.wte`);
    - per unit and phase (forward, backward), the unit's parameters that the
      phase reads are all-gathered right before the first op of that phase
      that reads one of them; the phase's ops read the gathered values,
      which are separate per phase so that their lifetimes end at the
      phase's last use. With `bucket=unit`, one all-gather per unit (and
      element type) moves a flat buffer packed by
      `fsdp.all_gather_copy_in` and unpacked by `fsdp.all_gather_copy_out`,
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
    docs/Parallel.md has the rules and an example.
  }];
  let options = [
    Option<"world", "world", "int64_t", /*default=*/"2",
           "number of ranks the parameters are sharded over">,
    Option<"bucket", "bucket", "std::string", /*default=*/"\"unit\"",
           "collective granularity: 'unit' (one per FSDP unit and element "
           "type) or 'param' (one per parameter)">,
    Option<"bandwidth", "bandwidth", "double", /*default=*/"0.0",
           "ring bus bandwidth in GB/s used to set the collectives' "
           "time_us; 0 leaves them untimed">,
    Option<"latencyUs", "latency-us", "double", /*default=*/"0.0",
           "fixed time added to every timed collective, microseconds">,
  ];
  let statistics = [
    Statistic<"numShardedParams", "num-sharded-params",
              "Parameters sharded over the ranks">,
    Statistic<"numUnits", "num-units", "FSDP units (parameter groups)">,
    Statistic<"numAllGathers", "num-all-gathers", "All-gathers inserted">,
    Statistic<"numReduceScatters", "num-reduce-scatters",
              "Reduce-scatters inserted">,
  ];
  let dependentDialects = ["lethe::LetheDialect"];
}

#endif // LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_TD

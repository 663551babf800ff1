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

#endif // LETHE_DIALECT_LETHE_TRANSFORMS_PASSES_TD

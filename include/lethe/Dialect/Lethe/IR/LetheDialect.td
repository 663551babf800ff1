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
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
  }];
}

class Lethe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Lethe_Dialect, mnemonic, traits>;

#endif // LETHE_DIALECT_LETHE_IR_LETHEDIALECT_TD

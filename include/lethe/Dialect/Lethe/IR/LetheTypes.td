//===- LetheTypes.td - Lethe types -------------------------*- tablegen -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHETYPES_TD
#define LETHE_DIALECT_LETHE_IR_LETHETYPES_TD

include "lethe/Dialect/Lethe/IR/LetheDialect.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Lethe_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Lethe_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Lethe_TimepointType : Lethe_Type<"Timepoint", "timepoint"> {
  let summary = "a point on a stream's timeline";
  let description = [{
    Produced by asynchronous work (copies, collectives); reached when that
    work has completed. Lowered to a CUDA event.
  }];
}

def Lethe_HostTensorType : Lethe_Type<"HostTensor", "host"> {
  let summary = "a tensor resident in pinned host memory";
  let description = [{
    The host copy of a device tensor, produced by `lethe.offload` and read
    by `lethe.prefetch`. Compute ops cannot take it as an operand.

    Example: `!lethe.host<tensor<8x1024xbf16>>`.
  }];
  let parameters = (ins "::mlir::RankedTensorType":$tensorType);
  let assemblyFormat = "`<` $tensorType `>`";
  let genVerifyDecl = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::RankedTensorType":$tensorType), [{
      return $_get(tensorType.getContext(), tensorType);
    }]>
  ];
}

def Lethe_Timepoint : Type<CPred<"::llvm::isa<::lethe::TimepointType>($_self)">,
    "timepoint", "::lethe::TimepointType">,
    BuildableType<"::lethe::TimepointType::get($_builder.getContext())">;
def Lethe_HostTensor : Type<CPred<"::llvm::isa<::lethe::HostTensorType>($_self)">,
    "host tensor", "::lethe::HostTensorType">;
def Lethe_DeviceTensor : Type<CPred<"::llvm::isa<::mlir::RankedTensorType>($_self)">,
    "device tensor", "::mlir::RankedTensorType">;
def Lethe_AnyTensor : AnyTypeOf<[Lethe_DeviceTensor, Lethe_HostTensor]>;

#endif // LETHE_DIALECT_LETHE_IR_LETHETYPES_TD

//===- LetheOps.td - Lethe operations ----------------------*- tablegen -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEOPS_TD
#define LETHE_DIALECT_LETHE_IR_LETHEOPS_TD

include "lethe/Dialect/Lethe/IR/LetheDialect.td"
include "lethe/Dialect/Lethe/IR/LetheAttrs.td"
include "lethe/Dialect/Lethe/IR/LetheTypes.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Graph ops: what the importers produce.
//===----------------------------------------------------------------------===//

def Lethe_NodeOp : Lethe_Op<"node"> {
  let summary = "an imported compute op of the training step";
  let description = [{
    Carries one op of an exported training step in Lethe's canonical graph
    form, whatever framework it came from. `kind` is the source op's name
    (`aten.mm.default`, `stablehlo.dot_general`, `linalg.matmul`); `phase`
    says whether it belongs to the forward, backward or optimizer part.

    Optional attributes:
    - `time_us`: the op's time in microseconds (measured, or set by
      `lethe-annotate-costs`);
    - `aliases`: one entry per result: the index of the operand whose storage
      the result shares (a view or an in-place result, which allocates
      nothing), or -1 for a fresh allocation;
    - `scope`: the module path that produced it (`transformer.h.3.mlp`),
      used to group ops into layers;
    - `name`: the node's name in the source graph, for messages;
    - `args`: the source op's non-tensor arguments, kept for the cost model
      and the runtime.

    Example:
    ```mlir
    %0 = lethe.node "aten.mm.default" fwd (%a, %b) {time_us = 12.5 : f64}
        : (tensor<64x128xbf16>, tensor<128x32xbf16>) -> tensor<64x32xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$kind, Lethe_PhaseAttr:$phase,
                       Variadic<AnyType>:$inputs,
                       OptionalAttr<F64Attr>:$time_us,
                       OptionalAttr<DenseI64ArrayAttr>:$aliases,
                       OptionalAttr<StrAttr>:$scope,
                       OptionalAttr<StrAttr>:$name,
                       OptionalAttr<AnyAttr>:$args);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $kind `` $phase ` ` `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The operand index result `i` aliases, or -1 if it allocates.
    int64_t getAliasedOperand(unsigned resultIndex);
  }];
}

def Lethe_CollectiveOp : Lethe_Op<"collective"> {
  let summary = "a collective communication op over a group of ranks";
  let description = [{
    All-gather, reduce-scatter, all-reduce, all-to-all, or a point-to-point
    send / recv over `group` (the ranks of the communicator). It runs on the
    comm stream and is never recomputed: every rank must issue the same
    collectives in the same order (a send on one rank matches the recv of
    its `peer`).

    Shapes: all-gather concatenates along dimension 0 (result dim 0 = input
    dim 0 × group size), reduce-scatter splits along dimension 0, all-reduce
    and all-to-all keep the shape. `send` takes the tensor it sends and
    returns nothing; `recv` takes nothing and returns the tensor it receives
    (a fresh buffer). Both name the other rank, `peer`, which must be in
    `group`; the other kinds have no `peer`.

    ```mlir
    %1 = lethe.collective all_gather %0 group [0, 1] fwd
        : tensor<512x768xbf16> -> tensor<1024x768xbf16>
    lethe.collective send %act peer 1 group [0, 1] fwd : tensor<8x1024x768xbf16>
    %g = lethe.collective recv peer 1 group [0, 1] bwd : -> tensor<8x1024x768xbf16>
    ```
  }];
  let arguments = (ins Lethe_CollectiveKindAttr:$kind,
                       Optional<Lethe_DeviceTensor>:$input,
                       DenseI64ArrayAttr:$group, Lethe_PhaseAttr:$phase,
                       OptionalAttr<F64Attr>:$time_us,
                       OptionalAttr<StrAttr>:$scope,
                       OptionalAttr<StrAttr>:$name,
                       OptionalAttr<I64Attr>:$peer);
  let results = (outs Optional<Lethe_DeviceTensor>:$result);
  let assemblyFormat = [{
    `` $kind ($input^)? (`peer` $peer^)? `group` $group `` $phase attr-dict `:`
    custom<CollectiveTypes>(type($input), type($result))
  }];
  let builders = [
    // The collectives that read and produce one tensor (no peer).
    OpBuilder<(ins "::mlir::Type":$result, "::lethe::CollectiveKind":$kind,
                   "::mlir::Value":$input, "::llvm::ArrayRef<int64_t>":$group,
                   "::lethe::Phase":$phase, "::mlir::FloatAttr":$time_us,
                   "::mlir::StringAttr":$scope, "::mlir::StringAttr":$name), [{
      build($_builder, $_state, result, kind, input, group, phase, time_us,
            scope, name, /*peer=*/nullptr);
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the op is a point-to-point send or recv.
    bool isPointToPoint() {
      return getKind() == ::lethe::CollectiveKind::Send ||
             getKind() == ::lethe::CollectiveKind::Recv;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Memory ops: what planning and materialization produce.
//===----------------------------------------------------------------------===//

def Lethe_OffloadOp : Lethe_Op<"offload"> {
  let summary = "copy a device tensor to pinned host memory (D2H)";
  let description = [{
    Starts an asynchronous device-to-host copy on the D2H stream after
    `await` (if given) is reached. Returns the host value and the timepoint
    at which the copy has completed; the device buffer may be released only
    after that timepoint.

    ```mlir
    %h, %t = lethe.offload %x : tensor<8x1024xbf16> -> !lethe.host<tensor<8x1024xbf16>>
    ```
  }];
  let arguments = (ins Lethe_DeviceTensor:$source,
                       Optional<Lethe_Timepoint>:$await_timepoint);
  let results = (outs Lethe_HostTensor:$result, Lethe_Timepoint:$done);
  let assemblyFormat = [{
    $source (`await` `(` $await_timepoint^ `)`)? attr-dict `:` type($source) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Lethe_PrefetchOp : Lethe_Op<"prefetch"> {
  let summary = "copy a host tensor back to the device (H2D)";
  let description = [{
    Starts an asynchronous host-to-device copy on the H2D stream after
    `await` (if given) is reached. The device result may be used only after
    the returned timepoint has been awaited.

    ```mlir
    %x, %t = lethe.prefetch %h : !lethe.host<tensor<8x1024xbf16>> -> tensor<8x1024xbf16>
    ```
  }];
  let arguments = (ins Lethe_HostTensor:$source,
                       Optional<Lethe_Timepoint>:$await_timepoint);
  let results = (outs Lethe_DeviceTensor:$result, Lethe_Timepoint:$done);
  let assemblyFormat = [{
    $source (`await` `(` $await_timepoint^ `)`)? attr-dict `:` qualified(type($source)) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Lethe_AwaitOp : Lethe_Op<"await", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "wait on the current stream until timepoints are reached";
  let description = [{
    Blocks the stream the op is scheduled on until every timepoint is
    reached, and forwards `values` unchanged: uses of the forwarded values
    are then ordered after the asynchronous work that produced them, which
    makes "used only after the copy completed" a dominance property.

    ```mlir
    %y = lethe.await %t => %x : tensor<8x1024xbf16>
    lethe.await %t0, %t1
    ```
  }];
  let arguments = (ins Variadic<Lethe_Timepoint>:$timepoints,
                       Variadic<AnyType>:$values);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $timepoints (`=` `` `>` $values^ `:` type($values))? attr-dict
  }];
  let hasVerifier = 1;
}

def Lethe_BarrierOp : Lethe_Op<"barrier"> {
  let summary = "a timepoint for the work issued so far on this stream";
  let description = [{
    Returns a timepoint reached when every op issued before it on its stream
    (the `lethe.stream` attribute set by `lethe-schedule`; compute when
    absent) has completed. Copies await it so that a D2H copy reads a tensor
    only after its producer finished, and an H2D copy writes a buffer only
    after the ops that used that memory before finished. Lowered to an event
    record.

    ```mlir
    %t = lethe.barrier
    %h, %done = lethe.offload %x await(%t) : tensor<8xf32> -> !lethe.host<tensor<8xf32>>
    ```
  }];
  let results = (outs Lethe_Timepoint:$result);
  let assemblyFormat = "attr-dict";
}

def Lethe_JoinOp : Lethe_Op<"join", [Pure]> {
  let summary = "a timepoint reached when all of its inputs are reached";
  let assemblyFormat = "$timepoints attr-dict";
  let arguments = (ins Variadic<Lethe_Timepoint>:$timepoints);
  let results = (outs Lethe_Timepoint:$result);
  let hasVerifier = 1;
}

def Lethe_ReleaseOp : Lethe_Op<"release"> {
  let summary = "end the lifetime of a tensor's buffer";
  let description = [{
    Frees the device (or pinned host) buffer of `value`. No use of `value`
    may follow. Releasing the same value twice in one block is an error.

    ```mlir
    lethe.release %x : tensor<8x1024xbf16>
    ```
  }];
  let arguments = (ins Lethe_AnyTensor:$value,
                       Optional<Lethe_Timepoint>:$await_timepoint);
  let assemblyFormat = [{
    $value (`await` `(` $await_timepoint^ `)`)? attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

def Lethe_RecomputeOp : Lethe_Op<"recompute", [SingleBlock,
    RecursiveMemoryEffects]> {
  let summary = "re-run a producer chain to re-create released activations";
  let description = [{
    The region re-runs the ops that produced one or more activations that
    were released after their last forward use; the results are the
    re-created values, yielded in order. A sub-chain shared by several
    activations is recomputed once, in one region yielding all of them.
    The region may read values defined above it (retained or prefetched
    inputs); it may not read released values (checked by `lethe-verify`).

    ```mlir
    %y = lethe.recompute : tensor<8x1024xbf16> {
      %0 = lethe.node "aten.gelu.default" bwd (%x) : (tensor<8x1024xbf16>) -> tensor<8x1024xbf16>
      lethe.yield %0 : tensor<8x1024xbf16>
    }
    ```
  }];
  let results = (outs Variadic<Lethe_DeviceTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict `:` type($results) $body";
  let hasVerifier = 1;
}

def Lethe_YieldOp : Lethe_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"::lethe::RecomputeOp">]> {
  let summary = "yield the recomputed values from a recompute region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // LETHE_DIALECT_LETHE_IR_LETHEOPS_TD

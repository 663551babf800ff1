//===- LetheTestOps.td - test-only ops ---------------------*- tablegen -*-===//
//
// Ops without real semantics, so scheduling and memory passes can be tested
// on small hand-written programs (cf. IREE's stream.test.timeline_op).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHETESTOPS_TD
#define LETHE_DIALECT_LETHE_IR_LETHETESTOPS_TD

include "lethe/Dialect/Lethe/IR/LetheDialect.td"
include "lethe/Dialect/Lethe/IR/LetheAttrs.td"
include "lethe/Dialect/Lethe/IR/LetheTypes.td"

def Lethe_TestTimelineOp : Lethe_Op<"test.timeline_op"> {
  let summary = "test-only: work on a stream that awaits and produces a timepoint";
  let description = [{
    Occupies `stream` for `time_us` microseconds once every awaited
    timepoint is reached; its result is reached when it finishes.

    ```mlir
    %t = lethe.test.timeline_op on d2h await(%t0) {time_us = 5.0 : f64}
    ```
  }];
  let arguments = (ins Lethe_StreamAttr:$stream,
                       Variadic<Lethe_Timepoint>:$awaits,
                       OptionalAttr<F64Attr>:$time_us);
  let results = (outs Lethe_Timepoint:$result);
  let assemblyFormat = [{
    `on` `` $stream (`await` `(` $awaits^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Lethe_TestTensorOp : Lethe_Op<"test.tensor"> {
  let summary = "test-only: produce a device tensor of a given type";
  let description = [{
    Allocates a tensor of the result type on the device, reading `inputs`.
    Stands in for any producer in tests of memory passes.

    ```mlir
    %x = lethe.test.tensor (%a) : (tensor<4xf32>) -> tensor<1024xf32>
    ```
  }];
  let arguments = (ins Variadic<Lethe_DeviceTensor>:$inputs,
                       OptionalAttr<F64Attr>:$time_us);
  let results = (outs Lethe_DeviceTensor:$result);
  let assemblyFormat = [{
    (`(` $inputs^ `)`)? attr-dict `:` functional-type($inputs, $result)
  }];
}

#endif // LETHE_DIALECT_LETHE_IR_LETHETESTOPS_TD

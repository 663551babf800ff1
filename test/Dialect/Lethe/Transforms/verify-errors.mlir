// RUN: lethe-opt %s --allow-unregistered-dialect -split-input-file -verify-diagnostics --lethe-verify=allocated=false

// One case per contract violation lethe-verify reports, on materialized or
// scheduled programs (no arena offsets yet). verify-arena-errors.mlir has
// the allocated-program cases.

// Use after release, through a view of the released storage.
func.func @use_after_release(%w: tensor<256xf32>) -> tensor<256xf32> {
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  %v = lethe.node "aten.view.default" fwd (%a) {aliases = array<i64: 0>} : (tensor<256xf32>) -> tensor<16x16xf32>
  // expected-note @+1 {{released here}}
  lethe.release %a : tensor<256xf32>
  // expected-error @+1 {{uses %1 ('aten.view.default') after its release}}
  %b = lethe.node "aten.sum.default" bwd (%v) : (tensor<16x16xf32>) -> tensor<256xf32>
  return %b : tensor<256xf32>
}

// -----

// A storage released twice, under two names.
func.func @double_release(%w: tensor<256xf32>) {
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  %v = lethe.node "aten.view.default" fwd (%a) {aliases = array<i64: 0>} : (tensor<256xf32>) -> tensor<16x16xf32>
  // expected-note @+1 {{first released here}}
  lethe.release %a : tensor<256xf32>
  // expected-error @+1 {{releases %1 ('aten.view.default') a second time}}
  lethe.release %v : tensor<16x16xf32>
  return
}

// -----

func.func @release_input(%w: tensor<256xf32>) {
  // expected-error @+1 {{releases %arg0, which the program does not allocate}}
  lethe.release %w : tensor<256xf32>
  return
}

// -----

func.func @release_output(%w: tensor<256xf32>) -> tensor<256xf32> {
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  // expected-error @+1 {{releases %0 ('aten.mm.default'), which the step returns}}
  lethe.release %a : tensor<256xf32>
  return %a : tensor<256xf32>
}

// -----

func.func @leak(%w: tensor<256xf32>) {
  // expected-error @+1 {{result #1 (%0#1 ('aten.native_layer_norm.default' "ln_1")) is never released and the step does not return it}}
  %a:2 = lethe.node "aten.native_layer_norm.default" fwd (%w) {name = "ln_1"} : (tensor<256xf32>) -> (tensor<256xf32>, tensor<1xf32>)
  lethe.release %a#0 : tensor<256xf32>
  return
}

// -----

// A prefetched value read without awaiting the copy.
func.func @prefetch_not_awaited(%h: !lethe.host<tensor<256xf32>>) {
  // expected-note @+1 {{written here by 'lethe.prefetch'}}
  %p, %t = lethe.prefetch %h : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
  // expected-error @+1 {{reads %result on stream compute before its write on stream h2d is awaited}}
  %b = lethe.node "aten.relu.default" bwd (%p) : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %p await(%t) : tensor<256xf32>
  lethe.release %b : tensor<256xf32>
  return
}

// -----

// An offload must await a barrier issued after its source's producer.
func.func @offload_before_producer_barrier(%w: tensor<256xf32>) {
  %t0 = lethe.barrier
  // expected-note @+1 {{written here by 'lethe.node'}}
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  // expected-error @+1 {{reads %1 ('aten.mm.default') on stream d2h before its write on stream compute is awaited}}
  %h, %d = lethe.offload %a await(%t0) : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  lethe.release %a await(%d) : tensor<256xf32>
  lethe.release %h : !lethe.host<tensor<256xf32>>
  return
}

// -----

// Device memory of an offloaded value is freed only once the copy is done.
func.func @release_before_offload_done(%w: tensor<256xf32>) {
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  %t0 = lethe.barrier
  // expected-note @+1 {{used here by 'lethe.offload'}}
  %h, %d = lethe.offload %a await(%t0) : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  // expected-error @+1 {{releases %0 ('aten.mm.default') before its use on stream d2h has completed; await that op's timepoint}}
  lethe.release %a : tensor<256xf32>
  lethe.release %h await(%d) : !lethe.host<tensor<256xf32>>
  return
}

// -----

// A collective's result is read on compute only after a comm barrier.
func.func @collective_not_awaited(%w: tensor<256xf32>) {
  %t0 = lethe.barrier
  // expected-note @+1 {{written here by 'lethe.collective'}}
  %g = lethe.collective all_reduce %w group [0, 1] bwd : tensor<256xf32> -> tensor<256xf32>
  // expected-error @+1 {{reads %1 on stream compute before its write on stream comm is awaited}}
  %b = lethe.node "aten.relu.default" bwd (%g) : (tensor<256xf32>) -> tensor<256xf32>
  lethe.release %g : tensor<256xf32>
  lethe.release %b : tensor<256xf32>
  return
}

// -----

// An await on the compute stream orders compute, not the D2H stream.
func.func @awaited_on_other_stream(%h: !lethe.host<tensor<256xf32>>) {
  // expected-note @+1 {{written here by 'lethe.prefetch'}}
  %p, %t = lethe.prefetch %h : !lethe.host<tensor<256xf32>> -> tensor<256xf32>
  %q = lethe.await %t => %p : tensor<256xf32>
  // expected-error @+1 {{reads %0 on stream d2h before its write on stream h2d is awaited}}
  %h2, %d = lethe.offload %q : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  lethe.release %q await(%d) : tensor<256xf32>
  lethe.release %h2 : !lethe.host<tensor<256xf32>>
  return
}

// -----

// An in-place write must wait for a copy still reading the storage.
func.func @in_place_write_during_copy(%w: tensor<256xf32>) {
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  %t0 = lethe.barrier
  // expected-note @+1 {{used here}}
  %h, %d = lethe.offload %a await(%t0) : tensor<256xf32> -> !lethe.host<tensor<256xf32>>
  // expected-error @+1 {{writes %0 ('aten.mm.default') in place on stream compute before its use on stream d2h is awaited}}
  %b = lethe.node "aten.add_.Tensor" fwd (%a, %w) {aliases = array<i64: 0>} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  lethe.release %a await(%d) : tensor<256xf32>
  lethe.release %h : !lethe.host<tensor<256xf32>>
  return
}

// -----

func.func @release_off_compute(%w: tensor<256xf32>) {
  %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
  // expected-error @+1 {{must be on the compute stream, not d2h}}
  lethe.release %a {lethe.stream = #lethe<stream d2h>} : tensor<256xf32>
  return
}

// -----

// Without arena offsets, the budget bounds the bytes live at once.
module attributes {lethe.budget_bytes = 2048 : i64} {
  func.func @over_budget(%w: tensor<256xf32>) {
    %a = lethe.node "aten.mm.default" fwd (%w) : (tensor<256xf32>) -> tensor<256xf32>
    %b = lethe.node "aten.mm.default" fwd (%a) : (tensor<256xf32>) -> tensor<256xf32>
    // expected-error @+1 {{brings the live device bytes to 3072, over the budget of 2048}}
    %c = lethe.node "aten.mm.default" fwd (%b) : (tensor<256xf32>) -> tensor<256xf32>
    lethe.release %a : tensor<256xf32>
    lethe.release %b : tensor<256xf32>
    lethe.release %c : tensor<256xf32>
    return
  }
}

// -----

// expected-error @+1 {{lethe programs have one block; 'two_blocks' has 2}}
func.func @two_blocks(%w: tensor<256xf32>) {
  "test.br"() [^bb1] : () -> ()
^bb1:
  return
}

// RUN: lethe-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the lethe dialect.

func.func @await_non_timepoint(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be variadic of timepoint}}
  "lethe.await"(%x) {operandSegmentSizes = array<i32: 1, 0>} : (tensor<4xf32>) -> ()
  return
}

// -----

func.func @await_nothing() {
  // expected-error @+1 {{requires at least one timepoint to await}}
  "lethe.await"() {operandSegmentSizes = array<i32: 0, 0>} : () -> ()
  return
}

// -----

func.func @join_nothing() {
  // expected-error @+1 {{requires at least one timepoint to join}}
  %0 = "lethe.join"() : () -> !lethe.timepoint
  return
}

// -----

func.func @prefetch_device_tensor(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be host tensor}}
  %0, %1 = "lethe.prefetch"(%x) {operandSegmentSizes = array<i32: 1, 0>} : (tensor<4xf32>) -> (tensor<4xf32>, !lethe.timepoint)
  return
}

// -----

func.func @prefetch_wrong_type(%h: !lethe.host<tensor<4xf32>>) {
  // expected-error @+1 {{device result 'tensor<8xf32>' does not match the host source '!lethe.host<tensor<4xf32>>'}}
  %0, %1 = lethe.prefetch %h : !lethe.host<tensor<4xf32>> -> tensor<8xf32>
  return
}

// -----

func.func @offload_host_tensor(%h: !lethe.host<tensor<4xf32>>) {
  // expected-error @+1 {{operand #0 must be device tensor}}
  %0, %1 = "lethe.offload"(%h) {operandSegmentSizes = array<i32: 1, 0>} : (!lethe.host<tensor<4xf32>>) -> (!lethe.host<tensor<4xf32>>, !lethe.timepoint)
  return
}

// -----

func.func @offload_wrong_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{host result '!lethe.host<tensor<4xf16>>' does not hold the source type 'tensor<4xf32>'}}
  %0, %1 = lethe.offload %x : tensor<4xf32> -> !lethe.host<tensor<4xf16>>
  return
}

// -----

// expected-error @+1 {{host tensor must have a static shape, got 'tensor<?xf32>'}}
func.func @host_dynamic(%h: !lethe.host<tensor<?xf32>>) {
  return
}

// -----

func.func @release_twice(%x: tensor<4xf32>) {
  // expected-note @+1 {{first released here}}
  lethe.release %x : tensor<4xf32>
  // expected-error @+1 {{releases a value that was already released}}
  lethe.release %x : tensor<4xf32>
  return
}

// -----

func.func @recompute_wrong_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{region yields 'tensor<4xf32>' but the op produces 'tensor<8xf32>'}}
  %0 = lethe.recompute : tensor<8xf32> {
    %1 = lethe.node "aten.relu.default" bwd (%x) : (tensor<4xf32>) -> tensor<4xf32>
    lethe.yield %1 : tensor<4xf32>
  }
  return
}

// -----

func.func @recompute_nothing() {
  // expected-error @+1 {{must re-create at least one value}}
  "lethe.recompute"() ({
    lethe.yield
  }) : () -> ()
  return
}

// -----

func.func @recompute_no_yield(%x: tensor<4xf32>) {
  // expected-error @+1 {{region must end with 'lethe.yield'}}
  %0 = "lethe.recompute"() ({
    %1 = lethe.node "aten.relu.default" bwd (%x) : (tensor<4xf32>) -> tensor<4xf32>
    "lethe.node"(%1) <{kind = "x", phase = #lethe<phase bwd>}> : (tensor<4xf32>) -> ()
  }) : () -> tensor<4xf32>
  return
}

// -----

func.func @yield_outside_recompute(%x: tensor<4xf32>) {
  // expected-error @+1 {{expects parent op 'lethe.recompute'}}
  lethe.yield %x : tensor<4xf32>
}

// -----

func.func @collective_empty_group(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires a non-empty group of ranks}}
  %0 = lethe.collective all_reduce %x group [] fwd : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @collective_duplicate_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{group lists rank 1 twice}}
  %0 = lethe.collective all_reduce %x group [1, 1] fwd : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @collective_negative_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{group rank must be non-negative, got -1}}
  %0 = lethe.collective all_reduce %x group [-1] fwd : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @collective_element_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{input and result element types differ: 'f32' vs 'bf16'}}
  %0 = lethe.collective all_reduce %x group [0] fwd : tensor<4xf32> -> tensor<4xbf16>
  return
}

// -----

func.func @collective_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{input and result ranks differ}}
  %0 = lethe.collective all_reduce %x group [0] fwd : tensor<4xf32> -> tensor<4x1xf32>
  return
}

// -----

func.func @all_reduce_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the result type to equal the input type}}
  %0 = lethe.collective all_reduce %x group [0, 1] fwd : tensor<4xf32> -> tensor<8xf32>
  return
}

// -----

func.func @all_gather_shape(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{all_gather over 2 ranks: result dimension 0 must be 8, got 4}}
  %0 = lethe.collective all_gather %x group [0, 1] fwd : tensor<4x2xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @reduce_scatter_shape(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{reduce_scatter over 2 ranks: input dimension 0 must be 16, got 8}}
  %0 = lethe.collective reduce_scatter %x group [0, 1] fwd : tensor<8x2xf32> -> tensor<8x2xf32>
  return
}

// -----

func.func @all_gather_trailing(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{input and result differ beyond dimension 0}}
  %0 = lethe.collective all_gather %x group [0, 1] fwd : tensor<4x2xf32> -> tensor<8x3xf32>
  return
}

// -----

func.func @all_gather_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{requires a tensor of rank >= 1}}
  %0 = lethe.collective all_gather %x group [0, 1] fwd : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @send_no_peer(%x: tensor<4xf32>) {
  // expected-error @+1 {{send requires a peer rank}}
  lethe.collective send %x group [0, 1] fwd : tensor<4xf32>
  return
}

// -----

func.func @recv_peer_outside_group() {
  // expected-error @+1 {{recv peer 2 is not in the group}}
  %0 = lethe.collective recv peer 2 group [0, 1] fwd : -> tensor<4xf32>
  return
}

// -----

func.func @send_with_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{send takes one tensor and returns none}}
  %0 = lethe.collective send %x peer 1 group [0, 1] fwd : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @recv_with_input(%x: tensor<4xf32>) {
  // expected-error @+1 {{recv takes no tensor and returns one}}
  %0 = lethe.collective recv %x peer 1 group [0, 1] fwd : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @all_reduce_with_peer(%x: tensor<4xf32>) {
  // expected-error @+1 {{all_reduce takes no peer (only send and recv do)}}
  %0 = lethe.collective all_reduce %x peer 1 group [0, 1] fwd : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @all_gather_without_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{all_gather takes one tensor and returns one}}
  lethe.collective all_gather %x group [0, 1] fwd : tensor<4xf32>
  return
}

// -----

func.func @collective_no_types(%x: tensor<4xf32>) {
  lethe.collective send %x peer 1 group [0, 1] fwd :
  // expected-error @below {{expected a tensor type or '->'}}
  return
}

// -----

func.func @node_empty_kind(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires a non-empty kind}}
  %0 = lethe.node "" fwd (%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @node_negative_time(%x: tensor<4xf32>) {
  // expected-error @+1 {{time_us must be non-negative, got -1}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {time_us = -1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Finite, but two such times sum to infinity.
func.func @node_huge_time(%x: tensor<4xf32>) {
  // expected-error @+1 {{time_us must be at most 1e+12 us, got 1e+308}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {time_us = 1.0e308 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @node_host_operand(%h: !lethe.host<tensor<4xf32>>) {
  // expected-error @+1 {{cannot read host tensor}}
  %0 = lethe.node "aten.relu.default" fwd (%h) : (!lethe.host<tensor<4xf32>>) -> tensor<4xf32>
  return
}

// -----

func.func @node_alias_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{has 2 alias entries for 1 results}}
  %0 = lethe.node "aten.view.default" fwd (%x) {aliases = array<i64: 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @node_alias_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{result 0 aliases operand 3, but the op has 1 operands}}
  %0 = lethe.node "aten.view.default" fwd (%x) {aliases = array<i64: 3>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @timeline_negative_time() {
  // expected-error @+1 {{time_us must be non-negative, got -2}}
  %0 = lethe.test.timeline_op on compute {time_us = -2.0 : f64}
  return
}

// -----

func.func @bad_phase(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::lethe::Phase to be one of: fwd, bwd, opt}}
  // expected-error @+1 {{failed to parse Lethe_PhaseAttr}}
  %0 = lethe.node "aten.relu.default" sideways (%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// RUN: lethe-opt %s -split-input-file -verify-diagnostics --lethe-insert-fsdp-collectives='world=2'
// RUN: not lethe-opt %s -split-input-file --lethe-insert-fsdp-collectives='world=0' 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not lethe-opt %s -split-input-file --lethe-insert-fsdp-collectives='bucket=layer' 2>&1 | FileCheck %s --check-prefix=BUCKET

// RUN: not lethe-opt %s -split-input-file --lethe-insert-fsdp-collectives='prefetch=-1' 2>&1 | FileCheck %s --check-prefix=PREFETCH
// RUN: not lethe-opt %s -split-input-file --lethe-insert-fsdp-collectives='world=2 ranks-per-host=3' 2>&1 | FileCheck %s --check-prefix=RANKS
// PREFETCH: error: lethe-insert-fsdp-collectives: prefetch must be >= 0, got -1
// RANKS: error: lethe-insert-fsdp-collectives: ranks-per-host must be in [0, 2] (0: all ranks), got 3
// WORLD: error: lethe-insert-fsdp-collectives: world must be >= 1, got 0
// BUCKET: error: lethe-insert-fsdp-collectives: bucket must be 'unit' or 'param', got 'layer'

// expected-error @+1 {{step is already sharded for FSDP (lethe.fsdp_world is set)}}
func.func @twice(%w: tensor<2xf32> {lethe.kind = "param", lethe.name = "w"}) attributes {lethe.fsdp_world = 2 : i64} {
  return
}

// -----

func.func @returns_param(%w: tensor<4xf32> {lethe.kind = "param", lethe.name = "w"}) -> tensor<4xf32> {
  // expected-error @+1 {{the step returns parameter 'w' (or a view of it), which FSDP shards; only its gradient can be returned}}
  return %w : tensor<4xf32>
}

// -----

func.func @optimizer(%w: tensor<4xf32> {lethe.kind = "param", lethe.name = "w"}) {
  // expected-error @+1 {{reads parameter 'w' outside the forward and backward phases; lethe-insert-fsdp-collectives does not shard optimizer steps}}
  %0 = lethe.node "aten.add_.Tensor" opt (%w) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{parameter argument 0 must be a statically shaped tensor to be sharded, got 'tensor<?xf32>'}}
func.func @dynamic(%w: tensor<?xf32> {lethe.kind = "param", lethe.name = "w"}) {
  return
}

// -----

func.func @unknown_grad(%w: tensor<4xf32> {lethe.kind = "param", lethe.name = "w"})
    -> (tensor<4xf32> {lethe.grad_of = "v"}) {
  %g = lethe.node "test.grad" bwd () : () -> tensor<4xf32>
  // expected-error @+1 {{result 0 is the gradient of 'v', which is not a parameter of the step}}
  return %g : tensor<4xf32>
}

// -----

func.func @grad_type(%w: tensor<4xf32> {lethe.kind = "param", lethe.name = "w"})
    -> (tensor<8xf32> {lethe.grad_of = "w"}) {
  %g = lethe.node "test.grad" bwd () : () -> tensor<8xf32>
  // expected-error @+1 {{result 0 (gradient of 'w') has type 'tensor<8xf32>', expected 'tensor<4xf32>'}}
  return %g : tensor<8xf32>
}

// -----

func.func @two_grads(%w: tensor<4xf32> {lethe.kind = "param", lethe.name = "w"})
    -> (tensor<4xf32> {lethe.grad_of = "w"}, tensor<4xf32> {lethe.grad_of = "w"}) {
  %g = lethe.node "test.grad" bwd () : () -> tensor<4xf32>
  // expected-error @+1 {{results 0 and 1 are both gradients of 'w'}}
  return %g, %g : tensor<4xf32>, tensor<4xf32>
}

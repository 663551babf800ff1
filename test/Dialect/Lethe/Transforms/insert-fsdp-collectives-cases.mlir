// RUN: lethe-opt %s -split-input-file --lethe-insert-fsdp-collectives='world=4' | FileCheck %s

// Named gradients (lethe.grad_of) win over matching by order: here the
// results are in reverse parameter order. A unit with two element types
// gets one bucket per type; a scalar parameter stays whole and its gradient
// is all-reduced.

// CHECK-LABEL: func.func @named(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2x3xf32> {lethe.full_type = tensor<8x3xf32>, lethe.kind = "param", lethe.name = "blk.0.a"}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<1xbf16> {lethe.full_type = tensor<4xbf16>, lethe.kind = "param", lethe.name = "blk.0.b"}
// CHECK-SAME: %[[C:[a-z0-9]+]]: tensor<1x3xf32> {lethe.full_type = tensor<4x3xf32>, lethe.kind = "param", lethe.name = "blk.0.c"}
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<f32> {lethe.kind = "param", lethe.name = "scale"}
// CHECK-SAME: -> (tensor<f32> {lethe.grad_of = "scale"}, tensor<1x3xf32> {lethe.grad_of = "blk.0.c"}, tensor<1xbf16> {lethe.grad_of = "blk.0.b"}, tensor<2x3xf32> {lethe.grad_of = "blk.0.a"})
// CHECK-NEXT: %[[IN:.+]] = lethe.node "fsdp.pack_shards" fwd (%[[A]], %[[C]]) {scope = "blk.0"} : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<9xf32>
// CHECK-NEXT: %[[AG:.+]] = lethe.collective all_gather %[[IN]] group [0, 1, 2, 3] fwd {{.*}} : tensor<9xf32> -> tensor<36xf32>
// CHECK-NEXT: %[[OUT:.+]]:2 = lethe.node "fsdp.unpack_gathered" fwd (%[[AG]]) {scope = "blk.0"} : (tensor<36xf32>) -> (tensor<8x3xf32>, tensor<4x3xf32>)
// CHECK-NEXT: %[[AGB:.+]] = lethe.collective all_gather %[[B]] group [0, 1, 2, 3] fwd {{.*}} : tensor<1xbf16> -> tensor<4xbf16>
// CHECK-NEXT: lethe.node "test.use" fwd (%[[OUT]]#0, %[[AGB]], %[[OUT]]#1, %[[S]])
// CHECK: %[[GS:.+]] = lethe.node "test.grad_scale" bwd
// CHECK-NEXT: %[[AR:.+]] = lethe.collective all_reduce %[[GS]] group [0, 1, 2, 3] bwd {name = "fsdp.all_reduce_grad.scale", scope = "scale"} : tensor<f32> -> tensor<f32>
// CHECK: return %[[AR]],
func.func @named(%a: tensor<8x3xf32> {lethe.kind = "param", lethe.name = "blk.0.a"},
                 %b: tensor<4xbf16> {lethe.kind = "param", lethe.name = "blk.0.b"},
                 %c: tensor<4x3xf32> {lethe.kind = "param", lethe.name = "blk.0.c"},
                 %s: tensor<f32> {lethe.kind = "param", lethe.name = "scale"},
                 %seed: tensor<f32> {lethe.kind = "tangent"})
    -> (tensor<f32> {lethe.grad_of = "scale"}, tensor<4x3xf32> {lethe.grad_of = "blk.0.c"},
        tensor<4xbf16> {lethe.grad_of = "blk.0.b"}, tensor<8x3xf32> {lethe.grad_of = "blk.0.a"}) {
  %y = lethe.node "test.use" fwd (%a, %b, %c, %s) : (tensor<8x3xf32>, tensor<4xbf16>, tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
  %ga = lethe.node "test.grad_a" bwd (%seed, %y) : (tensor<f32>, tensor<f32>) -> tensor<8x3xf32>
  %gb = lethe.node "test.grad_b" bwd (%seed) : (tensor<f32>) -> tensor<4xbf16>
  %gc = lethe.node "test.grad_c" bwd (%seed) : (tensor<f32>) -> tensor<4x3xf32>
  %gs = lethe.node "test.grad_scale" bwd (%seed) : (tensor<f32>) -> tensor<f32>
  return %gs, %gc, %gb, %ga : tensor<f32>, tensor<4x3xf32>, tensor<4xbf16>, tensor<8x3xf32>
}

// -----

// Matching by order and type: a parameter without a gradient (frozen, of
// another type here: same-typed frozen parameters make the order ambiguous,
// which lethe.grad_of resolves) is skipped, and the forward's outputs are
// not gradients. A parameter no phase reads is never gathered.

// CHECK-LABEL: func.func @by_order(
// CHECK-SAME: -> (tensor<4x2xf32>, tensor<1x2xf32> {lethe.grad_of = "w"})
// CHECK-NOT: all_gather {{.*}} bwd
// CHECK-NOT: fsdp.all_gather_fwd.unused
// CHECK: %[[RS:.+]] = lethe.collective reduce_scatter %{{.*}} group [0, 1, 2, 3] bwd {name = "fsdp.reduce_scatter.w", scope = "w"} : tensor<4x2xf32> -> tensor<1x2xf32>
// CHECK-NEXT: return %{{.*}}, %[[RS]]
func.func @by_order(%frozen: tensor<4x3xf32> {lethe.kind = "param", lethe.name = "frozen"},
                    %w: tensor<4x2xf32> {lethe.kind = "param", lethe.name = "w"},
                    %unused: tensor<4x2xf32> {lethe.kind = "param", lethe.name = "unused"},
                    %seed: tensor<4x2xf32> {lethe.kind = "tangent"})
    -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %y = lethe.node "test.use" fwd (%frozen, %w) : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %g = lethe.node "aten.clone.default" bwd (%seed) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y, %g : tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

// A step without parameters is left alone.
// CHECK-LABEL: func.func @no_params(
// CHECK-NOT: lethe.fsdp_world
func.func @no_params(%x: tensor<4xf32> {lethe.kind = "input"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

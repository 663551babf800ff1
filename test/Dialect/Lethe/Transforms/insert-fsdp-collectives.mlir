// RUN: lethe-opt %s --lethe-insert-fsdp-collectives='world=2 prefetch=0 bandwidth=100 latency-us=5' --remarks-filter=lethe-insert-fsdp-collectives --remark-format=emitRemark -verify-diagnostics | FileCheck %s
// RUN: lethe-opt %s --lethe-insert-fsdp-collectives='world=2 bucket=param prefetch=0' --remarks-filter=lethe-insert-fsdp-collectives --remark-format=emitRemark -verify-diagnostics | FileCheck %s --check-prefix=PARAM
// RUN: lethe-opt %s --lethe-insert-fsdp-collectives='world=2' --remarks-filter=lethe-insert-fsdp-collectives --remark-format=emitRemark -verify-diagnostics | FileCheck %s --check-prefix=PREFETCH
// RUN: lethe-opt %s --lethe-insert-fsdp-collectives='world=2' --remarks-filter=lethe-insert-fsdp-collectives --remark-format=emitRemark -verify-diagnostics | lethe-opt | FileCheck %s --check-prefix=ROUND
// The rewrite is deterministic: two runs print the same program.
// RUN: lethe-opt %s --lethe-insert-fsdp-collectives='world=2' --remarks-filter=lethe-insert-fsdp-collectives --remark-format=emitRemark -verify-diagnostics > %t.1.mlir
// RUN: lethe-opt %s --lethe-insert-fsdp-collectives='world=2' --remarks-filter=lethe-insert-fsdp-collectives --remark-format=emitRemark -verify-diagnostics > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: lethe-opt %s --lethe-insert-fsdp-collectives='world=2 ranks-per-host=1' | FileCheck %s --check-prefix=HOST
// HOST: attributes {lethe.fsdp_world = 2 : i64, lethe.ranks_per_host = 1 : i64}

// Two layers (units h.0, h.1) and a head whose dim 0 (5) does not divide by
// 2. The backward reads the head's forward view %th (re-made there) and the
// forward view %t1 of h.1's weight (re-made too).

// Shards in (dim 0 rounded up), gradient shards out, named.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xbf16> {lethe.kind = "input", lethe.name = "x"}
// CHECK-SAME: %[[W0:[a-z0-9]+]]: tensor<4x8xbf16> {lethe.full_type = tensor<8x8xbf16>, lethe.kind = "param", lethe.name = "h.0.fc.weight"}
// CHECK-SAME: %[[B0:[a-z0-9]+]]: tensor<4xbf16> {lethe.full_type = tensor<8xbf16>, lethe.kind = "param", lethe.name = "h.0.fc.bias"}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4x8xbf16> {lethe.full_type = tensor<8x8xbf16>
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<4xbf16> {lethe.full_type = tensor<8xbf16>
// CHECK-SAME: %[[WH:[a-z0-9]+]]: tensor<3x8xbf16> {lethe.full_type = tensor<5x8xbf16>, lethe.kind = "param", lethe.name = "head.weight"}
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<4x5xbf16>
// CHECK-SAME: -> (tensor<f32>, tensor<4x8xbf16> {lethe.grad_of = "h.0.fc.weight"}, tensor<4xbf16> {lethe.grad_of = "h.0.fc.bias"}, tensor<4x8xbf16> {lethe.grad_of = "h.1.fc.weight"}, tensor<4xbf16> {lethe.grad_of = "h.1.fc.bias"}, tensor<3x8xbf16> {lethe.grad_of = "head.weight"})
// The ranks share one host's copy bandwidth (ranks-per-host defaults to
// all of them): the planner and simulator give each rank half of it.
// CHECK-SAME: attributes {lethe.fsdp_world = 2 : i64, lethe.ranks_per_host = 2 : i64}

// Forward: each unit gathered right before its first use, as one flat
// buffer (4*8 + 4 = 36 elements per rank). Ring time: 5 us + 1/2 * 144 B
// at 100 GB/s.
// CHECK-NEXT: %[[IN0:.+]] = lethe.node "fsdp.pack_shards" fwd (%[[W0]], %[[B0]]) {scope = "h.0"} : (tensor<4x8xbf16>, tensor<4xbf16>) -> tensor<36xbf16>
// CHECK-NEXT: %[[AG0:.+]] = lethe.collective all_gather %[[IN0]] group [0, 1] fwd {name = "fsdp.all_gather_fwd.h.0", scope = "h.0", time_us = 5.000720e+00 : f64} : tensor<36xbf16> -> tensor<72xbf16>
// CHECK-NEXT: %[[P0:.+]]:2 = lethe.node "fsdp.unpack_gathered" fwd (%[[AG0]]) {scope = "h.0"} : (tensor<72xbf16>) -> (tensor<8x8xbf16>, tensor<8xbf16>)
// CHECK-NEXT: %[[T0:.+]] = lethe.node "aten.t.default" fwd (%[[P0]]#0)
// CHECK-NEXT: %[[Y0:.+]] = lethe.node "aten.addmm.default" fwd (%[[P0]]#1, %[[X]], %[[T0]])
// CHECK-NEXT: %[[IN1:.+]] = lethe.node "fsdp.pack_shards" fwd (%[[W1]], %[[B1]])
// CHECK-NEXT: %[[AG1:.+]] = lethe.collective all_gather %[[IN1]] group [0, 1] fwd
// CHECK-NEXT: %[[P1:.+]]:2 = lethe.node "fsdp.unpack_gathered" fwd (%[[AG1]])
// CHECK-NEXT: %[[T1:.+]] = lethe.node "aten.t.default" fwd (%[[P1]]#0) {aliases = array<i64: 0>} :
// CHECK-NEXT: %[[Y1:.+]] = lethe.node "aten.addmm.default" fwd (%[[P1]]#1, %[[Y0]], %[[T1]])
// One parameter: gathered alone, the padding row dropped by a view.
// CHECK-NEXT: %[[AGH:.+]] = lethe.collective all_gather %[[WH]] group [0, 1] fwd {{.*}} : tensor<3x8xbf16> -> tensor<6x8xbf16>
// CHECK-NEXT: %[[PH:.+]] = lethe.node "fsdp.unpad" fwd (%[[AGH]]) {aliases = array<i64: 0>, scope = "head"} : (tensor<6x8xbf16>) -> tensor<5x8xbf16>
// CHECK-NEXT: %[[TH:.+]] = lethe.node "aten.t.default" fwd (%[[PH]]) {aliases = array<i64: 0>} :
// CHECK-NEXT: lethe.node "aten.mm.default" fwd (%[[Y1]], %[[TH]])
// CHECK-NEXT: %[[LOSS:.+]] = lethe.node "aten.sum.default" fwd

// Backward: the head is gathered again; the forward view %th is re-made
// from it, so nothing in the backward reads the forward's gathered values.
// CHECK-NEXT: %[[AGHB:.+]] = lethe.collective all_gather %[[WH]] group [0, 1] bwd {name = "fsdp.all_gather_bwd.head"
// CHECK-NEXT: %[[PHB:.+]] = lethe.node "fsdp.unpad" bwd (%[[AGHB]])
// CHECK-NEXT: %[[THB:.+]] = lethe.node "aten.t.default" bwd (%[[PHB]]) {aliases = array<i64: 0>} : (tensor<5x8xbf16>) -> tensor<8x5xbf16>
// CHECK-NEXT: %[[THT:.+]] = lethe.node "aten.t.default" bwd (%[[THB]])
// CHECK-NEXT: %[[GY1:.+]] = lethe.node "aten.mm.default" bwd (%[[G]], %[[THT]])
// CHECK-NEXT: %[[GWH:.+]] = lethe.node "aten.mm.default" bwd (%[[G]], %[[Y1]])
// The head's gradient is padded to 6 rows and reduce-scattered at once.
// CHECK-NEXT: %[[PADH:.+]] = lethe.node "fsdp.pad" bwd (%[[GWH]]) {scope = "head"} : (tensor<5x8xbf16>) -> tensor<6x8xbf16>
// CHECK-NEXT: %[[RSH:.+]] = lethe.collective reduce_scatter %[[PADH]] group [0, 1] bwd {{.*}} : tensor<6x8xbf16> -> tensor<3x8xbf16>
// CHECK-NEXT: %[[GW1:.+]] = lethe.node "aten.mm.default" bwd (%[[GY1]], %[[Y0]])
// CHECK-NEXT: %[[GB1:.+]] = lethe.node "aten.sum.dim_IntList" bwd (%[[GY1]])
// h.1's gradients: packed rank-major, one reduce-scatter, shards are views.
// CHECK-NEXT: %[[RSIN1:.+]] = lethe.node "fsdp.pack_grads" bwd (%[[GW1]], %[[GB1]]) {scope = "h.1"} : (tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<72xbf16>
// CHECK-NEXT: %[[RS1:.+]] = lethe.collective reduce_scatter %[[RSIN1]] group [0, 1] bwd {name = "fsdp.reduce_scatter.h.1", scope = "h.1", time_us = 5.000720e+00 : f64} : tensor<72xbf16> -> tensor<36xbf16>
// CHECK-NEXT: %[[GS1:.+]]:2 = lethe.node "fsdp.unpack_grad_shards" bwd (%[[RS1]]) {aliases = array<i64: 0, 0>, scope = "h.1"} : (tensor<36xbf16>) -> (tensor<4x8xbf16>, tensor<4xbf16>)
// The backward reads only h.1's weight (the bias gradient needs no bias).
// CHECK-NEXT: %[[AG1B:.+]] = lethe.collective all_gather %[[W1]] group [0, 1] bwd {{.*}} : tensor<4x8xbf16> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[T1B:.+]] = lethe.node "aten.t.default" bwd (%[[AG1B]])
// CHECK-NEXT: %[[GY0:.+]] = lethe.node "aten.mm.default" bwd (%[[GY1]], %[[T1B]])
// CHECK-NEXT: %[[GW0:.+]] = lethe.node "aten.mm.default" bwd (%[[GY0]], %[[X]])
// CHECK-NEXT: %[[GB0:.+]] = lethe.node "aten.sum.dim_IntList" bwd (%[[GY0]])
// CHECK-NEXT: %[[RSIN0:.+]] = lethe.node "fsdp.pack_grads" bwd (%[[GW0]], %[[GB0]])
// CHECK-NEXT: %[[RS0:.+]] = lethe.collective reduce_scatter %[[RSIN0]]
// CHECK-NEXT: %[[GS0:.+]]:2 = lethe.node "fsdp.unpack_grad_shards" bwd (%[[RS0]])
// CHECK-NEXT: return %[[LOSS]], %[[GS0]]#0, %[[GS0]]#1, %[[GS1]]#0, %[[GS1]]#1, %[[RSH]]

// bucket=param: one collective per parameter.
// PARAM-LABEL: func.func @step(
// PARAM-NOT: fsdp.pack_shards
// PARAM: %[[AW0:.+]] = lethe.collective all_gather %arg1 group [0, 1] fwd {name = "fsdp.all_gather_fwd.h.0", scope = "h.0"} : tensor<4x8xbf16> -> tensor<8x8xbf16>
// PARAM-NEXT: %[[AB0:.+]] = lethe.collective all_gather %arg2 group [0, 1] fwd {name = "fsdp.all_gather_fwd.h.0", scope = "h.0"} : tensor<4xbf16> -> tensor<8xbf16>
// PARAM-NEXT: lethe.node "aten.t.default" fwd (%[[AW0]])
// PARAM: lethe.collective reduce_scatter %{{.*}} group [0, 1] bwd {name = "fsdp.reduce_scatter.h.1", scope = "h.1"} : tensor<8x8xbf16> -> tensor<4x8xbf16>
// Each gradient is reduce-scattered as soon as it is produced.
// PARAM-NEXT: lethe.node "aten.sum.dim_IntList" bwd
// PARAM-NEXT: lethe.collective reduce_scatter %{{.*}} group [0, 1] bwd {name = "fsdp.reduce_scatter.h.1", scope = "h.1"} : tensor<8xbf16> -> tensor<4xbf16>
// PARAM-NOT: fsdp.unpack_grad

// prefetch=1 (the default): each unit's all-gather is issued one unit
// ahead, before the first use of the unit the phase reads before it; the
// copy-out (or unpad) that reads it stays at the unit's own first use, so
// the gather overlaps the compute in between.
// PREFETCH-LABEL: func.func @step(
// PREFETCH-NEXT: lethe.node "fsdp.pack_shards" fwd {{.*}}scope = "h.0"
// PREFETCH-NEXT: lethe.collective all_gather {{.*}} fwd {name = "fsdp.all_gather_fwd.h.0"
// PREFETCH-NEXT: %[[P0:.+]]:2 = lethe.node "fsdp.unpack_gathered" fwd
// PREFETCH-NEXT: lethe.node "fsdp.pack_shards" fwd {{.*}}scope = "h.1"
// PREFETCH-NEXT: %[[AG1:.+]] = lethe.collective all_gather {{.*}} fwd {name = "fsdp.all_gather_fwd.h.1"
// PREFETCH-NEXT: lethe.node "aten.t.default" fwd (%[[P0]]#0)
// PREFETCH-NEXT: lethe.node "aten.addmm.default" fwd
// PREFETCH-NEXT: lethe.node "fsdp.unpack_gathered" fwd (%[[AG1]])
// PREFETCH-NEXT: %[[AGH:.+]] = lethe.collective all_gather %{{.*}} group [0, 1] fwd {name = "fsdp.all_gather_fwd.head"
// PREFETCH-NEXT: lethe.node "aten.t.default" fwd
// PREFETCH-NEXT: lethe.node "aten.addmm.default" fwd
// PREFETCH-NEXT: lethe.node "fsdp.unpad" fwd (%[[AGH]])
// PREFETCH: lethe.node "aten.sum.default" fwd
// PREFETCH-NEXT: lethe.collective all_gather %{{.*}} group [0, 1] bwd {name = "fsdp.all_gather_bwd.head"
// PREFETCH-NEXT: lethe.node "fsdp.unpad" bwd
// PREFETCH-NEXT: lethe.collective all_gather %{{.*}} group [0, 1] bwd {name = "fsdp.all_gather_bwd.h.1"

// ROUND-LABEL: func.func @step(
// ROUND-COUNT-3: lethe.collective all_gather {{.*}} fwd
// ROUND-COUNT-2: lethe.collective all_gather {{.*}} bwd
// ROUND: return
func.func @step(%x: tensor<4x8xbf16> {lethe.kind = "input", lethe.name = "x"},
                %w0: tensor<8x8xbf16> {lethe.kind = "param", lethe.name = "h.0.fc.weight"},
                %b0: tensor<8xbf16> {lethe.kind = "param", lethe.name = "h.0.fc.bias"},
                %w1: tensor<8x8xbf16> {lethe.kind = "param", lethe.name = "h.1.fc.weight"},
                %b1: tensor<8xbf16> {lethe.kind = "param", lethe.name = "h.1.fc.bias"},
                // expected-remark @+1 {{parameter 'head.weight': dimension 0 (5) is not divisible by 2 ranks; each rank holds 3 rows, the last 1 of them zero padding}}
                %wh: tensor<5x8xbf16> {lethe.kind = "param", lethe.name = "head.weight"},
                %g: tensor<4x5xbf16> {lethe.kind = "tangent", lethe.name = "tangents_1"})
    -> (tensor<f32>, tensor<8x8xbf16>, tensor<8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>, tensor<5x8xbf16>) {
  %t0 = lethe.node "aten.t.default" fwd (%w0) {aliases = array<i64: 0>} : (tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %y0 = lethe.node "aten.addmm.default" fwd (%b0, %x, %t0) : (tensor<8xbf16>, tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %t1 = lethe.node "aten.t.default" fwd (%w1) {aliases = array<i64: 0>, lethe.saved = array<i64: 0>} : (tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %y1 = lethe.node "aten.addmm.default" fwd (%b1, %y0, %t1) : (tensor<8xbf16>, tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %th = lethe.node "aten.t.default" fwd (%wh) {aliases = array<i64: 0>} : (tensor<5x8xbf16>) -> tensor<8x5xbf16>
  %logits = lethe.node "aten.mm.default" fwd (%y1, %th) : (tensor<4x8xbf16>, tensor<8x5xbf16>) -> tensor<4x5xbf16>
  %loss = lethe.node "aten.sum.default" fwd (%logits) : (tensor<4x5xbf16>) -> tensor<f32>
  %tht = lethe.node "aten.t.default" bwd (%th) {aliases = array<i64: 0>} : (tensor<8x5xbf16>) -> tensor<5x8xbf16>
  %gy1 = lethe.node "aten.mm.default" bwd (%g, %tht) : (tensor<4x5xbf16>, tensor<5x8xbf16>) -> tensor<4x8xbf16>
  %gwh = lethe.node "aten.mm.default" bwd (%g, %y1) : (tensor<4x5xbf16>, tensor<4x8xbf16>) -> tensor<5x8xbf16>
  %gw1 = lethe.node "aten.mm.default" bwd (%gy1, %y0) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %gb1 = lethe.node "aten.sum.dim_IntList" bwd (%gy1) : (tensor<4x8xbf16>) -> tensor<8xbf16>
  %gy0 = lethe.node "aten.mm.default" bwd (%gy1, %t1) : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %gw0 = lethe.node "aten.mm.default" bwd (%gy0, %x) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %gb0 = lethe.node "aten.sum.dim_IntList" bwd (%gy0) : (tensor<4x8xbf16>) -> tensor<8xbf16>
  return %loss, %gw0, %gb0, %gw1, %gb1, %gwh : tensor<f32>, tensor<8x8xbf16>, tensor<8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>, tensor<5x8xbf16>
}

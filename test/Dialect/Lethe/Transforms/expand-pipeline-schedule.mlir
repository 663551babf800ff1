// Four layers (h.0 .. h.3) of 10+2+10+10+2 us each, an embedding (dropout)
// and a head; the mask (ones_like of the input) depends on no layer.
//
// The stage's op order over the micro-batches, read back from the IR: each
// op's phase and micro-batch (lethe.mb), consecutive repeats merged. These
// are the textbook 1F1B orders (warm-up P-S-1 forwards, then one forward
// and one backward, then the remaining backwards).
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=0 microbatches=4' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.mb = ([0-9]+) .*/\1\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=P2S0
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=1 microbatches=4' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.mb = ([0-9]+) .*/\1\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=P2S1
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=0 microbatches=8' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.mb = ([0-9]+) .*/\1\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=P2M8S0
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=4 stage=0 microbatches=8' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.mb = ([0-9]+) .*/\1\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=P4S0
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=4 stage=1 microbatches=8' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.mb = ([0-9]+) .*/\1\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=P4S1
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=4 stage=2 microbatches=8' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.mb = ([0-9]+) .*/\1\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=P4S2
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=4 stage=3 microbatches=8' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.mb = ([0-9]+) .*/\1\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=P4S3
// P2S0: fwd0 fwd1 bwd0 fwd2 bwd1 fwd3 bwd2 bwd3 {{$}}
// P2S1: fwd0 bwd0 fwd1 bwd1 fwd2 bwd2 fwd3 bwd3 {{$}}
// P2M8S0: fwd0 fwd1 bwd0 fwd2 bwd1 fwd3 bwd2 fwd4 bwd3 fwd5 bwd4 fwd6 bwd5 fwd7 bwd6 bwd7 {{$}}
// P4S0: fwd0 fwd1 fwd2 fwd3 bwd0 fwd4 bwd1 fwd5 bwd2 fwd6 bwd3 fwd7 bwd4 bwd5 bwd6 bwd7 {{$}}
// P4S1: fwd0 fwd1 fwd2 bwd0 fwd3 bwd1 fwd4 bwd2 fwd5 bwd3 fwd6 bwd4 fwd7 bwd5 bwd6 bwd7 {{$}}
// P4S2: fwd0 fwd1 bwd0 fwd2 bwd1 fwd3 bwd2 fwd4 bwd3 fwd5 bwd4 fwd6 bwd5 fwd7 bwd6 bwd7 {{$}}
// P4S3: fwd0 bwd0 fwd1 bwd1 fwd2 bwd2 fwd3 bwd3 fwd4 bwd4 fwd5 bwd5 fwd6 bwd6 fwd7 bwd7 {{$}}

// Megatron's interleaved order with 2 chunks per stage (chunk c runs on
// stage c % 2): "fwd1.c2" is micro-batch 1 on chunk 2.
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=0 microbatches=4 schedule=interleaved vpp=2' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.chunk = ([0-9]+) : i64, lethe.mb = ([0-9]+) .*/\1\3.c\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=V2S0
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=1 microbatches=4 schedule=interleaved vpp=2' | grep 'lethe.node' | sed -E 's/.*lethe.node "[^"]*" (fwd|bwd) .*lethe.chunk = ([0-9]+) : i64, lethe.mb = ([0-9]+) .*/\1\3.c\2/' | uniq | tr '\n' ' ' | FileCheck %s --check-prefix=V2S1
// V2S0: fwd0.c0 fwd1.c0 fwd0.c2 fwd1.c2 fwd2.c0 bwd0.c2 fwd3.c0 bwd1.c2 fwd2.c2 bwd0.c0 fwd3.c2 bwd1.c0 bwd2.c2 bwd3.c2 bwd2.c0 bwd3.c0 {{$}}
// V2S1: fwd0.c1 fwd1.c1 fwd0.c3 bwd0.c3 fwd1.c3 bwd1.c3 fwd2.c1 bwd0.c1 fwd3.c1 bwd1.c1 fwd2.c3 bwd2.c3 fwd3.c3 bwd3.c3 bwd2.c1 bwd3.c1 {{$}}

// The split and the order are a decision, reported as a `passed` remark
// when the remark engine asks for the pass's category; without it the pass
// says nothing.
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=1 microbatches=4' --remarks-filter=lethe-expand-pipeline-schedule --remark-format=emitRemark -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// REMARK: remark: [Passed] partition | Category:lethe-expand-pipeline-schedule | Function=step | Remark="pipeline stage 1 of 2 (1f1b, 4 micro-batches): chunk 1 = layers h.2 .. h.3 + head (70.0 of 143.0 per micro-batch); order: F0 B0 F1 B1 F2 B2 F3 B3"
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=1 microbatches=4' -o /dev/null 2>&1 | FileCheck %s --allow-empty --check-prefix=QUIET
// QUIET-NOT: {{.}}

// Deterministic: two runs print the same program.
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=1 microbatches=4' > %t.1.mlir
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=1 microbatches=4' > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir

// The whole program of both stages for 2 micro-batches.
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=0 microbatches=2' | FileCheck %s --check-prefix=S0
// RUN: lethe-opt %s --lethe-expand-pipeline-schedule='stages=2 stage=1 microbatches=2' | lethe-opt | FileCheck %s --check-prefix=S1

// Stage 0: its parameters, shared; the input once per micro-batch.
// S0-LABEL: func.func @step(
// S0-SAME: %[[X0:[a-z0-9]+]]: tensor<2x4xf32> {lethe.kind = "input", lethe.mb = 0 : i64, lethe.name = "x.mb0"}
// S0-SAME: %[[W0:[a-z0-9]+]]: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.0.fc.weight"}
// S0-SAME: %[[W1:[a-z0-9]+]]: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.1.fc.weight"}
// S0-SAME: %[[X1:[a-z0-9]+]]: tensor<2x4xf32> {lethe.kind = "input", lethe.mb = 1 : i64, lethe.name = "x.mb1"}
// S0-SAME: -> (tensor<4x4xf32>, tensor<4x4xf32>)
// S0-SAME: attributes {lethe.pipeline = #lethe.pipeline<schedule = "1f1b", stages = 2, stage = 0, microbatches = 2, vpp = 1>, lethe.ranks_per_host = 2 : i64}
// F0: micro-batch 0 through layers 0 and 1, its output sent to stage 1.
// S0-NEXT: %[[D0:.+]]:2 = lethe.node "aten.native_dropout.default" fwd (%[[X0]]) {lethe.chunk = 0 : i64, lethe.mb = 0 : i64
// S0-NEXT: %[[H00:.+]] = lethe.node "aten.mm.default" fwd (%[[D0]]#0, %[[W0]])
// S0-NEXT: %[[M0:.+]] = lethe.node "aten.ones_like.default" fwd (%[[X0]])
// S0-NEXT: %[[A00:.+]] = lethe.node "aten.mul.Tensor" fwd (%[[H00]], %[[M0]])
// S0-NEXT: %[[H01:.+]] = lethe.node "aten.mm.default" fwd (%[[A00]], %[[W1]])
// S0-NEXT: %[[A01:.+]] = lethe.node "aten.mul.Tensor" fwd (%[[H01]], %[[M0]])
// S0-NEXT: lethe.collective send %[[A01]] peer 1 group [0, 1] fwd {lethe.chunk = 0 : i64, lethe.mb = 0 : i64, lethe.p2p_group = 1 : i64, name = "pp.send.fwd.c0.mb0"} : tensor<2x4xf32>
// F1: micro-batch 1, values of its own; its output sent together with the
// receive of micro-batch 0's gradient (one group).
// S0-NEXT: %[[D1:.+]]:2 = lethe.node "aten.native_dropout.default" fwd (%[[X1]]) {lethe.chunk = 0 : i64, lethe.mb = 1 : i64
// S0-NEXT: %[[H10:.+]] = lethe.node "aten.mm.default" fwd (%[[D1]]#0, %[[W0]])
// S0-NEXT: %[[M1:.+]] = lethe.node "aten.ones_like.default" fwd (%[[X1]])
// S0-NEXT: %[[A10:.+]] = lethe.node "aten.mul.Tensor" fwd (%[[H10]], %[[M1]])
// S0-NEXT: %[[H11:.+]] = lethe.node "aten.mm.default" fwd (%[[A10]], %[[W1]])
// S0-NEXT: %[[A11:.+]] = lethe.node "aten.mul.Tensor" fwd (%[[H11]], %[[M1]])
// S0-NEXT: lethe.collective send %[[A11]] peer 1 group [0, 1] fwd {{.*}}name = "pp.send.fwd.c0.mb1"
// S0-NEXT: %[[G0:.+]] = lethe.collective recv peer 1 group [0, 1] bwd {lethe.chunk = 1 : i64, lethe.mb = 0 : i64, lethe.p2p_group = 2 : i64, name = "pp.recv.bwd.c1.mb0"} : -> tensor<2x4xf32>
// B0 reads micro-batch 0's saved activations.
// S0-NEXT: %[[GH01:.+]] = lethe.node "aten.mul.Tensor" bwd (%[[G0]], %[[M0]])
// S0-NEXT: %[[GW01:.+]] = lethe.node "aten.mm.default" bwd (%[[A00]], %[[GH01]])
// S0-NEXT: %[[GA00:.+]] = lethe.node "aten.mm.default" bwd (%[[GH01]], %[[W1]])
// S0-NEXT: %[[GH00:.+]] = lethe.node "aten.mul.Tensor" bwd (%[[GA00]], %[[M0]])
// S0-NEXT: %[[GW00:.+]] = lethe.node "aten.mm.default" bwd (%[[D0]]#0, %[[GH00]])
// S0-NEXT: lethe.node "aten.mm.default" bwd (%[[GH00]], %[[W0]])
// S0-NEXT: lethe.node "aten.native_dropout_backward.default" bwd
// S0-NEXT: %[[G1:.+]] = lethe.collective recv peer 1 group [0, 1] bwd {lethe.chunk = 1 : i64, lethe.mb = 1 : i64
// B1: gradients summed over the micro-batches (the first sum allocates).
// S0-NEXT: %[[GH11:.+]] = lethe.node "aten.mul.Tensor" bwd (%[[G1]], %[[M1]])
// S0-NEXT: %[[GW11:.+]] = lethe.node "aten.mm.default" bwd (%[[A10]], %[[GH11]])
// S0-NEXT: %[[SUM1:.+]] = lethe.node "aten.add.Tensor" bwd (%[[GW01]], %[[GW11]]) {lethe.chunk = 0 : i64, lethe.mb = 1 : i64, name = "pp.grad_accumulate"}
// S0-NEXT: %[[GA10:.+]] = lethe.node "aten.mm.default" bwd (%[[GH11]], %[[W1]])
// S0-NEXT: %[[GH10:.+]] = lethe.node "aten.mul.Tensor" bwd (%[[GA10]], %[[M1]])
// S0-NEXT: %[[GW10:.+]] = lethe.node "aten.mm.default" bwd (%[[D1]]#0, %[[GH10]])
// S0-NEXT: %[[SUM0:.+]] = lethe.node "aten.add.Tensor" bwd (%[[GW00]], %[[GW10]])
// S0-NEXT: lethe.node "aten.mm.default" bwd
// S0-NEXT: lethe.node "aten.native_dropout_backward.default" bwd
// The stage returns the gradients of its parameters.
// S0-NEXT: return %[[SUM0]], %[[SUM1]] : tensor<4x4xf32>, tensor<4x4xf32>

// Stage 1: the mask is re-computed from its own copy of the input; the
// loss is returned per micro-batch.
// S1-LABEL: func.func @step(
// S1-SAME: %[[W2:[a-z0-9]+]]: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.2.fc.weight"}
// S1-SAME: %[[X0:[a-z0-9]+]]: tensor<2x4xf32> {lethe.kind = "input", lethe.mb = 0 : i64, lethe.name = "x.mb0"}
// S1-SAME: %[[T0:[a-z0-9]+]]: tensor<f32> {lethe.kind = "tangent", lethe.mb = 0 : i64, lethe.name = "tangents_1.mb0"}
// S1-SAME: -> (tensor<f32> {lethe.mb = 0 : i64}, tensor<f32> {lethe.mb = 1 : i64}, tensor<4x4xf32>, tensor<4x4xf32>)
// S1-NEXT: %[[IN0:.+]] = lethe.collective recv peer 0 group [0, 1] fwd {lethe.chunk = 0 : i64, lethe.mb = 0 : i64, lethe.p2p_group = 0 : i64, name = "pp.recv.fwd.c0.mb0"} : -> tensor<2x4xf32>
// S1-NEXT: %[[H:.+]] = lethe.node "aten.mm.default" fwd (%[[IN0]], %[[W2]]) {lethe.chunk = 1 : i64, lethe.mb = 0 : i64
// S1-NEXT: lethe.node "aten.ones_like.default" fwd (%[[X0]]) {lethe.chunk = 1 : i64, lethe.mb = 0 : i64
// S1: %[[LOSS0:.+]] = lethe.node "aten.sum.default" fwd
// S1-NEXT: lethe.node "aten.expand.default" bwd (%[[T0]])
// S1: lethe.node "aten.mm.default" bwd (%[[IN0]],
// S1: lethe.collective send %{{.*}} peer 0 group [0, 1] bwd {lethe.chunk = 1 : i64, lethe.mb = 0 : i64, lethe.p2p_group = 2 : i64, name = "pp.send.bwd.c1.mb0"}
// S1-NEXT: lethe.collective recv peer 0 group [0, 1] fwd {lethe.chunk = 0 : i64, lethe.mb = 1 : i64
// S1: %[[LOSS1:.+]] = lethe.node "aten.sum.default" fwd
// S1: lethe.collective send %{{.*}} peer 0 group [0, 1] bwd {lethe.chunk = 1 : i64, lethe.mb = 1 : i64
// S1-NEXT: return %[[LOSS0]], %[[LOSS1]], %{{.*}}, %{{.*}} :

func.func @step(%x: tensor<2x4xf32> {lethe.kind = "input", lethe.name = "x"},
    %w0: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.0.fc.weight"},
    %w1: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.1.fc.weight"},
    %w2: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.2.fc.weight"},
    %w3: tensor<4x4xf32> {lethe.kind = "param", lethe.name = "h.3.fc.weight"},
    %seed: tensor<f32> {lethe.kind = "tangent", lethe.name = "tangents_1"})
    -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %m = lethe.node "aten.ones_like.default" fwd (%x) {scope = "model", time_us = 1.0 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %e:2 = lethe.node "aten.native_dropout.default" fwd (%x) {scope = "model.drop", time_us = 2.0 : f64} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %h0 = lethe.node "aten.mm.default" fwd (%e#0, %w0) {scope = "h.0.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a0 = lethe.node "aten.mul.Tensor" fwd (%h0, %m) {scope = "h.0", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h1 = lethe.node "aten.mm.default" fwd (%a0, %w1) {scope = "h.1.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a1 = lethe.node "aten.mul.Tensor" fwd (%h1, %m) {scope = "h.1", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h2 = lethe.node "aten.mm.default" fwd (%a1, %w2) {scope = "h.2.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a2 = lethe.node "aten.mul.Tensor" fwd (%h2, %m) {scope = "h.2", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h3 = lethe.node "aten.mm.default" fwd (%a2, %w3) {scope = "h.3.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a3 = lethe.node "aten.mul.Tensor" fwd (%h3, %m) {scope = "h.3", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = lethe.node "aten.sum.default" fwd (%a3) {scope = "head", time_us = 1.0 : f64} : (tensor<2x4xf32>) -> tensor<f32>
  %g4 = lethe.node "aten.expand.default" bwd (%seed) {scope = "head", time_us = 1.0 : f64} : (tensor<f32>) -> tensor<2x4xf32>
  %gh3 = lethe.node "aten.mul.Tensor" bwd (%g4, %m) {scope = "h.3", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw3 = lethe.node "aten.mm.default" bwd (%a2, %gh3) {scope = "h.3.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g3 = lethe.node "aten.mm.default" bwd (%gh3, %w3) {scope = "h.3.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gh2 = lethe.node "aten.mul.Tensor" bwd (%g3, %m) {scope = "h.2", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw2 = lethe.node "aten.mm.default" bwd (%a1, %gh2) {scope = "h.2.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g2 = lethe.node "aten.mm.default" bwd (%gh2, %w2) {scope = "h.2.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gh1 = lethe.node "aten.mul.Tensor" bwd (%g2, %m) {scope = "h.1", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw1 = lethe.node "aten.mm.default" bwd (%a0, %gh1) {scope = "h.1.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g1 = lethe.node "aten.mm.default" bwd (%gh1, %w1) {scope = "h.1.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gh0 = lethe.node "aten.mul.Tensor" bwd (%g1, %m) {scope = "h.0", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw0 = lethe.node "aten.mm.default" bwd (%e#0, %gh0) {scope = "h.0.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %g0 = lethe.node "aten.mm.default" bwd (%gh0, %w0) {scope = "h.0.fc", time_us = 10.0 : f64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gx = lethe.node "aten.native_dropout_backward.default" bwd (%g0, %e#1) {scope = "model.drop", time_us = 2.0 : f64} : (tensor<2x4xf32>, tensor<2x4xi1>) -> tensor<2x4xf32>
  return %loss, %gw0, %gw1, %gw2, %gw3 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

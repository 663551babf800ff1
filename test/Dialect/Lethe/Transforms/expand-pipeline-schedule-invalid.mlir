// RUN: lethe-opt %s -split-input-file -verify-diagnostics --lethe-expand-pipeline-schedule='stages=2 stage=0 microbatches=2' --remarks-filter=lethe-expand-pipeline-schedule --remark-format=emitRemark
// RUN: not lethe-opt %s -split-input-file --lethe-expand-pipeline-schedule='schedule=gpipe' 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not lethe-opt %s -split-input-file --lethe-expand-pipeline-schedule='vpp=2' 2>&1 | FileCheck %s --check-prefix=VPP
// RUN: not lethe-opt %s -split-input-file --lethe-expand-pipeline-schedule='stages=2 microbatches=3 schedule=interleaved vpp=2' 2>&1 | FileCheck %s --check-prefix=GROUPS
// RUN: not lethe-opt %s -split-input-file --lethe-expand-pipeline-schedule='stages=2 stage=2' 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not lethe-opt %s -split-input-file --lethe-expand-pipeline-schedule='stages=3' 2>&1 | FileCheck %s --check-prefix=LAYERS

// SCHEDULE: error: lethe-expand-pipeline-schedule: unknown schedule 'gpipe' (expected 1f1b or interleaved)
// VPP: error: lethe-expand-pipeline-schedule: the 1f1b schedule has one chunk per stage (vpp=1); use schedule=interleaved for vpp=2
// GROUPS: error: lethe-expand-pipeline-schedule: the interleaved schedule runs micro-batches in groups of stages: microbatches (3) must be a multiple of stages (2)
// RUN: not lethe-opt %s -split-input-file --lethe-expand-pipeline-schedule='stages=2 ranks-per-host=-1' 2>&1 | FileCheck %s --check-prefix=RANKS
// STAGE: error: lethe-expand-pipeline-schedule: stage must be in [0, 2), got 2
// RANKS: error: lethe-expand-pipeline-schedule: ranks-per-host must be in [0, 2] (0: all stages), got -1
// LAYERS: error: cannot split 2 layers (scopes with a numeric index, e.g. 'transformer.h.3') into 3 pipeline chunks (stages=3 x vpp=1)

// Two layers: valid for the first RUN line.
// expected-remark @+1 {{pipeline stage 0 of 2 (1f1b, 2 micro-batches): chunk 0 = layers h.0 .. h.0 + embedding (2.0 of 4.0 per micro-batch); order: F0 F1 B0 B1}}
func.func @two_layers(%x: tensor<4xf32> {lethe.kind = "input"}, %seed: tensor<4xf32> {lethe.kind = "tangent"}) -> tensor<4xf32> {
  %0 = lethe.node "aten.relu.default" fwd (%x) {scope = "h.0"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = lethe.node "aten.relu.default" fwd (%0) {scope = "h.1"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = lethe.node "aten.threshold_backward.default" bwd (%seed, %1) {scope = "h.1"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = lethe.node "aten.threshold_backward.default" bwd (%2, %0) {scope = "h.0"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// expected-error @+1 {{step is already expanded into a pipeline stage (lethe.pipeline is set)}}
func.func @twice(%x: tensor<4xf32>) attributes {lethe.pipeline = #lethe.pipeline<schedule = "1f1b", stages = 2, stage = 0, microbatches = 2, vpp = 1>} {
  return
}

// -----

func.func @optimizer(%x: tensor<4xf32>) {
  %0 = lethe.node "aten.relu.default" fwd (%x) {scope = "h.0"} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{optimizer ops are not supported: a pipeline runs the optimizer once after all micro-batches; expand a step without its optimizer phase}}
  %1 = lethe.node "aten.add_.Tensor" opt (%x, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @not_canonical(%x: tensor<4xf32>) {
  // expected-error @+1 {{lethe-expand-pipeline-schedule expects the canonical graph form ('lethe.node' and 'lethe.collective' ops), got 'lethe.barrier'}}
  %t = lethe.barrier
  return
}

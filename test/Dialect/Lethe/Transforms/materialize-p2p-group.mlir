// RUN: lethe-opt %s --split-input-file --lethe-plan='policy=none' --lethe-materialize | FileCheck %s

// A send and a receive of one NCCL group run together: the sent tensor is
// released after the group's last transfer, so the receive cannot reuse its
// memory while the send still reads it.
// CHECK-LABEL: func.func @grouped
// CHECK: %[[X:.+]] = lethe.node "aten.relu.default" fwd
// CHECK: lethe.collective send %[[X]] peer 1
// CHECK-NOT: lethe.release %[[X]]
// CHECK: lethe.collective recv peer 1
// CHECK: lethe.release %[[X]]
func.func @grouped(%w: tensor<256xf32> {lethe.kind = "param"}) -> tensor<256xf32> {
  %x = lethe.node "aten.relu.default" fwd (%w) {time_us = 1.0 : f64} : (tensor<256xf32>) -> tensor<256xf32>
  lethe.collective send %x peer 1 group [0, 1] fwd {lethe.p2p_group = 1 : i64, time_us = 1.0 : f64} : tensor<256xf32>
  %y = lethe.collective recv peer 1 group [0, 1] bwd {lethe.p2p_group = 1 : i64, time_us = 1.0 : f64} : -> tensor<256xf32>
  %z = lethe.node "aten.relu.default" bwd (%y) {time_us = 1.0 : f64} : (tensor<256xf32>) -> tensor<256xf32>
  return %z : tensor<256xf32>
}

// -----

// Without a group the send's tensor dies at the send.
// CHECK-LABEL: func.func @alone
// CHECK: %[[X:.+]] = lethe.node "aten.relu.default" fwd
// CHECK: lethe.collective send %[[X]] peer 1
// CHECK: lethe.release %[[X]]
// CHECK: lethe.collective recv peer 1
func.func @alone(%w: tensor<256xf32> {lethe.kind = "param"}) -> tensor<256xf32> {
  %x = lethe.node "aten.relu.default" fwd (%w) {time_us = 1.0 : f64} : (tensor<256xf32>) -> tensor<256xf32>
  lethe.collective send %x peer 1 group [0, 1] fwd {time_us = 1.0 : f64} : tensor<256xf32>
  %y = lethe.collective recv peer 1 group [0, 1] bwd {time_us = 1.0 : f64} : -> tensor<256xf32>
  %z = lethe.node "aten.relu.default" bwd (%y) {time_us = 1.0 : f64} : (tensor<256xf32>) -> tensor<256xf32>
  return %z : tensor<256xf32>
}

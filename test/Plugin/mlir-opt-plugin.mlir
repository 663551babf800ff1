// Debian's own mlir-opt-22 loads Lethe as a dialect and pass plugin.
// REQUIRES: mlir-opt-22
// RUN: mlir-opt-22 --load-dialect-plugin=%lethe_plugin --load-pass-plugin=%lethe_plugin \
// RUN:   --pass-pipeline="builtin.module(lethe-annotate-costs{device=h100})" %s | FileCheck %s

// The mm has no time: the plugin's cost model gives it one (2*64*128*32 FLOPs
// is far below the launch floor, so the bound is the floor); the measured
// relu keeps its own.
// CHECK-LABEL: func.func @step
// CHECK: lethe.node "aten.mm.default" fwd ({{.*}}) {lethe.cost_source = #lethe<cost_source analytic>, time_us =
// CHECK: lethe.node "aten.relu.default" fwd ({{.*}}) {lethe.cost_source = #lethe<cost_source measured>, time_us = 2.500000e+00 : f64}
func.func @step(%w: tensor<128x32xbf16> {lethe.kind = "param"}, %x: tensor<64x128xbf16>) -> tensor<64x32xbf16> {
  %0 = lethe.node "aten.mm.default" fwd (%x, %w) : (tensor<64x128xbf16>, tensor<128x32xbf16>) -> tensor<64x32xbf16>
  %1 = lethe.node "aten.relu.default" fwd (%0) {time_us = 2.5 : f64} : (tensor<64x32xbf16>) -> tensor<64x32xbf16>
  return %1 : tensor<64x32xbf16>
}

// RUN: lethe-opt %s --lethe-assign-buffers --remarks-filter=lethe-assign-buffers --remark-format=emitRemark -verify-diagnostics | FileCheck %s

// Packing where a fixed placement order leaves a gap: nine buffers, one
// allocation or release per op (positions 0-17; each buffer's [begin, end)
// and bytes above it). Max-live is 3328 bytes, at positions 6-7:
// 1024 + 768 + 256 + 1024 + 256. Placed one by one in any fixed order
// (largest first, longest-lived first, largest area first, allocation
// order; best-fit or first-fit) the arena is 3584 bytes or more (+7.69%):
// largest-first puts the small long-lived buffer [1, 13) last, at 3328, on
// top of the stack at position 6. Best-fit on the skyline (docs/Pipeline.md,
// lethe-assign-buffers) fills the lowest free segment over time with the
// largest-area buffer living inside it: [2, 10) at 0, [0, 3) above it at
// 1024, the segment that [0, 3) frees with [4, 8) and [5, 7), [6, 14) at
// 2048, and [1, 13) at 3072, the top 256 bytes: the arena meets max-live.

// CHECK-LABEL: func.func @skyline
// expected-remark @+1 {{device arena 3328 bytes for a max-live of 3328 (+0.00%); host arena 0 bytes for a max-live of 0}}
func.func @skyline(%w: tensor<64xf32>) {
  // [0, 3), 1024 bytes
  // CHECK: lethe.offsets = array<i64: 1024>} : (tensor<64xf32>) -> tensor<256xf32>
  %b5 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<256xf32>
  // [1, 13), 256 bytes
  // CHECK: lethe.offsets = array<i64: 3072>} : (tensor<64xf32>) -> tensor<64xf32>
  %b8 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<64xf32>
  // [2, 10), 1024 bytes
  // CHECK: lethe.offsets = array<i64: 0>} : (tensor<64xf32>) -> tensor<256xf32>
  %b1 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<256xf32>
  lethe.release %b5 : tensor<256xf32>
  // [4, 8), 768 bytes
  // CHECK: lethe.offsets = array<i64: 1024>} : (tensor<64xf32>) -> tensor<192xf32>
  %b0 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<192xf32>
  // [5, 7), 256 bytes
  // CHECK: lethe.offsets = array<i64: 1792>} : (tensor<64xf32>) -> tensor<64xf32>
  %b3 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<64xf32>
  // [6, 14), 1024 bytes
  // CHECK: lethe.offsets = array<i64: 2048>} : (tensor<64xf32>) -> tensor<256xf32>
  %b4 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<256xf32>
  lethe.release %b3 : tensor<64xf32>
  lethe.release %b0 : tensor<192xf32>
  // [9, 15), 768 bytes
  // CHECK: lethe.offsets = array<i64: 1280>} : (tensor<64xf32>) -> tensor<192xf32>
  %b6 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<192xf32>
  lethe.release %b1 : tensor<256xf32>
  // [11, 16), 768 bytes
  // CHECK: lethe.offsets = array<i64: 0>} : (tensor<64xf32>) -> tensor<192xf32>
  %b2 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<192xf32>
  // [12, 17), 512 bytes
  // CHECK: lethe.offsets = array<i64: 768>} : (tensor<64xf32>) -> tensor<128xf32>
  %b7 = lethe.node "aten.relu.default" fwd (%w) : (tensor<64xf32>) -> tensor<128xf32>
  lethe.release %b8 : tensor<64xf32>
  lethe.release %b4 : tensor<256xf32>
  lethe.release %b6 : tensor<192xf32>
  lethe.release %b2 : tensor<192xf32>
  lethe.release %b7 : tensor<128xf32>
  return
}

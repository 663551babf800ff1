// RUN: lethe-translate --lethe-to-cpp %s | FileCheck %s

// A replay kernel moves the bytes its op reads and writes. An operand that
// is a view reads the view's bytes, not its base's whole storage: Mamba's
// scan reads one 8x16 row of a 8x128x16 f32 state per step, and replaying
// each read as the whole state made its step 23% slower than its op times
// on an H200. The view's place in its base is not known, so the bytes are
// read from the storage's start.

// x is 8x128x16 f32: 65536 B.
// CHECK: static const LetheRtBuf x = {{[{]}}[[XOFF:[0-9]+]], 65536};
// CHECK-LABEL: static LetheRtStatus step(

// `row` (select: 8x16 f32, 512 B) is a view: no kernel of its own.
// CHECK: letheRtReplay(rt, "aten.select.int row", 1.0, {}, {});
// The mul reads 512 B of x and all of y (512 B, not a view).
// CHECK: letheRtReplay(rt, "aten.mul.Tensor m", 2.0, {{[{][{]}}x.offset, 512}, y}, {m});

// Two views of one storage are read once, as far as the larger: the
// 8x64x16 slice (32768 B) covers the row's 512.
// CHECK: letheRtReplay(rt, "aten.add.Tensor s", 3.0, {{[{][{]}}x.offset, 32768}}, {s});

// A view no smaller than its base reads the whole storage, by its name.
// CHECK: letheRtReplay(rt, "aten.neg.default n", 1.5, {x}, {n});

module attributes {lethe.device_arena_bytes = 131072 : i64} {
func.func @step(%x: tensor<8x128x16xf32> {lethe.kind = "input", lethe.name = "x"},
                %y: tensor<8x16xf32> {lethe.kind = "input", lethe.name = "y"})
    -> (tensor<8x16xf32>, tensor<8x64x16xf32>, tensor<8x2048xf32>) {
  %row = lethe.node "aten.select.int" fwd (%x) {aliases = array<i64: 0>, args = [{in = 0 : i64}, 1, 3], name = "row", time_us = 1.0 : f64} : (tensor<8x128x16xf32>) -> tensor<8x16xf32>
  %m = lethe.node "aten.mul.Tensor" fwd (%row, %y) {name = "m", time_us = 2.0 : f64, lethe.offsets = array<i64: 0>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %half = lethe.node "aten.slice.Tensor" fwd (%x) {aliases = array<i64: 0>, args = [{in = 0 : i64}, 1, 0, 64], name = "half", time_us = 1.0 : f64} : (tensor<8x128x16xf32>) -> tensor<8x64x16xf32>
  %s = lethe.node "aten.add.Tensor" fwd (%half, %row) {name = "s", time_us = 3.0 : f64, lethe.offsets = array<i64: 512>} : (tensor<8x64x16xf32>, tensor<8x16xf32>) -> tensor<8x64x16xf32>
  %flat = lethe.node "aten.view.default" fwd (%x) {aliases = array<i64: 0>, args = [{in = 0 : i64}, [8, 2048]], name = "flat", time_us = 1.0 : f64} : (tensor<8x128x16xf32>) -> tensor<8x2048xf32>
  %n = lethe.node "aten.neg.default" fwd (%flat) {name = "n", time_us = 1.5 : f64, lethe.offsets = array<i64: 33280>} : (tensor<8x2048xf32>) -> tensor<8x2048xf32>
  return %m, %s, %n : tensor<8x16xf32>, tensor<8x64x16xf32>, tensor<8x2048xf32>
}
}

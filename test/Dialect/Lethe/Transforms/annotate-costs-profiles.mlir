// RUN: lethe-opt %s --lethe-annotate-costs='device=%S/Inputs/toy-profile.json' | FileCheck %s --check-prefix=TOY
// RUN: lethe-opt %s --lethe-annotate-costs='device=h100' | FileCheck %s --check-prefix=H100
// RUN: lethe-opt %s --lethe-annotate-costs='device=h200-pcie' | FileCheck %s --check-prefix=PCIE
// RUN: lethe-opt %s --lethe-annotate-costs='device=%S/Inputs/toy-collective-fixed.json' | FileCheck %s --check-prefix=FIXED

// A user's profile (Inputs/toy-profile.json: bf16 100 TFLOP/s, f32 1,
// HBM 1 TB/s, launch 5 us, views free) and two built-in ones.

func.func @step(%a: tensor<1024x1024xbf16>, %b: tensor<1024x1024xf32>) {
  // 2*1024^3 = 2.147e9 FLOP; bf16: 21.475 us on the toy device (bytes
  // 6.3 MB = 6.291 us) + 5 = 26.475; h100 at 798.8 TFLOP/s: 2.688 us, but
  // 6.3 MB at 2.985 TB/s = 2.108 us, so 2.688 + 3.1 launch = 5.788 us.
  // TOY: lethe.node "aten.mm.default" {{.*}} time_us = 2.647500e+01 : f64
  // H100: lethe.node "aten.mm.default" {{.*}} time_us = 5.788000e+00 : f64
  %0 = lethe.node "aten.mm.default" fwd (%a, %a) : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  // The same in f32 runs at the f32 rate: 2147.484 us + 5 = 2152.484.
  // TOY: lethe.node "aten.mm.default" {{.*}} time_us = 2152.48{{[0-9]*}} : f64
  %1 = lethe.node "aten.mm.default" fwd (%b, %b) : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  // TOY: lethe.node "aten.t.default" {{.*}} time_us = 0.000000e+00 : f64
  %2 = lethe.node "aten.t.default" fwd (%0) {aliases = array<i64: 0>} : (tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  // An all-reduce over 4 ranks moves 2*(4-1)/4 of its 2 MiB buffer:
  // 3,145,728 B over the PCIe path at 25.2 GB/s = 124.830 us + 3.2.
  // PCIE: lethe.collective all_reduce {{.*}} time_us = 1.280160e+02 : f64
  // Without a peer link the toy device moves it at 10 GB/s: 314.573 us,
  // + 5 us launch; with a fixed cost per collective
  // (Inputs/toy-collective-fixed.json: collective_fixed_us 20, what
  // lethe-calibrate fits to the all-gather) that cost replaces the launch.
  // TOY: lethe.collective all_reduce {{.*}} time_us = 3.195730e+02 : f64
  // FIXED: lethe.collective all_reduce {{.*}} time_us = 3.345730e+02 : f64
  %3 = lethe.collective all_reduce %a group [0, 1, 2, 3] bwd : tensor<1024x1024xbf16> -> tensor<1024x1024xbf16>
  return
}

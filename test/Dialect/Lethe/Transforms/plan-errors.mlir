// RUN: lethe-opt %s --lethe-plan='budget=10% device=%S/Inputs/plan-device.json' -verify-diagnostics
// RUN: not lethe-opt %s --lethe-plan='policy=full budget=1MiB device=%S/Inputs/plan-device.json' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FULL
// RUN: not lethe-opt %s --lethe-plan='policy=greedy' 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not lethe-opt %s --lethe-plan='budget=lots' 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not lethe-opt %s --lethe-plan='device=h300' 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not lethe-opt %s --lethe-plan='solver=magic' 2>&1 | FileCheck %s --check-prefix=SOLVER
// RUN: lethe-opt %s --lethe-plan='budget=least device=%S/Inputs/plan-device.json' \
// RUN:   | FileCheck %s --check-prefix=LEAST
// RUN: lethe-opt %s --lethe-plan='policy=full budget=least device=%S/Inputs/plan-device.json' \
// RUN:   | FileCheck %s --check-prefix=LEAST

// A budget no plan can meet is an error that states the least budget the
// policy can meet, so the user knows what to ask for instead. For `auto`
// that is the least peak any plan it found reaches; for a fixed policy, its
// plan's peak. Bad options name the option and what was expected.
//
// Here the unplanned peak is 20 MiB, at the first backward node, where the
// four 4 MiB activations and the 4 MiB gradient are live. Layer 0's two
// activations can be dropped there, but they are needed by the very next
// node, where two gradients (8 MiB) and they (8 MiB) are live: no plan gets
// below 16 MiB.

// `budget=least` plans at that least instead (both policies: 16 MiB).
// LEAST: lethe.budget_bytes = 16777216 : i64

// FULL: error: lethe-plan: budget 1.00 MiB (1048576 B) is below the least budget policy full can meet on this graph: 16.00 MiB (16777216 B)
// POLICY: error: lethe-plan: unknown policy 'greedy' (expected one of none, full, every-n, selective-op, offload-all, auto)
// BUDGET: error: lethe-plan: invalid budget 'lots':
// DEVICE: error: lethe-plan: cannot load device profile: unknown device 'h300'
// SOLVER: error: lethe-plan: unknown solver 'magic' (expected auto, fast or exact)

!h = tensor<1024x1024xbf16>
!a = tensor<1024x2048xbf16>

// expected-error @below {{lethe-plan: budget 2.00 MiB (2097152 B) is below the least budget policy auto can meet on this graph: 16.00 MiB (16777216 B)}}
func.func @step(%x: !h, %w: tensor<1024x2048xbf16> {lethe.kind = "param"}, %seed: !a {lethe.kind = "tangent"}) -> !h {
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, tensor<1024x2048xbf16>) -> !a
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  %u1 = lethe.node "aten.mm.default" fwd (%x, %w) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, tensor<1024x2048xbf16>) -> !a
  %v1 = lethe.node "aten.gelu.default" fwd (%u1) {scope = "model.h.1", time_us = 10.0 : f64} : (!a) -> !a
  %b1 = lethe.node "aten.gelu_backward" bwd (%seed, %u1, %v1) {time_us = 20.0 : f64} : (!a, !a, !a) -> !a
  %b0 = lethe.node "aten.gelu_backward" bwd (%b1, %u0, %v0) {time_us = 20.0 : f64} : (!a, !a, !a) -> !a
  %dx = lethe.node "aten.mm_backward" bwd (%b0, %w) {time_us = 200.0 : f64} : (!a, tensor<1024x2048xbf16>) -> !h
  return %dx : !h
}

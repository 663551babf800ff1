!h = tensor<4096x256xbf16>
!a = tensor<4096x1024xbf16>
!w1 = tensor<256x1024xbf16>
!w2 = tensor<1024x256xbf16>

func.func @step(%x: !h,
                %w1_0: !w1 {lethe.kind = "param"},
                %w2_0: !w2 {lethe.kind = "param"},
                %w1_1: !w1 {lethe.kind = "param"},
                %w2_1: !w2 {lethe.kind = "param"},
                %seed: !h {lethe.kind = "tangent"})
    -> (!w1, !w2, !w1, !w2) {
  %u0 = lethe.node "aten.mm.default" fwd (%x, %w1_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!h, !w1) -> !a
  %v0 = lethe.node "aten.gelu.default" fwd (%u0) {scope = "model.h.0", time_us = 10.0 : f64} : (!a) -> !a
  %o0 = lethe.node "aten.mm.default" fwd (%v0, %w2_0) {scope = "model.h.0", time_us = 100.0 : f64} : (!a, !w2) -> !h
  %h1 = lethe.node "aten.add.Tensor" fwd (%x, %o0) {scope = "model.h.0", time_us = 5.0 : f64} : (!h, !h) -> !h
  %u1 = lethe.node "aten.mm.default" fwd (%h1, %w1_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!h, !w1) -> !a
  %v1 = lethe.node "aten.gelu.default" fwd (%u1) {scope = "model.h.1", time_us = 10.0 : f64} : (!a) -> !a
  %o1 = lethe.node "aten.mm.default" fwd (%v1, %w2_1) {scope = "model.h.1", time_us = 100.0 : f64} : (!a, !w2) -> !h
  %h2 = lethe.node "aten.add.Tensor" fwd (%h1, %o1) {scope = "model.h.1", time_us = 5.0 : f64} : (!h, !h) -> !h
  %d1:2 = lethe.node "aten.mm_backward" bwd (%seed, %v1, %w2_1) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %g1 = lethe.node "aten.gelu_backward" bwd (%d1#0, %u1) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e1:2 = lethe.node "aten.mm_backward" bwd (%g1, %h1, %w1_1) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %s1 = lethe.node "aten.add.Tensor" bwd (%seed, %e1#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  %d0:2 = lethe.node "aten.mm_backward" bwd (%s1, %v0, %w2_0) {time_us = 200.0 : f64} : (!h, !a, !w2) -> (!a, !w2)
  %g0 = lethe.node "aten.gelu_backward" bwd (%d0#0, %u0) {time_us = 20.0 : f64} : (!a, !a) -> !a
  %e0:2 = lethe.node "aten.mm_backward" bwd (%g0, %x, %w1_0) {time_us = 200.0 : f64} : (!a, !h, !w1) -> (!h, !w1)
  %s0 = lethe.node "aten.add.Tensor" bwd (%s1, %e0#0) {time_us = 5.0 : f64} : (!h, !h) -> !h
  return %e1#1, %d1#1, %e0#1, %d0#1 : !w1, !w2, !w1, !w2
}

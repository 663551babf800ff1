//===- LetheAttrs.td - Lethe attributes --------------------*- tablegen -*-===//

#ifndef LETHE_DIALECT_LETHE_IR_LETHEATTRS_TD
#define LETHE_DIALECT_LETHE_IR_LETHEATTRS_TD

include "lethe/Dialect/Lethe/IR/LetheDialect.td"
include "mlir/IR/EnumAttr.td"

def Lethe_Decision : I32EnumAttr<"Decision",
    "what happens to an activation between its forward and backward uses", [
      I32EnumAttrCase<"Retain", 0, "retain">,
      I32EnumAttrCase<"Recompute", 1, "recompute">,
      I32EnumAttrCase<"Offload", 2, "offload">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_DecisionAttr : EnumAttr<Lethe_Dialect, Lethe_Decision, "decision">;

def Lethe_Phase : I32EnumAttr<"Phase", "part of the training step", [
      I32EnumAttrCase<"Fwd", 0, "fwd">,
      I32EnumAttrCase<"Bwd", 1, "bwd">,
      I32EnumAttrCase<"Opt", 2, "opt">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_PhaseAttr : EnumAttr<Lethe_Dialect, Lethe_Phase, "phase">;

def Lethe_Stream : I32EnumAttr<"Stream", "execution stream of an op", [
      I32EnumAttrCase<"Compute", 0, "compute">,
      I32EnumAttrCase<"D2H", 1, "d2h">,
      I32EnumAttrCase<"H2D", 2, "h2d">,
      I32EnumAttrCase<"Comm", 3, "comm">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_StreamAttr : EnumAttr<Lethe_Dialect, Lethe_Stream, "stream">;

def Lethe_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "collective communication operation", [
      I32EnumAttrCase<"AllGather", 0, "all_gather">,
      I32EnumAttrCase<"ReduceScatter", 1, "reduce_scatter">,
      I32EnumAttrCase<"AllReduce", 2, "all_reduce">,
      I32EnumAttrCase<"AllToAll", 3, "all_to_all">,
      I32EnumAttrCase<"Send", 4, "send">,
      I32EnumAttrCase<"Recv", 5, "recv">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::lethe";
}
def Lethe_CollectiveKindAttr
    : EnumAttr<Lethe_Dialect, Lethe_CollectiveKind, "collective">;

#endif // LETHE_DIALECT_LETHE_IR_LETHEATTRS_TD

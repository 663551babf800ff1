//===- TrainingGraphTest.cpp ----------------------------------------------===//

#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>

using namespace mlir;
using namespace lethe;

namespace {

/// The TrainingGraph of the first function of `source` (nullopt where it
/// does not parse or build); `module` keeps the IR it refers to.
std::optional<TrainingGraph> graphOf(const char *source, MLIRContext &context,
                                     OwningOpRef<ModuleOp> &module) {
  module = parseSourceString<ModuleOp>(source, &context);
  if (!module)
    return std::nullopt;
  FailureOr<TrainingGraph> graph =
      TrainingGraph::fromFunction(*module->getOps<func::FuncOp>().begin());
  if (failed(graph))
    return std::nullopt;
  return std::move(*graph);
}

TEST(TrainingGraphTest, BuilderTracksUsersAliasesAndOutputs) {
  TrainingGraph g;
  ValueId w = g.addInput(64, InputKind::Param);
  ValueId x = g.addInput(32, InputKind::Input);
  NodeId mm = g.addNode("aten.mm.default", Phase::Fwd, 10.0, {x, w}, {128});
  ValueId y = g.getNode(mm).results[0];
  NodeId view = g.addNode("aten.view.default", Phase::Fwd, 1.0, {y}, {128},
                          {0});
  ValueId v = g.getNode(view).results[0];
  NodeId back = g.addNode("aten.mm.default", Phase::Bwd, 10.0, {v, v, w}, {64});
  g.addOutput(g.getNode(back).results[0]);

  EXPECT_EQ(g.getValue(y).bytes, 128);
  EXPECT_TRUE(g.isAlias(v));
  EXPECT_EQ(g.getValue(v).bytes, 0);
  EXPECT_EQ(g.getValue(v).storage, y);
  EXPECT_EQ(g.storageBytes(v), 128);
  // A node reading a value twice is listed once among its users.
  ASSERT_EQ(g.getValue(v).users.size(), 1u);
  EXPECT_EQ(g.getValue(w).users, (std::vector<NodeId>{mm, back}));
  EXPECT_EQ(g.firstBackwardNode(), back);
  EXPECT_TRUE(g.getValue(g.getNode(back).results[0]).isOutput);
}

TEST(TrainingGraphTest, AlignStorageBytesRoundsWhatTheArenaHolds) {
  TrainingGraph g;
  ValueId x = g.addInput(1000, InputKind::Input);
  NodeId relu = g.addNode("aten.relu.default", Phase::Fwd, 1.0, {x}, {1000});
  ValueId y = g.getNode(relu).results[0];
  NodeId view =
      g.addNode("aten.view.default", Phase::Fwd, 1.0, {y}, {1000}, {0});
  ValueId v = g.getNode(view).results[0];
  NodeId back =
      g.addNode("aten.mul.Tensor", Phase::Bwd, 1.0, {v, x}, {1024, 0});
  ValueId grad = g.getNode(back).results[0];
  ValueId empty = g.getNode(back).results[1];
  g.alignStorageBytes(256);
  // Graph inputs are outside the arena.
  EXPECT_EQ(g.getValue(x).bytes, 1000);
  EXPECT_EQ(g.getValue(y).bytes, 1024);
  EXPECT_EQ(g.storageBytes(v), 1024);
  EXPECT_EQ(g.getValue(v).bytes, 0);
  EXPECT_EQ(g.getValue(grad).bytes, 1024);
  EXPECT_EQ(g.getValue(empty).bytes, 0);
}

TEST(TrainingGraphTest, ClassifiesKinds) {
  EXPECT_TRUE(TrainingGraph::classifyKind("aten.native_dropout.default") &
              NodeFlagRandom);
  EXPECT_FALSE(TrainingGraph::classifyKind(
                   "aten.native_dropout_backward.default") &
               NodeFlagRandom);
  EXPECT_TRUE(TrainingGraph::classifyKind("stablehlo.rng_bit_generator") &
              NodeFlagRandom);
  // Inductor draws a step's seeds once; looking one up re-runs exactly.
  EXPECT_TRUE(TrainingGraph::classifyKind("prims.inductor_seeds.default") &
              NodeFlagRandom);
  EXPECT_FALSE(TrainingGraph::classifyKind(
                   "prims.inductor_lookup_seed.default") &
               NodeFlagRandom);
  EXPECT_TRUE(TrainingGraph::classifyKind(
                  "_c10d_functional.all_gather_into_tensor.default") &
              NodeFlagCollective);
  EXPECT_TRUE(TrainingGraph::classifyKind("aten.add_.Tensor") &
              NodeFlagMutates);
  EXPECT_EQ(TrainingGraph::classifyKind("aten.mm.default"), 0u);
  EXPECT_EQ(TrainingGraph::classifyKind("aten.transpose.int"), 0u);
}

/// classifyKind remembers the kinds it has seen: the same answer the
/// second time, from a string of other storage, and after so many other
/// kinds that the memo started over.
TEST(TrainingGraphTest, ClassifiesKindsTheSameWhenRemembered) {
  const char *kinds[] = {"aten.native_dropout.default",
                         "aten.native_dropout_backward.default",
                         "c10d.allreduce_", "aten.add_.Tensor",
                         "aten.mm.default"};
  std::vector<uint32_t> first;
  for (const char *kind : kinds)
    first.push_back(TrainingGraph::classifyKind(kind));
  EXPECT_EQ(first[0], static_cast<uint32_t>(NodeFlagRandom));
  EXPECT_EQ(first[4], 0u);
  for (int i = 0; i < 10000; ++i)
    (void)TrainingGraph::classifyKind("custom.op_" + std::to_string(i));
  for (auto [kind, flags] : llvm::zip_equal(kinds, first)) {
    std::string copy(kind);
    EXPECT_EQ(TrainingGraph::classifyKind(copy), flags) << kind;
  }
}

TEST(TrainingGraphTest, FromFunction) {
  MLIRContext context;
  context.loadDialect<LetheDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @step(%w: tensor<4x4xbf16> {lethe.kind = "param"},
                    %x: tensor<2x4xbf16>, %seed: tensor<f32> {lethe.kind = "tangent"})
        -> tensor<4x4xbf16> {
      %0 = lethe.node "aten.mm.default" fwd (%x, %w) {time_us = 3.0 : f64}
          : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
      %1 = lethe.node "aten.t.default" fwd (%0) {aliases = array<i64: 0>}
          : (tensor<2x4xbf16>) -> tensor<4x2xbf16>
      %2 = lethe.node "aten.mm.default" bwd (%1, %x)
          : (tensor<4x2xbf16>, tensor<2x4xbf16>) -> tensor<4x4xbf16>
      return %2 : tensor<4x4xbf16>
    })mlir";
  OwningOpRef<ModuleOp> module;
  std::optional<TrainingGraph> graph = graphOf(source, context, module);
  ASSERT_TRUE(graph);
  EXPECT_EQ(graph->numNodes(), 3u);
  EXPECT_EQ(graph->numValues(), 6u);
  EXPECT_EQ(graph->getValue(0).inputKind, InputKind::Param);
  EXPECT_EQ(graph->getValue(1).inputKind, InputKind::Input);
  EXPECT_EQ(graph->getValue(2).inputKind, InputKind::Tangent);
  EXPECT_EQ(graph->getValue(0).bytes, 32);
  EXPECT_DOUBLE_EQ(graph->getNode(0).timeUs, 3.0);
  EXPECT_TRUE(graph->isAlias(graph->getNode(1).results[0]));
  EXPECT_EQ(graph->firstBackwardNode(), 2);
  ASSERT_EQ(graph->getOutputs().size(), 1u);
}

// Node ids in any order, extremes included: every node is found by its id,
// and no id that no node has.
TEST(TrainingGraphTest, FindsNodesByIdsInAnyOrder) {
  MLIRContext context;
  context.loadDialect<LetheDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.node_id = 9}
          : (tensor<4xf32>) -> tensor<4xf32>
      %1 = lethe.node "aten.neg.default" fwd (%0) {lethe.node_id = 4}
          : (tensor<4xf32>) -> tensor<4xf32>
      %2 = lethe.node "aten.relu.default" fwd (%1)
          {lethe.node_id = 9223372036854775807}
          : (tensor<4xf32>) -> tensor<4xf32>
      %3 = lethe.node "aten.neg.default" fwd (%2)
          {lethe.node_id = -9223372036854775808}
          : (tensor<4xf32>) -> tensor<4xf32>
      %4 = lethe.node "aten.relu.default" bwd (%3) {lethe.node_id = 6}
          : (tensor<4xf32>) -> tensor<4xf32>
      return %4 : tensor<4xf32>
    })mlir";
  OwningOpRef<ModuleOp> module;
  std::optional<TrainingGraph> graph = graphOf(source, context, module);
  ASSERT_TRUE(graph);
  const int64_t ids[] = {9, 4, std::numeric_limits<int64_t>::max(),
                         std::numeric_limits<int64_t>::min(), 6};
  for (auto [node, id] : llvm::enumerate(ids)) {
    EXPECT_EQ(graph->findNodeBySourceId(id), static_cast<NodeId>(node));
    EXPECT_EQ(graph->getNode(node).sourceId, id);
  }
  for (int64_t absent : {0, 5, 7, 10})
    EXPECT_EQ(graph->findNodeBySourceId(absent), std::nullopt);
}

} // namespace

namespace {
TEST(TrainingGraphTest, AttentionWithDropoutIsRandom) {
  MLIRContext context;
  context.loadDialect<LetheDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @step(%q: tensor<2x4xbf16>) {
      %0:2 = lethe.node "aten._scaled_dot_product_cudnn_attention.default" fwd (%q, %q, %q)
          {args = [{in = 0 : i64}, {in = 1 : i64}, {in = 2 : i64}, true, 1.000000e-01]}
          : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2xf32>)
      %1:2 = lethe.node "aten._scaled_dot_product_cudnn_attention.default" fwd (%q, %q, %q)
          {args = [{in = 0 : i64}, {in = 1 : i64}, {in = 2 : i64}, true, 0.000000e+00]}
          : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2xf32>)
      %2:2 = lethe.node "aten._scaled_dot_product_flash_attention.default" fwd (%q, %q, %q)
          {lethe.attrs = {dropout_p = 2.000000e-01 : f64}}
          : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2xf32>)
      return
    })mlir";
  OwningOpRef<ModuleOp> module;
  std::optional<TrainingGraph> graph = graphOf(source, context, module);
  ASSERT_TRUE(graph);
  EXPECT_TRUE(graph->getNode(0).hasFlag(NodeFlagRandom));
  EXPECT_FALSE(graph->getNode(1).hasFlag(NodeFlagRandom));
  EXPECT_TRUE(graph->getNode(2).hasFlag(NodeFlagRandom));
}
} // namespace

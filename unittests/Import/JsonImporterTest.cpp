//===- JsonImporterTest.cpp -----------------------------------------------===//
//
// The JSON importer's output must be what TrainingGraph::fromFunction reads:
// imports the two bundled graphs and checks the graph against the counts
// graphs/SCHEMA.md states.
//
//===----------------------------------------------------------------------===//

#include "lethe/Import/JsonImporter.h"
#include "lethe/Analysis/TrainingGraph.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"
#include "lethe/Import/ImportCommon.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace lethe;

namespace {

struct SharedGraph {
  const char *file;
  size_t inputs, fwdOps, bwdOps, saved;
};

class SharedGraphTest : public ::testing::TestWithParam<SharedGraph> {};

TEST_P(SharedGraphTest, RoundTripsThroughTrainingGraph) {
  const SharedGraph &expected = GetParam();
  std::string path = std::string(LETHE_GRAPHS_DIR) + "/" + expected.file;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(buffer) << "cannot read " << path;

  MLIRContext context;
  OwningOpRef<ModuleOp> module =
      importGraphJson((*buffer)->getBuffer(), path, &context);
  ASSERT_TRUE(module);
  auto func = *module->getOps<func::FuncOp>().begin();
  EXPECT_EQ(func.getSymName(), "step");
  FailureOr<TrainingGraph> graph = TrainingGraph::fromFunction(func);
  ASSERT_TRUE(succeeded(graph));

  // SCHEMA.md: nodes = placeholders + fwd ops + bwd ops + 2 output nodes.
  EXPECT_EQ(graph->numNodes(), expected.fwdOps + expected.bwdOps);
  size_t fwd = 0, bwd = 0;
  double timeUs = 0;
  for (const GraphNode &node : graph->getNodes()) {
    (node.phase == Phase::Fwd ? fwd : bwd)++;
    timeUs += node.timeUs;
    EXPECT_FALSE(node.kind.empty());
  }
  EXPECT_EQ(fwd, expected.fwdOps);
  EXPECT_EQ(bwd, expected.bwdOps);
  EXPECT_EQ(graph->firstBackwardNode(), static_cast<NodeId>(expected.fwdOps));

  size_t inputs = 0, tangents = 0;
  for (const GraphValue &value : graph->getValues())
    if (value.isInput()) {
      ++inputs;
      tangents += value.inputKind == InputKind::Tangent;
    }
  EXPECT_EQ(inputs, expected.inputs);
  EXPECT_EQ(tangents, 1u);
  EXPECT_FALSE(graph->getOutputs().empty());

  // Views own no bytes; everything else owns what its type says.
  for (const GraphNode &node : graph->getNodes()) {
    auto op = cast<NodeOp>(node.irOp);
    for (auto [index, valueId] : llvm::enumerate(node.results)) {
      const GraphValue &value = graph->getValue(valueId);
      if (op.getAliasedOperand(index) >= 0)
        EXPECT_EQ(value.bytes, 0);
      else
        EXPECT_EQ(value.bytes, getTypeBytes(value.irValue.getType()));
    }
  }

  // The per-op times add up to the totals the exporter measured.
  auto totals = LetheDialect::TotalsAttrHelper(&context).getAttr(*module);
  ASSERT_TRUE(totals);
  double sumMs = cast<FloatAttr>(totals.getNumbers().get("fwd_ms_sum_ops"))
                     .getValueAsDouble() +
                 cast<FloatAttr>(totals.getNumbers().get("bwd_ms_sum_ops"))
                     .getValueAsDouble();
  EXPECT_NEAR(timeUs, sumMs * 1000.0, 1e-6 * sumMs * 1000.0);

  // Every saved value is marked, once.
  size_t saved = 0;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    saved += func.getArgAttr(i, LetheDialect::SavedAttrHelper::getNameStr()) !=
             nullptr;
  func.walk([&](Operation *op) {
    if (auto indices = dyn_cast_or_null<DenseI64ArrayAttr>(
            LetheDialect::SavedAttrHelper(op->getContext()).getAttr(op)))
      saved += indices.size();
  });
  EXPECT_EQ(saved, expected.saved);
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, SharedGraphTest,
    ::testing::Values(SharedGraph{"graph_gpt2.json", 151, 544, 752, 398},
                      SharedGraph{"graph_resnet50.json", 323, 339, 285, 429}));

TEST(JsonImporterTest, ReportsErrorsWithNodeAndPosition) {
  MLIRContext context;
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(message);
    os << diag.getLocation() << ": " << diag;
    return success();
  });
  const char *json = R"({"nodes": [
    {"id": 0, "name": "x", "kind": "input", "inputs": [], "outputs": [{"shape": [2], "dtype": "float32"}]},
    {"id": 1, "name": "y", "op": "aten.relu.default", "kind": "op", "inputs": [[0, 0], [3, 0]], "outputs": []}
  ]})";
  EXPECT_FALSE(importGraphJson(json, "g.json", &context));
  EXPECT_EQ(message, "loc(\"y\"(\"g.json\":3:5)): node 1 'y': input 1 refers "
                     "to node 3, which does not exist");
}

TEST(JsonImporterTest, InfersPhaseFromTheGradientSeed) {
  MLIRContext context;
  const char *json = R"({"nodes": [
    {"id": 0, "kind": "input", "inputs": [], "outputs": [{"shape": [2], "dtype": "float32"}]},
    {"id": 1, "kind": "tangent", "inputs": [], "outputs": [{"shape": [2], "dtype": "float32"}]},
    {"id": 2, "op": "a", "kind": "op", "inputs": [[0, 0]], "outputs": [{"shape": [2], "dtype": "float32"}]},
    {"id": 3, "op": "b", "kind": "op", "inputs": [[2, 0], [1, 0]], "outputs": [{"shape": [2], "dtype": "float32"}]},
    {"id": 4, "op": "c", "kind": "op", "inputs": [[3, 0]], "outputs": [{"shape": [2], "dtype": "float32"}]},
    {"id": 5, "kind": "output", "inputs": [[4, 0]]}
  ]})";
  OwningOpRef<ModuleOp> module = importGraphJson(json, "g.json", &context);
  ASSERT_TRUE(module);
  FailureOr<TrainingGraph> graph =
      TrainingGraph::fromFunction(*module->getOps<func::FuncOp>().begin());
  ASSERT_TRUE(succeeded(graph));
  ASSERT_EQ(graph->numNodes(), 3u);
  EXPECT_EQ(graph->getNode(0).phase, Phase::Fwd);
  EXPECT_EQ(graph->getNode(1).phase, Phase::Bwd);
  EXPECT_EQ(graph->getNode(2).phase, Phase::Bwd);
}

} // namespace

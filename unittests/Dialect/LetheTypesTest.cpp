//===- LetheTypesTest.cpp - lethe types and ops from C++ ------------------===//

#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace lethe;

namespace {

class LetheIRTest : public ::testing::Test {
protected:
  LetheIRTest() {
    context.loadDialect<LetheDialect, func::FuncDialect>();
  }
  MLIRContext context;
};

TEST_F(LetheIRTest, TypeBytes) {
  Builder b(&context);
  EXPECT_EQ(getTypeBytes(RankedTensorType::get({8, 1024}, b.getBF16Type())),
            8 * 1024 * 2);
  EXPECT_EQ(getTypeBytes(RankedTensorType::get({3, 5}, b.getI1Type())), 15);
  EXPECT_EQ(getTypeBytes(RankedTensorType::get({}, b.getF32Type())), 4);
  EXPECT_EQ(getTypeBytes(RankedTensorType::get({2}, b.getIndexType())), 16);
  EXPECT_EQ(getTypeBytes(b.getI64Type()), 0);
  EXPECT_EQ(getTypeBytes(b.getNoneType()), 0);
  EXPECT_EQ(getTypeBytes(RankedTensorType::get({ShapedType::kDynamic},
                                               b.getF32Type())),
            -1);
  auto host = HostTensorType::get(RankedTensorType::get({4}, b.getF64Type()));
  EXPECT_EQ(getTypeBytes(host), 32);
}

TEST_F(LetheIRTest, BuildOffloadPrefetchChain) {
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  auto module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module.getBody());
  auto tensor = RankedTensorType::get({16}, b.getF32Type());
  auto func = func::FuncOp::create(b, loc, "f",
                                   b.getFunctionType({tensor}, {tensor}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  Value x = entry->getArgument(0);
  auto offload = OffloadOp::create(b, loc, HostTensorType::get(tensor),
                                   TimepointType::get(&context), x, Value());
  ReleaseOp::create(b, loc, x, offload.getDone());
  auto prefetch =
      PrefetchOp::create(b, loc, tensor, TimepointType::get(&context),
                         offload.getResult(), Value());
  auto await = AwaitOp::create(b, loc, ValueRange{prefetch.getDone()},
                               ValueRange{prefetch.getResult()});
  func::ReturnOp::create(b, loc, await.getResults());
  EXPECT_TRUE(succeeded(verify(module)));
  EXPECT_EQ(await.getResult(0).getType(), tensor);
  module->erase();
}

TEST_F(LetheIRTest, VerifierRejectsMismatchedPrefetch) {
  const char *source = R"mlir(
    func.func @f(%h: !lethe.host<tensor<4xf32>>) {
      %0, %1 = lethe.prefetch %h : !lethe.host<tensor<4xf32>> -> tensor<8xf32>
      return
    })mlir";
  context.getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  EXPECT_FALSE(module);
}

TEST_F(LetheIRTest, NodeAliases) {
  const char *source = R"mlir(
    func.func @f(%x: tensor<4xf32>) {
      %0:2 = lethe.node "aten.split.Tensor" fwd (%x) {aliases = array<i64: 0, -1>}
          : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>)
      return
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  NodeOp node;
  module->walk([&](NodeOp op) { node = op; });
  ASSERT_TRUE(node);
  EXPECT_EQ(node.getAliasedOperand(0), 0);
  EXPECT_EQ(node.getAliasedOperand(1), -1);
  EXPECT_EQ(node.getAliasedOperand(7), -1);
  EXPECT_EQ(node.getPhase(), Phase::Fwd);
}

} // namespace

//===- GenericOpsTest.cpp -------------------------------------------------===//
//
// The classification tables and type conversion behind lethe-import-ops and
// the JSON importer.
//
//===----------------------------------------------------------------------===//

#include "lethe/Import/GenericOps.h"
#include "lethe/Import/ImportCommon.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace lethe;

namespace {

class GenericOpsTest : public ::testing::Test {
protected:
  GenericOpsTest() { context.allowUnregisteredDialects(); }

  /// The canonical type of `source` printed, or "error: <reason>".
  std::string convert(StringRef source) {
    Type type = parseType(source, &context);
    if (!type)
      return "unparsable";
    std::string reason;
    Type converted = convertImportedType(type, reason);
    if (!converted)
      return "error: " + reason;
    std::string text;
    llvm::raw_string_ostream os(text);
    converted.print(os);
    return text;
  }

  MLIRContext context;
};

TEST_F(GenericOpsTest, ConvertsTorchTypes) {
  EXPECT_EQ(convert("!torch.vtensor<[2,3],f32>"), "tensor<2x3xf32>");
  EXPECT_EQ(convert("!torch.vtensor<[8],si64>"), "tensor<8xi64>");
  EXPECT_EQ(convert("!torch.vtensor<[8],ui8>"), "tensor<8xui8>");
  EXPECT_EQ(convert("!torch.vtensor<[4],i1>"), "tensor<4xi1>");
  EXPECT_EQ(convert("!torch.vtensor<[],bf16>"), "tensor<bf16>");
  EXPECT_EQ(convert("!torch.vtensor<[2],complex<f32>>"),
            "tensor<2xcomplex<f32>>");
  EXPECT_EQ(convert("!torch.int"), "i64");
  EXPECT_EQ(convert("!torch.float"), "f64");
  EXPECT_EQ(convert("!torch.bool"), "i1");
  EXPECT_EQ(convert("!torch.none"), "none");
  EXPECT_EQ(convert("!torch.list<int>"), "none");
  EXPECT_EQ(convert("!torch.vtensor<[?,3],f32>"), "error: a dynamic shape");
  EXPECT_EQ(convert("!torch.vtensor<*,f32>"),
            "error: an unranked torch tensor");
  EXPECT_EQ(convert("!torch.vtensor<[3],qint8>"),
            "error: unknown element type 'qint8'");
  EXPECT_EQ(convert("!torch.list<vtensor<[2],f32>>"),
            "error: a list of tensors (export the tensors as separate values)");
}

TEST_F(GenericOpsTest, ConvertsBuiltinTypes) {
  EXPECT_EQ(convert("tensor<2x3xbf16>"), "tensor<2x3xbf16>");
  EXPECT_EQ(convert("f32"), "f32");
  EXPECT_EQ(convert("tensor<?x3xf32>"), "error: a dynamic shape");
  EXPECT_EQ(convert("tensor<*xf32>"), "error: an unranked tensor");
  EXPECT_EQ(convert("memref<4xf32>"),
            "error: a memref (import tensor-level IR, before bufferization)");
  EXPECT_EQ(convert("!stablehlo.token"), "error: an unsupported type");
}

TEST(ImportTablesTest, ClassifiesAtenKinds) {
  for (const char *view :
       {"aten.view.default", "aten.transpose.int", "aten.split.Tensor",
        "aten._unsafe_view.default", "aten.t", "aten.slice.Tensor"})
    EXPECT_TRUE(isAtenViewKind(view)) << view;
  for (const char *notView :
       {"aten.mm.default", "aten.reshape.default", "aten.clone.default", "view",
        "stablehlo.reshape"})
    EXPECT_FALSE(isAtenViewKind(notView)) << notView;
  EXPECT_TRUE(isAtenInPlaceKind("aten.add_.Tensor"));
  EXPECT_TRUE(isAtenInPlaceKind("aten.copy_.default"));
  EXPECT_FALSE(isAtenInPlaceKind("aten.add.Tensor"));
  EXPECT_FALSE(isAtenInPlaceKind("aten.__and__.Tensor"));
}

TEST(ImportTablesTest, StripsDynamoScopes) {
  EXPECT_EQ(stripDynamoScope("L['model'].transformer.h.0"), "transformer.h.0");
  EXPECT_EQ(stripDynamoScope("L['self'].fc"), "fc");
  EXPECT_EQ(stripDynamoScope("L['model']"), "");
  EXPECT_EQ(stripDynamoScope("encoder.layer.1"), "encoder.layer.1");
  EXPECT_EQ(stripDynamoScope("L['x"), "L['x");
}

TEST(ImportTablesTest, RecognisesCollectives) {
  MLIRContext context;
  Builder b(&context);
  EXPECT_EQ(
      getCollectiveKind("_c10d_functional.all_gather_into_tensor.default"),
      CollectiveKind::AllGather);
  EXPECT_EQ(getCollectiveKind("stablehlo.reduce_scatter"),
            CollectiveKind::ReduceScatter);
  EXPECT_EQ(getCollectiveKind("stablehlo.all_reduce"),
            CollectiveKind::AllReduce);
  EXPECT_EQ(getCollectiveKind("_c10d_functional.wait_tensor.default"),
            std::nullopt);
  ArrayAttr gather = b.getArrayAttr(
      {b.getUnitAttr(), b.getI64IntegerAttr(4), b.getStringAttr("0")});
  EXPECT_EQ(getC10dGroupSize(CollectiveKind::AllGather, gather), 4);
  EXPECT_EQ(getC10dGroupSize(CollectiveKind::AllReduce, gather), std::nullopt);
  ArrayAttr huge =
      b.getArrayAttr({b.getUnitAttr(), b.getI64IntegerAttr(1 << 30)});
  EXPECT_EQ(getC10dGroupSize(CollectiveKind::AllGather, huge), std::nullopt);
}

} // namespace

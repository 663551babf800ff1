//===- CostModelTest.cpp --------------------------------------------------===//
//
// FLOP formulas by op kind, checked against counts worked by hand, and the
// choice of model (analytic, bandwidth, view, measured).
//
//===----------------------------------------------------------------------===//

#include "lethe/Analysis/CostModel.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace lethe;

namespace {

class CostModelTest : public ::testing::Test {
protected:
  CostModelTest() {
    context.loadDialect<LetheDialect, func::FuncDialect>();
    // StableHLO dimension numbers arrive as attributes of an unregistered
    // dialect.
    context.allowUnregisteredDialects();
  }

  /// Parses `body` (ops using the arguments %a, %b, %c, %d) inside a
  /// function and returns its first lethe.node.
  NodeOp parseNode(llvm::StringRef args, llvm::StringRef body) {
    std::string text = ("func.func @f(" + args + ") {\n" + body +
                        "\n  return\n}\n")
                           .str();
    module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text;
    if (!module)
      return {};
    NodeOp found;
    module->walk([&](NodeOp node) {
      if (!found)
        found = node;
    });
    return found;
  }

  double flops(llvm::StringRef args, llvm::StringRef body) {
    NodeOp node = parseNode(args, body);
    if (!node)
      return -1;
    std::optional<ComputeWork> work = CostModel::computeWork(node);
    return work ? work->flops : -1;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

DeviceProfile roundProfile() {
  DeviceProfile profile;
  profile.name = "round";
  profile.peakFlops["f32"] = 1e12;
  profile.peakFlops["bf16"] = 100e12;
  profile.hbmBytesPerSec = 1e12;
  profile.d2hBytesPerSec = profile.h2dBytesPerSec = 10e9;
  profile.nvlinkBytesPerSec = 100e9;
  profile.launchOverheadUs = 2;
  profile.viewUs = 1;
  return profile;
}

TEST_F(CostModelTest, AtenMatmuls) {
  EXPECT_EQ(flops("%a: tensor<64x128xbf16>, %b: tensor<128x32xbf16>",
                  "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                  "(tensor<64x128xbf16>, tensor<128x32xbf16>) -> "
                  "tensor<64x32xbf16>"),
            2.0 * 64 * 128 * 32);
  EXPECT_EQ(flops("%a: tensor<4x64x128xbf16>, %b: tensor<4x128x32xbf16>",
                  "%0 = lethe.node \"aten.bmm.default\" fwd (%a, %b) : "
                  "(tensor<4x64x128xbf16>, tensor<4x128x32xbf16>) -> "
                  "tensor<4x64x32xbf16>"),
            2.0 * 4 * 64 * 128 * 32);
  // addmm(bias, A, B): the matrices are operands 1 and 2.
  EXPECT_EQ(flops("%c: tensor<32xbf16>, %a: tensor<64x128xbf16>, "
                  "%b: tensor<128x32xbf16>",
                  "%0 = lethe.node \"aten.addmm.default\" fwd (%c, %a, %b) : "
                  "(tensor<32xbf16>, tensor<64x128xbf16>, "
                  "tensor<128x32xbf16>) -> tensor<64x32xbf16>"),
            2.0 * 64 * 128 * 32);
  // linear(x [8,16,128], W [32,128]): 8*16 rows.
  EXPECT_EQ(flops("%a: tensor<8x16x128xbf16>, %b: tensor<32x128xbf16>",
                  "%0 = lethe.node \"aten.linear.default\" fwd (%a, %b) : "
                  "(tensor<8x16x128xbf16>, tensor<32x128xbf16>) -> "
                  "tensor<8x16x32xbf16>"),
            2.0 * 8 * 16 * 128 * 32);
  // matmul broadcasting a matrix against a batch.
  EXPECT_EQ(flops("%a: tensor<64x128xbf16>, %b: tensor<5x128x32xbf16>",
                  "%0 = lethe.node \"aten.matmul.default\" fwd (%a, %b) : "
                  "(tensor<64x128xbf16>, tensor<5x128x32xbf16>) -> "
                  "tensor<5x64x32xbf16>"),
            2.0 * 5 * 64 * 128 * 32);
  // addbmm sums over the batch: out has no batch dimension.
  EXPECT_EQ(flops("%c: tensor<64x32xf32>, %a: tensor<4x64x128xf32>, "
                  "%b: tensor<4x128x32xf32>",
                  "%0 = lethe.node \"aten.addbmm.default\" fwd (%c, %a, %b) "
                  ": (tensor<64x32xf32>, tensor<4x64x128xf32>, "
                  "tensor<4x128x32xf32>) -> tensor<64x32xf32>"),
            2.0 * 4 * 64 * 128 * 32);
}

TEST_F(CostModelTest, AtenConvolutions) {
  const char *args = "%a: tensor<2x16x32x32xbf16>, %b: tensor<8x4x3x3xbf16>";
  // Grouped (groups = 4): each output reads 4 channels x 3x3.
  EXPECT_EQ(flops(args, "%0 = lethe.node \"aten.convolution.default\" fwd "
                        "(%a, %b) {args = [{in = 0}, {in = 1}, unit, [1, 1], "
                        "[1, 1], [1, 1], false, [0, 0], 4]} : "
                        "(tensor<2x16x32x32xbf16>, tensor<8x4x3x3xbf16>) -> "
                        "tensor<2x8x32x32xbf16>"),
            2.0 * (2 * 8 * 32 * 32) * 4 * 9);
  // Transposed: weight [Cin=16, Cout/g=4, 2, 2], stride 2: every input
  // element meets 4*2*2 weights.
  EXPECT_EQ(flops("%a: tensor<2x16x8x8xbf16>, %b: tensor<16x4x2x2xbf16>",
                  "%0 = lethe.node \"aten.convolution.default\" fwd (%a, %b) "
                  "{args = [{in = 0}, {in = 1}, unit, [2, 2], [0, 0], [1, 1], "
                  "true, [0, 0], 1]} : (tensor<2x16x8x8xbf16>, "
                  "tensor<16x4x2x2xbf16>) -> tensor<2x4x16x16xbf16>"),
            2.0 * (2 * 16 * 8 * 8) * 4 * 2 * 2);
  double forward = 2.0 * (2 * 8 * 32 * 32) * 16 * 9;
  const char *backwardArgs = "%g: tensor<2x8x32x32xbf16>, "
                             "%a: tensor<2x16x32x32xbf16>, "
                             "%b: tensor<8x16x3x3xbf16>";
  // Both gradients: two forward convolutions' worth.
  EXPECT_EQ(flops(backwardArgs,
                  "%0:3 = lethe.node \"aten.convolution_backward.default\" "
                  "bwd (%g, %a, %b) : (tensor<2x8x32x32xbf16>, "
                  "tensor<2x16x32x32xbf16>, tensor<8x16x3x3xbf16>) -> "
                  "(tensor<2x16x32x32xbf16>, tensor<8x16x3x3xbf16>, "
                  "tensor<8xbf16>)"),
            2 * forward);
  // The first layer needs no input gradient: result 0 is none.
  EXPECT_EQ(flops(backwardArgs,
                  "%0:3 = lethe.node \"aten.convolution_backward.default\" "
                  "bwd (%g, %a, %b) : (tensor<2x8x32x32xbf16>, "
                  "tensor<2x16x32x32xbf16>, tensor<8x16x3x3xbf16>) -> "
                  "(none, tensor<8x16x3x3xbf16>, none)"),
            forward);
  // Neither: nothing to compute but the bias reduction (bandwidth).
  EXPECT_EQ(flops(backwardArgs,
                  "%0:3 = lethe.node \"aten.convolution_backward.default\" "
                  "bwd (%g, %a, %b) : (tensor<2x8x32x32xbf16>, "
                  "tensor<2x16x32x32xbf16>, tensor<8x16x3x3xbf16>) -> "
                  "(none, none, tensor<8xbf16>)"),
            -1);
}

TEST_F(CostModelTest, AtenAttention) {
  // B=2, H=4, Lq=Lk=128, D=64: 4*B*H*L*L*D.
  double full = 4.0 * 2 * 4 * 128 * 128 * 64;
  const char *qkv = "%q: tensor<2x4x128x64xbf16>";
  const char *types = "(tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>, "
                      "tensor<2x4x128x64xbf16>";
  auto cudnn = [&](const char *causal) {
    return flops(qkv, std::string("%0:2 = lethe.node "
                                  "\"aten._scaled_dot_product_cudnn_attention."
                                  "default\" fwd (%q, %q, %q) {args = [{in = "
                                  "0}, {in = 1}, {in = 2}, unit, true, 0.1, ") +
                          causal + "]} : " + types +
                          ") -> (tensor<2x4x128x64xbf16>, tensor<2x4x128xf32>)");
  };
  EXPECT_EQ(cudnn("false"), full);
  EXPECT_EQ(cudnn("true"), full / 2);
  // is_causal as a keyword argument.
  EXPECT_EQ(flops(qkv, std::string("%0:2 = lethe.node "
                                   "\"aten._scaled_dot_product_efficient_"
                                   "attention.default\" fwd (%q, %q, %q) "
                                   "{lethe.attrs = {is_causal = true}} : ") +
                           types + ") -> (tensor<2x4x128x64xbf16>, "
                                   "tensor<2x4x128xf32>)"),
            full / 2);
  // Backward: 2.5x; q/k/v are operands 1..3; is_causal at position 14.
  EXPECT_EQ(flops(qkv, std::string("%0:3 = lethe.node "
                                   "\"aten._scaled_dot_product_cudnn_"
                                   "attention_backward.default\" bwd (%q, %q, "
                                   "%q, %q) {args = [{in = 0}, {in = 1}, {in "
                                   "= 2}, {in = 3}, unit, unit, unit, unit, "
                                   "unit, unit, unit, 128, 128, 0.1, false]}"
                                   " : (tensor<2x4x128x64xbf16>, ") +
                           (types + 1) +
                           ") -> (tensor<2x4x128x64xbf16>, "
                           "tensor<2x4x128x64xbf16>, "
                           "tensor<2x4x128x64xbf16>)"),
            2.5 * full);
  // The raw flash kernel lays q/k out [B, L, H, D]; Lk = 256 here.
  EXPECT_EQ(flops("%q: tensor<2x128x4x64xbf16>, %k: tensor<2x256x4x64xbf16>",
                  "%0 = lethe.node \"aten._flash_attention_forward.default\" "
                  "fwd (%q, %k, %k) : (tensor<2x128x4x64xbf16>, "
                  "tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>) -> "
                  "tensor<2x128x4x64xbf16>"),
            4.0 * 2 * 4 * 128 * 256 * 64);
}

TEST_F(CostModelTest, StableHloLinalgTosa) {
  // dot_general with batch dim 0 and contracting dim 2 (size 96).
  EXPECT_EQ(
      flops("%a: tensor<8x32x96xbf16>, %b: tensor<8x96x16xbf16>",
            "%0 = lethe.node \"stablehlo.dot_general\" fwd (%a, %b) "
            "{lethe.attrs = {dot_dimension_numbers = #stablehlo.dot<"
            "lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
            "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = "
            "[1]>}} : (tensor<8x32x96xbf16>, tensor<8x96x16xbf16>) -> "
            "tensor<8x32x16xbf16>"),
      2.0 * 8 * 32 * 16 * 96);
  // Contracting over the lhs's first dimension (a transposed operand).
  EXPECT_EQ(
      flops("%a: tensor<96x32xf32>, %b: tensor<96x16xf32>",
            "%0 = lethe.node \"stablehlo.dot_general\" fwd (%a, %b) "
            "{lethe.attrs = {dot_dimension_numbers = #stablehlo.dot<"
            "lhs_contracting_dimensions = [0], rhs_contracting_dimensions = "
            "[0]>}} : (tensor<96x32xf32>, tensor<96x16xf32>) -> "
            "tensor<32x16xf32>"),
      2.0 * 32 * 16 * 96);
  // convolution, NHWC x HWIO (o last) and the raw form with o first.
  EXPECT_EQ(
      flops("%a: tensor<2x32x32x16xbf16>, %b: tensor<3x3x16x8xbf16>",
            "%0 = lethe.node \"stablehlo.convolution\" fwd (%a, %b) "
            "{lethe.attrs = {dimension_numbers = #stablehlo.conv<[b, 0, 1, "
            "f]x[0, 1, i, o]->[b, 0, 1, f]>}} : (tensor<2x32x32x16xbf16>, "
            "tensor<3x3x16x8xbf16>) -> tensor<2x32x32x8xbf16>"),
      2.0 * (2 * 32 * 32 * 8) * 9 * 16);
  EXPECT_EQ(
      flops("%a: tensor<2x16x32x32xbf16>, %b: tensor<8x16x3x3xbf16>",
            "%0 = lethe.node \"stablehlo.convolution\" fwd (%a, %b) "
            "{lethe.attrs = {dimension_numbers = #stablehlo.conv<raw "
            "input_batch_dimension = 0, input_feature_dimension = 1, "
            "kernel_input_feature_dimension = 1, "
            "kernel_output_feature_dimension = 0>}} : "
            "(tensor<2x16x32x32xbf16>, tensor<8x16x3x3xbf16>) -> "
            "tensor<2x8x32x32xbf16>"),
      2.0 * (2 * 8 * 32 * 32) * 9 * 16);
  // linalg: transposed-b matmul and batch matmul, by element counts.
  EXPECT_EQ(flops("%a: tensor<64x128xf32>, %b: tensor<32x128xf32>, "
                  "%c: tensor<64x32xf32>",
                  "%0 = lethe.node \"linalg.matmul_transpose_b\" fwd (%a, %b, "
                  "%c) : (tensor<64x128xf32>, tensor<32x128xf32>, "
                  "tensor<64x32xf32>) -> tensor<64x32xf32>"),
            2.0 * 64 * 128 * 32);
  EXPECT_EQ(flops("%a: tensor<4x64x128xf32>, %b: tensor<4x128x32xf32>, "
                  "%c: tensor<4x64x32xf32>",
                  "%0 = lethe.node \"linalg.batch_matmul\" fwd (%a, %b, %c) "
                  ": (tensor<4x64x128xf32>, tensor<4x128x32xf32>, "
                  "tensor<4x64x32xf32>) -> tensor<4x64x32xf32>"),
            2.0 * 4 * 64 * 128 * 32);
  // linalg convolutions: the filter layout in the name says which filter
  // dims index the output.
  EXPECT_EQ(flops("%a: tensor<1x18x18x16xf32>, %b: tensor<3x3x16x8xf32>, "
                  "%c: tensor<1x16x16x8xf32>",
                  "%0 = lethe.node \"linalg.conv_2d_nhwc_hwcf\" fwd (%a, %b, "
                  "%c) : (tensor<1x18x18x16xf32>, tensor<3x3x16x8xf32>, "
                  "tensor<1x16x16x8xf32>) -> tensor<1x16x16x8xf32>"),
            2.0 * (16 * 16 * 8) * 9 * 16);
  EXPECT_EQ(flops("%a: tensor<1x18x18x16xf32>, %b: tensor<3x3x16xf32>, "
                  "%c: tensor<1x16x16x16xf32>",
                  "%0 = lethe.node \"linalg.depthwise_conv_2d_nhwc_hwc\" fwd "
                  "(%a, %b, %c) : (tensor<1x18x18x16xf32>, "
                  "tensor<3x3x16xf32>, tensor<1x16x16x16xf32>) -> "
                  "tensor<1x16x16x16xf32>"),
            2.0 * (16 * 16 * 16) * 9);
  // TOSA: conv2d weight [OC, KH, KW, IC]; depthwise [KH, KW, C, M];
  // matmul [N, H, C] x [N, C, W].
  EXPECT_EQ(flops("%a: tensor<1x16x16x4xf16>, %b: tensor<8x3x3x4xf16>, "
                  "%c: tensor<8xf16>",
                  "%0 = lethe.node \"tosa.conv2d\" fwd (%a, %b, %c) : "
                  "(tensor<1x16x16x4xf16>, tensor<8x3x3x4xf16>, "
                  "tensor<8xf16>) -> tensor<1x16x16x8xf16>"),
            2.0 * (16 * 16 * 8) * 9 * 4);
  EXPECT_EQ(flops("%a: tensor<1x16x16x4xf16>, %b: tensor<3x3x4x2xf16>, "
                  "%c: tensor<8xf16>",
                  "%0 = lethe.node \"tosa.depthwise_conv2d\" fwd (%a, %b, %c) "
                  ": (tensor<1x16x16x4xf16>, tensor<3x3x4x2xf16>, "
                  "tensor<8xf16>) -> tensor<1x16x16x8xf16>"),
            2.0 * (16 * 16 * 8) * 9);
  EXPECT_EQ(flops("%a: tensor<2x64x128xf32>, %b: tensor<2x128x32xf32>",
                  "%0 = lethe.node \"tosa.matmul\" fwd (%a, %b) : "
                  "(tensor<2x64x128xf32>, tensor<2x128x32xf32>) -> "
                  "tensor<2x64x32xf32>"),
            2.0 * 2 * 64 * 128 * 32);
}

TEST_F(CostModelTest, ModelChoiceAndTimes) {
  CostModel model(roundProfile());
  // 2*64*128*32 = 524288 FLOP at 100 TFLOP/s = 0.00524 us; bytes
  // (8192 + 4096 + 2048)*2 = 28672 B at 1 TB/s = 0.0287 us: memory-bound.
  NodeOp mm = parseNode("%a: tensor<64x128xbf16>, %b: tensor<128x32xbf16>",
                        "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                        "(tensor<64x128xbf16>, tensor<128x32xbf16>) -> "
                        "tensor<64x32xbf16>");
  OpCost cost = model.model(mm);
  EXPECT_EQ(cost.source, CostSource::Analytic);
  EXPECT_EQ(cost.flops, 524288.0);
  EXPECT_EQ(cost.bytes, 28672.0);
  EXPECT_NEAR(cost.timeUs, 0.028672 + 2, 1e-9);

  // In-place ops write the operand they alias; views write nothing.
  NodeOp inPlace = parseNode(
      "%a: tensor<1000xf32>",
      "%0 = lethe.node \"aten.add_.Tensor\" fwd (%a, %a) {aliases = "
      "array<i64: 0>} : (tensor<1000xf32>, tensor<1000xf32>) -> "
      "tensor<1000xf32>");
  EXPECT_FALSE(CostModel::isView(inPlace));
  EXPECT_EQ(CostModel::bytesMoved(inPlace), 8000.0);
  NodeOp view = parseNode("%a: tensor<10x100xf32>",
                          "%0 = lethe.node \"aten.view.default\" fwd (%a) "
                          "{aliases = array<i64: 0>} : (tensor<10x100xf32>) "
                          "-> tensor<1000xf32>");
  EXPECT_TRUE(CostModel::isView(view));
  EXPECT_EQ(model.model(view).timeUs, 1.0);
  // A view op recognised by kind even when the importer gave no alias.
  NodeOp transpose = parseNode("%a: tensor<10x100xf32>",
                               "%0 = lethe.node \"aten.t.default\" fwd (%a) "
                               ": (tensor<10x100xf32>) -> "
                               "tensor<100x10xf32>");
  EXPECT_TRUE(CostModel::isView(transpose));

  // A measured time wins, until a model run is asked for.
  NodeOp measured = parseNode(
      "%a: tensor<1000xf32>",
      "%0 = lethe.node \"aten.relu.default\" fwd (%a) {time_us = 7.5 : f64} "
      ": (tensor<1000xf32>) -> tensor<1000xf32>");
  EXPECT_EQ(model.estimate(measured).source, CostSource::Measured);
  EXPECT_EQ(model.estimate(measured).timeUs, 7.5);
  OpCost relu = model.model(measured);
  EXPECT_EQ(relu.source, CostSource::Bandwidth);
  EXPECT_TRUE(relu.knownKind);
  EXPECT_NEAR(relu.timeUs, 0.008 + 2, 1e-9);
}

TEST_F(CostModelTest, OpClassesPickKernelEfficiencies) {
  auto opClass = [&](llvm::StringRef args, llvm::StringRef body) {
    NodeOp node = parseNode(args, body);
    std::optional<ComputeWork> work =
        node ? CostModel::computeWork(node) : std::nullopt;
    return work ? work->opClass.str() : std::string("none");
  };
  EXPECT_EQ(opClass("%a: tensor<64x128xbf16>, %b: tensor<128x32xbf16>",
                    "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                    "(tensor<64x128xbf16>, tensor<128x32xbf16>) -> "
                    "tensor<64x32xbf16>"),
            "matmul");
  // N = 33 bf16 = 66 bytes: not a multiple of 16 bytes.
  EXPECT_EQ(opClass("%a: tensor<64x128xbf16>, %b: tensor<128x33xbf16>",
                    "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                    "(tensor<64x128xbf16>, tensor<128x33xbf16>) -> "
                    "tensor<64x33xbf16>"),
            "unaligned_matmul");
  // K = 12 f32 = 48 bytes is aligned; K = 12 bf16 = 24 bytes is not.
  EXPECT_EQ(opClass("%a: tensor<64x12xf32>, %b: tensor<12x32xf32>",
                    "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                    "(tensor<64x12xf32>, tensor<12x32xf32>) -> "
                    "tensor<64x32xf32>"),
            "matmul");
  EXPECT_EQ(opClass("%a: tensor<64x12xbf16>, %b: tensor<12x32xbf16>",
                    "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                    "(tensor<64x12xbf16>, tensor<12x32xbf16>) -> "
                    "tensor<64x32xbf16>"),
            "unaligned_matmul");
  // M counts too: it is the row length of a transposed left operand (the
  // weight gradient of a linear layer).
  EXPECT_EQ(opClass("%a: tensor<63x128xbf16>, %b: tensor<128x32xbf16>",
                    "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                    "(tensor<63x128xbf16>, tensor<128x32xbf16>) -> "
                    "tensor<63x32xbf16>"),
            "unaligned_matmul");
  EXPECT_EQ(opClass("%a: tensor<2x16x32x32xbf16>, %b: tensor<8x16x3x3xbf16>",
                    "%0 = lethe.node \"aten.convolution.default\" fwd (%a, "
                    "%b) : (tensor<2x16x32x32xbf16>, tensor<8x16x3x3xbf16>) "
                    "-> tensor<2x8x32x32xbf16>"),
            "convolution");
  EXPECT_EQ(opClass("%q: tensor<2x4x128x64xbf16>",
                    "%0:3 = lethe.node \"aten._scaled_dot_product_flash_"
                    "attention_backward.default\" bwd (%q, %q, %q, %q) : "
                    "(tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>, "
                    "tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>) -> "
                    "(tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>, "
                    "tensor<2x4x128x64xbf16>)"),
            "attention_backward");

  // The class's efficiency divides the rate: 524288 FLOP at 100 TFLOP/s
  // * 0.5 = 0.0105 us, still under the 0.0287 us of bytes; at 0.1 it is
  // 0.0524 us.
  DeviceProfile profile = roundProfile();
  profile.kernelEfficiency["unaligned_matmul"] = 0.1;
  CostModel model(profile);
  NodeOp odd = parseNode("%a: tensor<64x128xbf16>, %b: tensor<128x32xbf16>, "
                         "%c: tensor<128x33xbf16>",
                         "%0 = lethe.node \"aten.mm.default\" fwd (%a, %b) : "
                         "(tensor<64x128xbf16>, tensor<128x32xbf16>) -> "
                         "tensor<64x32xbf16>\n"
                         "%1 = lethe.node \"aten.mm.default\" fwd (%a, %c) : "
                         "(tensor<64x128xbf16>, tensor<128x33xbf16>) -> "
                         "tensor<64x33xbf16>");
  ASSERT_TRUE(odd);
  NodeOp unaligned = cast<NodeOp>(odd->getNextNode());
  EXPECT_NEAR(model.model(odd).timeUs, 0.028672 + 2, 1e-9);
  EXPECT_NEAR(model.model(unaligned).timeUs,
              2.0 * 64 * 128 * 33 / (100e12 * 0.1) * 1e6 + 2, 1e-9);
}

TEST_F(CostModelTest, GathersReadOnlyWhatTheyGather) {
  // index.Tensor(self [1000, 64] f32, idx [10] i64) -> [10, 64]: reads the
  // 10 rows (2560 B) and the indices (80 B), writes 2560 B.
  NodeOp index = parseNode(
      "%a: tensor<1000x64xf32>, %i: tensor<10xi64>",
      "%0 = lethe.node \"aten.index.Tensor\" fwd (%a, %i) : "
      "(tensor<1000x64xf32>, tensor<10xi64>) -> tensor<10x64xf32>");
  EXPECT_EQ(CostModel::bytesMoved(index), 2560.0 + 80 + 2560);
  // nll_loss_forward(logp [8, 1000] f32, target [8] i64): one element per
  // target (32 B) plus the targets (64 B); writes two f32 scalars.
  NodeOp nll = parseNode(
      "%a: tensor<8x1000xf32>, %t: tensor<8xi64>",
      "%0:2 = lethe.node \"aten.nll_loss_forward.default\" fwd (%a, %t) : "
      "(tensor<8x1000xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<f32>)");
  EXPECT_EQ(CostModel::bytesMoved(nll), 32.0 + 64 + 8);
  // nll_loss_backward(grad, self, target, weight?, total_weight): self is
  // only a shape; the 32,000-byte gradient is written.
  NodeOp nllBackward = parseNode(
      "%g: tensor<f32>, %a: tensor<8x1000xf32>, %t: tensor<8xi64>",
      "%0 = lethe.node \"aten.nll_loss_backward.default\" bwd (%g, %a, %t, "
      "%g) : (tensor<f32>, tensor<8x1000xf32>, tensor<8xi64>, tensor<f32>) "
      "-> tensor<8x1000xf32>");
  EXPECT_EQ(CostModel::bytesMoved(nllBackward), 4.0 + 0 + 64 + 32000);
}

TEST_F(CostModelTest, KnownAndUnknownKinds) {
  for (const char *kind :
       {"aten.native_layer_norm_backward.default", "aten.add.Tensor",
        "aten._log_softmax.default", "aten.native_dropout.default",
        "aten._foreach_add_.List", "stablehlo.add", "stablehlo.reduce",
        "tosa.add", "linalg.fill", "tensor.extract_slice", "arith.addf"})
    EXPECT_TRUE(CostModel::isKnownMemoryBoundKind(kind)) << kind;
  // Arithmetic the model cannot count must not pass silently.
  for (const char *kind :
       {"aten.einsum.default", "aten.tensordot.default", "aten._cudnn_rnn.default",
        "stablehlo.custom_call", "linalg.generic", "mydialect.op",
        "aten.frobnicate.default"})
    EXPECT_FALSE(CostModel::isKnownMemoryBoundKind(kind)) << kind;
}

TEST_F(CostModelTest, RingCollectives) {
  CostModel model(roundProfile());
  module = parseSourceString<ModuleOp>(
      "func.func @f(%a: tensor<1000xf32>, %b: tensor<4000xf32>) {\n"
      "  %0 = lethe.collective all_gather %a group [0, 1, 2, 3] fwd : "
      "tensor<1000xf32> -> tensor<4000xf32>\n"
      "  %1 = lethe.collective reduce_scatter %b group [0, 1, 2, 3] bwd : "
      "tensor<4000xf32> -> tensor<1000xf32>\n"
      "  %2 = lethe.collective all_reduce %b group [0, 1, 2, 3] bwd : "
      "tensor<4000xf32> -> tensor<4000xf32>\n"
      "  %3 = lethe.collective all_reduce %b group [7] bwd : "
      "tensor<4000xf32> -> tensor<4000xf32>\n"
      "  lethe.collective send %a peer 1 group [0, 1] fwd : tensor<1000xf32>\n"
      "  %4 = lethe.collective recv peer 1 group [0, 1] bwd : -> "
      "tensor<1000xf32>\n"
      "  return\n}\n",
      &context);
  ASSERT_TRUE(module);
  std::vector<double> bytes;
  module->walk([&](CollectiveOp op) { bytes.push_back(model.model(op).bytes); });
  // 3/4 of the 16,000-byte full buffer; twice that for all-reduce; nothing
  // moves in a group of one; a send or recv moves its whole tensor.
  EXPECT_EQ(bytes, (std::vector<double>{12000, 12000, 24000, 0, 4000, 4000}));
}

TEST_F(CostModelTest, DtypeNames) {
  Builder b(&context);
  EXPECT_EQ(CostModel::dtypeName(b.getBF16Type()), "bf16");
  EXPECT_EQ(CostModel::dtypeName(b.getF16Type()), "f16");
  EXPECT_EQ(CostModel::dtypeName(b.getF32Type()), "f32");
  EXPECT_EQ(CostModel::dtypeName(b.getF64Type()), "f64");
  EXPECT_EQ(CostModel::dtypeName(b.getType<Float8E4M3FNType>()), "f8");
  EXPECT_EQ(CostModel::dtypeName(b.getI8Type()), "i8");
  EXPECT_EQ(CostModel::dtypeName(b.getI32Type()), "f32");
}

} // namespace

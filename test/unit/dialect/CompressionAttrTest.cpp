//===- CompressionAttrTest.cpp - wire sizes and collective compatibility --===//
#include "zen/Dialect/ZenDialect.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace zen;

namespace {
class CompressionAttrTest : public ::testing::Test {
protected:
  CompressionAttrTest() { context.loadDialect<ZenDialect>(); }
  CompressionAttr make(CompressionMethod method, double ratio = 0.0, int64_t rank = 0) {
    return CompressionAttr::get(&context, method, ratio, rank);
  }
  mlir::MLIRContext context;
};

TEST_F(CompressionAttrTest, DenseCastsHalveTheBytes) {
  EXPECT_EQ(make(CompressionMethod::none).compressedBytes(1000, 1), 4000);
  EXPECT_EQ(make(CompressionMethod::fp16).compressedBytes(1000, 1), 2000);
  EXPECT_EQ(make(CompressionMethod::bf16).compressedBytes(1000, 1), 2000);
}

TEST_F(CompressionAttrTest, Int8CarriesOneScalePerChunk) {
  EXPECT_EQ(make(CompressionMethod::int8).compressedBytes(2048, 1), 2048 + 2 * 4);
  EXPECT_EQ(make(CompressionMethod::int8).compressedBytes(2049, 1), 2049 + 3 * 4);
}

TEST_F(CompressionAttrTest, SparseKeepsValueAndIndexPerKeptElement) {
  EXPECT_EQ(make(CompressionMethod::topk, 0.01).compressedBytes(100000, 1), 8 * 1000);
  EXPECT_EQ(make(CompressionMethod::randomk, 0.5).compressedBytes(3, 1), 8 * 2);
  // At least one element is always kept.
  EXPECT_EQ(make(CompressionMethod::topk, 0.001).compressedBytes(10, 1), 8);
}

TEST_F(CompressionAttrTest, SignIsOneBitPlusScale) {
  EXPECT_EQ(make(CompressionMethod::sign).compressedBytes(64, 1), 8 + 4);
}

TEST_F(CompressionAttrTest, PowerSgdSendsTwoFactors) {
  // 1024 x 1024 view at rank 4: P (1024 x 4) and Q (1024 x 4) in fp32.
  EXPECT_EQ(make(CompressionMethod::powersgd, 0.0, 4).compressedBytes(1024 * 1024, 1024),
            4 * 4 * (1024 + 1024));
}

TEST_F(CompressionAttrTest, OnlyDenseAndLowRankPayloadsAreAllReducible) {
  EXPECT_TRUE(make(CompressionMethod::fp16).supports(SyncScheme::all_reduce));
  EXPECT_TRUE(make(CompressionMethod::int8).supports(SyncScheme::all_reduce));
  EXPECT_TRUE(make(CompressionMethod::powersgd, 0.0, 2).supports(SyncScheme::all_reduce));
  EXPECT_FALSE(make(CompressionMethod::topk, 0.1).supports(SyncScheme::all_reduce));
  EXPECT_TRUE(make(CompressionMethod::randomk, 0.1).supports(SyncScheme::all_reduce));
  EXPECT_FALSE(make(CompressionMethod::sign).supports(SyncScheme::all_reduce));
}

TEST_F(CompressionAttrTest, InvalidParametersAreRejected) {
  auto emit = [&] { return mlir::emitError(mlir::UnknownLoc::get(&context)); };
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &) { return mlir::success(); });
  EXPECT_TRUE(mlir::failed(
      CompressionAttr::verify(emit, CompressionMethod::topk, llvm::APFloat(0.0), 0)));
  EXPECT_TRUE(mlir::failed(
      CompressionAttr::verify(emit, CompressionMethod::powersgd, llvm::APFloat(0.0), 0)));
  EXPECT_TRUE(mlir::failed(
      CompressionAttr::verify(emit, CompressionMethod::fp16, llvm::APFloat(0.0), 3)));
  EXPECT_TRUE(mlir::succeeded(
      CompressionAttr::verify(emit, CompressionMethod::topk, llvm::APFloat(0.25), 0)));
}
} // namespace

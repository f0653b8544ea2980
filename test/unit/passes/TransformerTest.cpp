//===- TransformerTest.cpp - structural transformer recognition ----------===//
//
// Exact shapes of the example models and of zenopt-modelgen models (graph-only
// ONNX files in Inputs/, generated with the commands noted beside each test).
//
//===----------------------------------------------------------------------===//
#include "zen/Importer/ModelGraph.h"
#include "zen/Importer/ZenImporter.h"
#include "zen/Analysis/Transformer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace zen;

namespace {

std::optional<cost::TransformerShape> recognize(const std::string &path, std::string &whyNot) {
  mlir::MLIRContext context;
  context.loadDialect<ZenDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importer::buildZenModule(context, importer::importModel(path));
  return recognizeTransformer(*module, &whyNot);
}

std::string example(const std::string &name) {
  return std::string(ZEN_SOURCE_DIR) + "/examples/models/" + name + ".onnx";
}
std::string generated(const std::string &name) {
  return std::string(ZEN_SOURCE_DIR) + "/test/unit/passes/Inputs/" + name + ".onnx";
}

struct Expected {
  std::string family;
  int64_t layers, hidden, heads, ffn, seq, vocab, batch;
  double layerParams, embeddingParams, headParams;
  std::vector<std::string> replicated;
};

void expectShape(const std::string &path, const Expected &expected) {
  std::string whyNot;
  std::optional<cost::TransformerShape> shape = recognize(path, whyNot);
  ASSERT_TRUE(shape) << path << ": " << whyNot;
  EXPECT_EQ(shape->family, expected.family);
  EXPECT_EQ(shape->layers, expected.layers);
  EXPECT_EQ(shape->hidden, expected.hidden);
  EXPECT_EQ(shape->heads, expected.heads);
  EXPECT_EQ(shape->ffn, expected.ffn);
  EXPECT_EQ(shape->seq, expected.seq);
  EXPECT_EQ(shape->vocab, expected.vocab);
  EXPECT_EQ(shape->modelBatch, expected.batch);
  EXPECT_EQ(shape->layerParams, expected.layerParams);
  EXPECT_EQ(shape->embeddingParams, expected.embeddingParams);
  EXPECT_EQ(shape->headParams, expected.headParams);
  EXPECT_EQ(shape->replicated, expected.replicated);
}

// Per block: QKV, attention output, two MLP GEMMs with biases, two norms.
double blockParams(double h, double f) { return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h; }

TEST(Transformer, Gpt2Small) {
  // Fused in_proj (2304 x 768 through a Transpose), Gemm attention output, untied head.
  expectShape(example("gpt2_small"),
              {"gpt", 12, 768, 12, 3072, 128, 50257, 1, blockParams(768, 3072),
               50257.0 * 768 + 1024.0 * 768, 2 * 768 + 50257.0 * 768, {"/head/MatMul"}});
}

TEST(Transformer, BertBaseEncoder) {
  // Post-LN encoder blocks only: no embedding, no head.
  expectShape(example("bert_base_encoder"),
              {"bert", 12, 768, 12, 3072, 128, 0, 1, blockParams(768, 3072), 0, 0, {}});
}

TEST(Transformer, ModelgenGpt) {
  // zenopt-modelgen gpt --layers 2 --hidden 128 --heads 4 --vocab 1000 --seq 32
  expectShape(generated("gpt_l2_h128"),
              {"gpt", 2, 128, 4, 512, 32, 1000, 1, blockParams(128, 512),
               1000.0 * 128 + 32.0 * 128, 2 * 128 + 128.0 * 1000, {"head/MatMul_144"}});
  // zenopt-modelgen gpt --layers 3 --hidden 256 --heads 8 --ffn 768 --vocab 512 --seq 64
  expectShape(generated("gpt_l3_h256"),
              {"gpt", 3, 256, 8, 768, 64, 512, 1, blockParams(256, 768),
               512.0 * 256 + 64.0 * 256, 2 * 256 + 256.0 * 512, {"head/MatMul_207"}});
}

TEST(Transformer, ModelgenBert) {
  // zenopt-modelgen bert --layers 2 --hidden 128 --heads 4 --vocab 1000 --seq 32
  // (token and position tables and the embedding norm; no output projection).
  expectShape(generated("bert_l2_h128"),
              {"bert", 2, 128, 4, 512, 32, 1000, 1, blockParams(128, 512),
               1000.0 * 128 + 32.0 * 128 + 2 * 128, 0, {}});
  // zenopt-modelgen bert --layers 4 --hidden 192 --heads 3 --vocab 300 --seq 16
  expectShape(generated("bert_l4_h192"),
              {"bert", 4, 192, 3, 768, 16, 300, 1, blockParams(192, 768),
               300.0 * 192 + 16.0 * 192 + 2 * 192, 0, {}});
}

TEST(Transformer, NotATransformer) {
  std::string whyNot;
  EXPECT_FALSE(recognize(example("resnet50"), whyNot));
  EXPECT_NE(whyNot.find("no transformer block"), std::string::npos) << whyNot;
}

} // namespace

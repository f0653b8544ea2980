//===- ImporterTest.cpp - ModelGraph and zen IR properties ----------------===//
#include "zen/Dialect/ZenDialect.h"
#include "zen/Importer/ModelGraph.h"
#include "zen/Importer/ZenImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

using namespace zen::importer;

namespace {

std::string modelPath(const std::string &name) {
  return std::string(ZEN_SOURCE_DIR) + "/examples/models/" + name + ".onnx";
}

const char *kSymbolicMlp = R"(<ir_version: 8, opset_import: ["" : 14]>
mlp (float[N, 8] X) => (float[N, 4] Y) <float[8, 16] w1 = {0.0}, float[16, 4] w2 = {0.0}> {
  H = MatMul(X, w1)
  R = Relu(H)
  Y = MatMul(R, w2)
}
)";

class RealModel : public ::testing::TestWithParam<const char *> {};

// Every parameter's gradient is complete after the last backward step producing a
// contribution to it, and ready orders are 0..n-1 in backward-step order.
TEST_P(RealModel, GradientReadyPointIsTheLastBackwardUse) {
  ModelGraph graph = importModel(modelPath(GetParam()));
  ASSERT_FALSE(graph.parameters.empty());
  std::set<int> orders;
  int previousStep = -1, previousOrder = -1;
  for (int index : graph.parametersByReadyOrder()) {
    const Parameter &param = graph.parameters[index];
    orders.insert(param.readyOrder);
    EXPECT_GE(param.readyStep, previousStep) << param.name;
    EXPECT_GT(param.readyOrder, previousOrder) << param.name;
    previousStep = param.readyStep;
    previousOrder = param.readyOrder;
    int lastContribution = -1;
    for (size_t s = 0; s < graph.backward.size(); ++s)
      for (int tensor : graph.backward[s].gradTensors)
        if (tensor == param.tensor)
          lastContribution = static_cast<int>(s);
    EXPECT_EQ(param.readyStep, lastContribution) << param.name;
  }
  EXPECT_EQ(orders.size(), graph.parameters.size());
  EXPECT_EQ(*orders.rbegin(), static_cast<int>(graph.parameters.size()) - 1);
}

// Backward costs about twice the forward (data + weight gradients).
TEST_P(RealModel, BackwardIsAboutTwiceForward) {
  ModelGraph graph = importModel(modelPath(GetParam()));
  double ratio = static_cast<double>(graph.backwardFlops()) / graph.forwardFlops();
  EXPECT_GT(ratio, 1.8);
  EXPECT_LT(ratio, 2.2);
  EXPECT_TRUE(graph.unsupportedOps().empty());
  EXPECT_TRUE(graph.warnings.empty()) << graph.warnings.front();
}

// The IR contract: one zen.param and one zen.gradient per parameter, gradients in
// ready order, every backward op after every forward op.
TEST_P(RealModel, ModuleFollowsTheContract) {
  ModelGraph graph = importModel(modelPath(GetParam()));
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = buildZenModule(context, graph);
  ASSERT_TRUE(module);
  auto function = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(function);
  std::vector<std::string> params;
  std::vector<int64_t> readyOrders;
  bool inBackward = false;
  function.walk([&](mlir::Operation *op) {
    if (auto param = mlir::dyn_cast<zen::ParamOp>(op))
      params.push_back(param.getName().str());
    if (auto gradient = mlir::dyn_cast<zen::GradientOp>(op))
      readyOrders.push_back(gradient.getReadyOrder());
    if (auto compute = mlir::dyn_cast<zen::ComputeOp>(op)) {
      bool backward = compute.getPhase() == zen::Phase::backward;
      EXPECT_TRUE(backward || !inBackward) << "forward op after the backward pass began";
      inBackward |= backward;
    }
  });
  ASSERT_EQ(params.size(), graph.parameters.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i], graph.parameters[i].name);
  ASSERT_EQ(readyOrders.size(), graph.parameters.size());
  for (size_t i = 0; i < readyOrders.size(); ++i)
    EXPECT_EQ(readyOrders[i], static_cast<int64_t>(i));
  EXPECT_EQ(module->getOperation()->getAttrOfType<mlir::StringAttr>("zen.model_hash").str(),
            graph.modelHash);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, RealModel,
                         ::testing::Values("resnet50", "vgg16", "bert_base_encoder",
                                           "gpt2_small"));

// A baked-in export batch scales activations' costs, never the parameters'.
TEST(Batch, ScaledModeScalesBatchProportionalCostsOnly) {
  ModelGraph one = importModel(modelPath("resnet50"));
  ModelGraph eight = importModel(modelPath("resnet50"), ImportOptions{8});
  EXPECT_EQ(eight.batchMode, BatchMode::Scaled);
  EXPECT_EQ(eight.batch, 8);
  EXPECT_EQ(eight.forwardFlops(), 8 * one.forwardFlops());
  EXPECT_EQ(eight.trainableBytes(), one.trainableBytes());
  double backwardRatio = static_cast<double>(eight.backwardFlops()) / one.backwardFlops();
  EXPECT_NEAR(backwardRatio, 8.0, 0.01);
  // The first conv reads a batch-proportional input (scaled) and a weight (not).
  const Node &conv1 = one.nodes.front();
  ASSERT_EQ(conv1.opType, "Conv");
  const Tensor &weight = one.tensors[conv1.inputs[1]];
  const Tensor &input = one.tensors[conv1.inputs[0]];
  const Tensor &output = one.tensors[conv1.outputs[0]];
  EXPECT_EQ(one.nodes.front().bytes, input.bytes + weight.bytes + output.bytes);
  EXPECT_EQ(eight.nodes.front().bytes, 8 * input.bytes + weight.bytes + 8 * output.bytes);
}

TEST(Batch, SymbolicModeReinfersShapes) {
  ModelGraph graph = importModelFromBytes(kSymbolicMlp, "mlp.onnxtxt", ImportOptions{4});
  EXPECT_EQ(graph.batchMode, BatchMode::Symbolic);
  EXPECT_EQ(graph.batch, 4);
  EXPECT_EQ(graph.tensors[graph.graphInputs[0]].dims, (std::vector<int64_t>{4, 8}));
  // 2 * (4*16*8 + 4*4*16) + 4*16 (Relu)
  EXPECT_EQ(graph.forwardFlops(), 2 * (4 * 16 * 8 + 4 * 4 * 16) + 4 * 16);
  ModelGraph defaultBatch = importModelFromBytes(kSymbolicMlp, "mlp.onnxtxt");
  EXPECT_EQ(defaultBatch.batch, 1);
  EXPECT_EQ(graph.forwardFlops(), 4 * defaultBatch.forwardFlops());
}

// Nodes listed out of dependency order are sorted (stably): the graph imports as when the
// file lists them in order, which is taken as it stands.
TEST(Graph, NodesOutOfOrderImportAsInOrder) {
  const char *kShuffledMlp = R"(<ir_version: 8, opset_import: ["" : 14]>
mlp (float[2, 8] X) => (float[2, 4] Y) <float[8, 16] w1 = {0.0}, float[16, 4] w2 = {0.0}> {
  Y = MatMul(R, w2)
  R = Relu(H)
  H = MatMul(X, w1)
}
)";
  ModelGraph inOrder = importModelFromBytes(kSymbolicMlp, "mlp.onnxtxt", ImportOptions{2});
  ModelGraph shuffled = importModelFromBytes(kShuffledMlp, "shuffled.onnxtxt");
  ASSERT_EQ(shuffled.nodes.size(), inOrder.nodes.size());
  for (size_t n = 0; n < inOrder.nodes.size(); ++n) {
    EXPECT_EQ(shuffled.nodes[n].opType, inOrder.nodes[n].opType) << n;
    EXPECT_EQ(shuffled.nodes[n].flops, inOrder.nodes[n].flops) << n;
    for (size_t o = 0; o < inOrder.nodes[n].outputs.size(); ++o)
      EXPECT_EQ(shuffled.tensors[shuffled.nodes[n].outputs[o]].name,
                inOrder.tensors[inOrder.nodes[n].outputs[o]].name);
  }
  EXPECT_EQ(shuffled.forwardFlops(), inOrder.forwardFlops());
  EXPECT_EQ(shuffled.backwardFlops(), inOrder.backwardFlops());
}

// ImportOptions::parsed hears once, after the parse, how large the graph is without the
// weights stored in the file: what zenopt sizes its heap from.
TEST(Import, ParsedReportsTheGraphWithoutItsWeights) {
  onnx::ModelProto model;
  ASSERT_TRUE(onnx::OnnxParser::Parse(model, R"(<ir_version: 8, opset_import: ["" : 14]>
mlp (float[2, 8] X) => (float[2, 4] Y) <float[8, 16] w1 = {0.0}, float[16, 4] w2 = {0.0}> {
  H = MatMul(X, w1)
  Y = MatMul(H, w2)
}
)").IsOK());
  const std::string weightless = model.SerializeAsString();
  for (onnx::TensorProto &weight : *model.mutable_graph()->mutable_initializer()) {
    int64_t elements = 1;
    for (int64_t dim : weight.dims())
      elements *= dim;
    weight.clear_float_data();
    weight.set_raw_data(std::string(size_t(elements) * sizeof(float), '\0'));
  }
  const std::string withWeights = model.SerializeAsString();
  ASSERT_GT(withWeights.size(), weightless.size() + 8 * 16 * 4);

  std::vector<uint64_t> reported;
  ImportOptions options;
  options.parsed = [&](uint64_t graphBytes) { reported.push_back(graphBytes); };
  ModelGraph graph = importModelFromBytes(withWeights, "weights.onnx", options);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_LE(reported[0], weightless.size());
  EXPECT_GT(reported[0], weightless.size() / 2);
  EXPECT_EQ(graph.forwardFlops(), importModelFromBytes(weightless, "w.onnx").forwardFlops());
}

TEST(Errors, CarryExitCodes) {
  try {
    importModel("/nonexistent/model.onnx");
    FAIL() << "no error";
  } catch (const ImportError &error) {
    EXPECT_EQ(error.kind, zen::ErrorKind::Unreadable);
    EXPECT_NE(std::string(error.what()).find("/nonexistent/model.onnx"), std::string::npos);
  }
  std::ifstream file(modelPath("vgg16"), std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  std::string truncated = bytes.str().substr(0, bytes.str().size() / 2);
  try {
    importModelFromBytes(truncated, "half.onnx");
    FAIL() << "no error";
  } catch (const ImportError &error) {
    EXPECT_EQ(error.kind, zen::ErrorKind::BadInput);
    EXPECT_NE(std::string(error.what()).find("half.onnx"), std::string::npos);
  }
}

TEST(Hash, IsFnv1a64) {
  EXPECT_EQ(fnv1a64Hex(""), "cbf29ce484222325");
  EXPECT_EQ(fnv1a64Hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(fnv1a64Hex("foobar"), "85944171f73967e8");
}

} // namespace

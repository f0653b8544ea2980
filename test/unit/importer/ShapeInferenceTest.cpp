//===- ShapeInferenceTest.cpp - the memoized driver against ONNX's --------===//
//
// The importer's shape inference runs ONNX's inference function once per distinct
// node (ShapeInference.h) and hands every graph it does not cover to ONNX's
// InferShapes. Loading a model either way must give byte-identical models, or the
// same error.
//
//===----------------------------------------------------------------------===//
#include "OnnxLoader.h"

#include "zen/Importer/ModelGraph.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace zen::importer;
using detail::ShapeInferenceDriver;

namespace {

namespace fs = std::filesystem;

std::string readBytes(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// The loaded model's bytes, or "error: " and the import error.
struct Loaded {
  std::string result;
  bool memoized = false;
};

Loaded load(const std::string &bytes, const std::string &path, ShapeInferenceDriver driver) {
  try {
    detail::LoadedModel loaded = detail::loadOnnxModel(bytes, path, ImportOptions{}, driver);
    return {loaded.model->SerializeAsString(), loaded.shapesMemoized};
  } catch (const ImportError &error) {
    return {std::string("error: ") + error.what(), false};
  }
}

/// Loads `path` with both drivers; returns whether the memoized one covered it.
bool expectSameAsOnnx(const std::string &bytes, const std::string &path) {
  Loaded memoized = load(bytes, path, ShapeInferenceDriver::Memoized);
  Loaded onnx = load(bytes, path, ShapeInferenceDriver::Onnx);
  EXPECT_FALSE(onnx.memoized);
  EXPECT_EQ(memoized.result.rfind("error: ", 0) == 0, onnx.result.rfind("error: ", 0) == 0)
      << path << ": " << memoized.result.substr(0, 300) << " vs " << onnx.result.substr(0, 300);
  EXPECT_TRUE(memoized.result == onnx.result) << path << " loads differently";
  return memoized.memoized;
}

/// Every model file the importer's tests use: real exports, the cost-rule and MoE
/// graphs, the malformed ones.
std::vector<fs::path> testModels() {
  std::vector<fs::path> paths;
  for (const char *root : {"/examples/models", "/test/Importer"})
    for (const auto &entry : fs::recursive_directory_iterator(std::string(ZEN_SOURCE_DIR) + root)) {
      const std::string extension = entry.path().extension().string();
      if (extension == ".onnx" || extension == ".onnxtxt")
        paths.push_back(entry.path());
    }
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(MemoizedShapeInference, LoadsEveryTestModelAsOnnxDoes) {
  std::set<std::string> memoized;
  for (const fs::path &path : testModels())
    if (expectSameAsOnnx(readBytes(path), path.string()))
      memoized.insert(path.filename().string());
  // The static graphs take the memoized driver (the comparison above means something for
  // them); exports computing shapes at run time (BERT's, GPT-2's) need data propagation.
  for (const char *name : {"resnet50.onnx", "vgg16.onnx", "conv.test.onnxtxt", "norms.test.onnxtxt",
                           "pointwise.test.onnxtxt", "onnxruntime.test.onnxtxt"})
    EXPECT_TRUE(memoized.count(name)) << name << " did not take the memoized driver";
  // Shape data propagated (Shape -> Gather -> Concat -> Reshape) or dimensions left
  // unknown: ONNX's driver.
  for (const char *name : {"gpt2_small.onnx", "bert_base_encoder.onnx", "movement.test.onnxtxt",
                           "contractions.test.onnxtxt"})
    EXPECT_FALSE(memoized.count(name)) << name;
}

TEST(MemoizedShapeInference, LoadsGeneratedModelsAsOnnxDoes) {
  const fs::path dir = fs::path(ZEN_BINARY_DIR) / "test-memoized-shape-inference";
  fs::create_directories(dir);
  const std::string modelgen = std::string(ZEN_BINARY_DIR) + "/bin/zenopt-modelgen";
  // The MoE graph's dispatch has dimensions ONNX leaves unknown: ONNX's driver.
  for (const auto &[args, memoizable] : std::vector<std::pair<std::string, bool>>{
           {"gpt --layers 3 --hidden 64 --heads 4 --seq 16 --vocab 100", true},
           {"bert --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 100", true},
           {"mlp --tensors 40 --hidden 32", true},
           {"moe --layers 4 --hidden 64 --heads 4 --seq 16 --vocab 100 --experts 4 --top-k 2 "
            "--moe-every 2", false}}) {
    const fs::path path = dir / (args.substr(0, args.find(' ')) + ".onnx");
    ASSERT_EQ(std::system((modelgen + " " + args + " -o " + path.string()).c_str()), 0) << args;
    EXPECT_EQ(expectSameAsOnnx(readBytes(path), path.string()), memoizable) << args;
  }
}

// Two reshapes of the same input type to different constant shapes: the inference reads
// the shape's data, so the second may not take the first's output type.
TEST(MemoizedShapeInference, NodesReadingDifferentDataAreInferredApart) {
  const std::string model = R"(<ir_version: 8, opset_import: ["" : 14]>
reshapes (float[4, 6] X) => (float[24] A, float[2, 12] B, float[2, 12] C, float[3, 8] D) <float[6, 6] w = {0.0}, int64[1] flat = {24}, int64[2] wide = {2, 12}> {
  H = MatMul(X, w)
  A = Reshape(H, flat)
  B = Reshape(H, wide)
  tall = Constant<value = int64[2] {3, 8}>()
  C = Reshape(H, wide)
  D = Reshape(H, tall)
}
)";
  EXPECT_TRUE(expectSameAsOnnx(model, "reshapes.onnxtxt"));
  Loaded loaded = load(model, "reshapes.onnxtxt", ShapeInferenceDriver::Memoized);
  onnx::ModelProto inferred;
  ASSERT_TRUE(inferred.ParseFromString(loaded.result));
  std::map<std::string, std::vector<int64_t>> dims;
  for (const onnx::ValueInfoProto &output : inferred.graph().output())
    for (const auto &dim : output.type().tensor_type().shape().dim())
      dims[output.name()].push_back(dim.dim_value());
  EXPECT_EQ(dims["A"], (std::vector<int64_t>{24}));
  EXPECT_EQ(dims["B"], (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(dims["C"], (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(dims["D"], (std::vector<int64_t>{3, 8}));
}

// A declared type the inference contradicts: the memoized driver hands the graph to
// ONNX, whose error the importer reports.
TEST(MemoizedShapeInference, ContradictedDeclarationFailsAsInOnnx) {
  const std::string model = R"(<ir_version: 8, opset_import: ["" : 14]>
bad (float[4, 6] X) => (float[4, 5] Y) <float[6, 6] w = {0.0}> {
  Y = MatMul(X, w)
}
)";
  Loaded memoized = load(model, "bad.onnxtxt", ShapeInferenceDriver::Memoized);
  EXPECT_NE(memoized.result.find("shape inference failed"), std::string::npos) << memoized.result;
  expectSameAsOnnx(model, "bad.onnxtxt");
}

} // namespace
